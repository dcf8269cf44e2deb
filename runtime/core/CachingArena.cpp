// Caching arena bookkeeping: best-fit free list over kept segments, split and coalesce.
#include "runtime/CachingArena.h"

#include <cassert>
#include <vector>

namespace tandem {

CachingArena::CachingArena(std::string device, SegmentAllocator* segments, size_t preallocate)
    : device_(std::move(device)), segments_(segments) {
  if (preallocate > 0) {
    init_ = growLocked(preallocate);
    fixed_ = true;
  }
}

CachingArena::~CachingArena() {
  for (auto& s : segmentSizes_) segments_->release(s.first);
}

Status CachingArena::growLocked(size_t bytes) {
  size_t want = std::max(bytes, kMinSegment);
  want = (want + kAlignment - 1) / kAlignment * kAlignment;
  void* raw = nullptr;
  Status st = segments_->reserve(want, &raw);
  if (!st.isOk()) return st;
  char* p = static_cast<char*>(raw);
  segmentSizes_[p] = want;
  reserved_ += want;
  blocks_[p] = Block{p, want, true};
  freeBySize_.emplace(want, p);
  return Status::ok();
}

Status CachingArena::allocate(size_t bytes, const std::string& forWhat, void** out) {
  std::lock_guard<std::mutex> l(mu_);
  size_t need = std::max<size_t>(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
  auto fit = freeBySize_.lower_bound(need);
  if (fit == freeBySize_.end() && !fixed_) {
    Status st = growLocked(need);
    if (!st.isOk()) {
      // 1. Give the cache back (free segments), 2. retry once: fragmentation is not an OOM.
      releaseCachedLocked();
      Status again = growLocked(need);
      if (!again.isOk())
        return Status::error("out of memory on " + device_ + ": " + forWhat + " asked for " +
                             std::to_string(bytes) + " bytes (in use " + std::to_string(inUse_) +
                             ", reserved " + std::to_string(reserved_) + "; " + again.message() + ")");
    }
    fit = freeBySize_.lower_bound(need);
  }
  if (fit == freeBySize_.end())
    return Status::error("out of memory on " + device_ + ": " + forWhat + " asked for " +
                         std::to_string(bytes) + " bytes (in use " + std::to_string(inUse_) +
                         " of a fixed " + std::to_string(reserved_) +
                         "-byte arena; raise --gpu-memory-fraction or leave it unset to grow)");
  char* p = fit->second;
  size_t have = fit->first;
  freeBySize_.erase(fit);
  Block& b = blocks_[p];
  b.free = false;
  b.size = need;
  if (have - need >= kAlignment) {  // split: the tail stays free in the same segment
    blocks_[p + need] = Block{b.segment, have - need, true};
    freeBySize_.emplace(have - need, p + need);
  } else {
    b.size = have;
  }
  inUse_ += b.size;
  peak_ = std::max(peak_, inUse_);
  *out = p;
  return Status::ok();
}

void CachingArena::free(void* ptr) {
  if (!ptr) return;
  std::lock_guard<std::mutex> l(mu_);
  char* p = static_cast<char*>(ptr);
  auto it = blocks_.find(p);
  assert(it != blocks_.end() && !it->second.free && "CachingArena::free of an unknown block");
  if (it == blocks_.end() || it->second.free) return;
  inUse_ -= it->second.size;
  auto eraseFree = [&](std::map<char*, Block>::iterator b) {
    auto range = freeBySize_.equal_range(b->second.size);
    for (auto f = range.first; f != range.second; ++f)
      if (f->second == b->first) { freeBySize_.erase(f); break; }
  };
  // Coalesce with the next block, then the previous, when free and in the same segment.
  auto next = std::next(it);
  if (next != blocks_.end() && next->second.free && next->second.segment == it->second.segment &&
      it->first + it->second.size == next->first) {
    eraseFree(next);
    it->second.size += next->second.size;
    blocks_.erase(next);
  }
  if (it != blocks_.begin()) {
    auto prev = std::prev(it);
    if (prev->second.free && prev->second.segment == it->second.segment &&
        prev->first + prev->second.size == it->first) {
      eraseFree(prev);
      prev->second.size += it->second.size;
      blocks_.erase(it);
      it = prev;
    }
  }
  it->second.free = true;
  freeBySize_.emplace(it->second.size, it->first);
}

size_t CachingArena::releaseCached() {
  std::lock_guard<std::mutex> l(mu_);
  return fixed_ ? 0 : releaseCachedLocked();
}

size_t CachingArena::releaseCachedLocked() {
  size_t released = 0;
  for (auto s = segmentSizes_.begin(); s != segmentSizes_.end();) {
    auto b = blocks_.find(s->first);
    if (b != blocks_.end() && b->second.free && b->second.size == s->second) {
      auto range = freeBySize_.equal_range(s->second);
      for (auto f = range.first; f != range.second; ++f)
        if (f->second == s->first) { freeBySize_.erase(f); break; }
      blocks_.erase(b);
      segments_->release(s->first);
      released += s->second;
      reserved_ -= s->second;
      s = segmentSizes_.erase(s);
    } else {
      ++s;
    }
  }
  return released;
}

size_t CachingArena::inUseBytes() const { std::lock_guard<std::mutex> l(mu_); return inUse_; }
size_t CachingArena::peakBytes() const { std::lock_guard<std::mutex> l(mu_); return peak_; }
size_t CachingArena::reservedBytes() const { std::lock_guard<std::mutex> l(mu_); return reserved_; }
size_t CachingArena::segmentCount() const { std::lock_guard<std::mutex> l(mu_); return segmentSizes_.size(); }
size_t CachingArena::limitBytes() const {
  std::lock_guard<std::mutex> l(mu_);
  return fixed_ ? reserved_ : 0;
}

}  // namespace tandem
