// The caching device arena: best-fit sub-allocation from large segments that are kept once
// obtained, so repeated loads and runs never go back to cudaMalloc (DESIGN §5). The bookkeeping
// is device-independent; the segments come from a SegmentAllocator (cudaMalloc, or a fake in tests).
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "runtime/Status.h"

namespace tandem {

/// Where segments come from. reserve() returns a block of `bytes` or an error text (the
/// driver's, e.g. "cudaMalloc: out of memory"); release() gives a whole segment back.
class SegmentAllocator {
 public:
  virtual ~SegmentAllocator() = default;
  virtual Status reserve(size_t bytes, void** out) = 0;
  virtual void release(void* p) = 0;
};

class CachingArena {
 public:
  static constexpr size_t kAlignment = 256;          // cudaMalloc's alignment; every block keeps it
  static constexpr size_t kMinSegment = 2u << 20;    // grow by at least 2 MiB

  /// `device` names the device in messages. `preallocateBytes` > 0: reserve one segment of that
  /// size now and never grow (the --gpu-memory-fraction mode); 0: grow on demand.
  CachingArena(std::string device, SegmentAllocator* segments, size_t preallocateBytes = 0);
  ~CachingArena();
  CachingArena(const CachingArena&) = delete;
  CachingArena& operator=(const CachingArena&) = delete;

  /// Error from the constructor's preallocation, if any.
  const Status& initStatus() const { return init_; }

  /// A block of at least `bytes` (rounded up to kAlignment; 0 bytes gets a 256-byte block).
  /// Out of memory is an error naming `forWhat`, the bytes asked for and the arena's state:
  /// "out of memory on cuda:0: <forWhat> asked for 1048576 bytes (in use 0, cached 0, limit ...)".
  /// When growing fails, free cached segments are released and the reserve is retried once.
  Status allocate(size_t bytes, const std::string& forWhat, void** out);
  /// Returns a block to the cache (coalesced with free neighbours); never to the device.
  void free(void* p);
  /// Releases every segment with no live block (the cache); returns the bytes released.
  size_t releaseCached();

  size_t inUseBytes() const;     // live blocks, rounded sizes
  size_t peakBytes() const;      // most inUseBytes ever
  size_t reservedBytes() const;  // segments held (in use + cached)
  size_t segmentCount() const;
  /// The most bytes this arena may ever hold: the preallocated size when fixed, 0 when it grows.
  size_t limitBytes() const;

 private:
  struct Block {
    char* segment;
    size_t size;
    bool free;
  };
  Status growLocked(size_t bytes);
  size_t releaseCachedLocked();

  std::string device_;
  SegmentAllocator* segments_;
  bool fixed_ = false;
  Status init_;
  mutable std::mutex mu_;
  std::map<char*, size_t> segmentSizes_;          // segment base -> bytes
  std::map<char*, Block> blocks_;                 // every block by address
  std::multimap<size_t, char*> freeBySize_;       // free blocks, best fit first
  size_t inUse_ = 0, peak_ = 0, reserved_ = 0;
};

}  // namespace tandem
