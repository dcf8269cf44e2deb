// The caching arena's bookkeeping against a fake segment allocator: growth, reuse, coalescing,
// the fixed (preallocated) mode and the out-of-memory message. No GPU needed.
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>

#include "runtime/CachingArena.h"

using namespace tandem;

namespace {

// Hands out real host memory up to a budget and counts calls, like cudaMalloc on a small GPU.
class FakeSegments : public SegmentAllocator {
 public:
  explicit FakeSegments(size_t budget) : budget_(budget) {}
  Status reserve(size_t bytes, void** out) override {
    ++reserves;
    if (held + bytes > budget_) return Status::error("cudaMalloc: out of memory");
    *out = std::aligned_alloc(256, bytes);
    held += bytes;
    sizes[*out] = bytes;
    return Status::ok();
  }
  void release(void* p) override {
    ++releases;
    held -= sizes[p];
    sizes.erase(p);
    std::free(p);
  }
  size_t budget_, held = 0;
  int reserves = 0, releases = 0;
  std::map<void*, size_t> sizes;
};

TEST(CachingArena, GrowsOnDemandAndReusesFreedBlocks) {
  FakeSegments seg(64u << 20);
  CachingArena a("cuda:0", &seg);
  EXPECT_EQ(a.reservedBytes(), 0u);
  void *p = nullptr, *q = nullptr;
  ASSERT_TRUE(a.allocate(1000, "x", &p).isOk());
  EXPECT_EQ(seg.reserves, 1);
  EXPECT_EQ(a.reservedBytes(), CachingArena::kMinSegment);
  EXPECT_EQ(a.inUseBytes(), 1024u);  // rounded to 256
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 256, 0u);
  ASSERT_TRUE(a.allocate(3000, "y", &q).isOk());
  EXPECT_EQ(seg.reserves, 1);  // served from the first segment
  EXPECT_NE(p, q);
  a.free(p);
  void* r = nullptr;
  ASSERT_TRUE(a.allocate(900, "z", &r).isOk());
  EXPECT_EQ(r, p);  // best fit: the freed 1024-byte block
  EXPECT_EQ(a.peakBytes(), 1024u + 3072u);
  a.free(q);
  a.free(r);
  EXPECT_EQ(a.inUseBytes(), 0u);
  EXPECT_EQ(seg.reserves, 1);
  EXPECT_EQ(seg.releases, 0);  // cached, not returned
  EXPECT_EQ(a.peakBytes(), 4096u);
}

TEST(CachingArena, CoalescesNeighboursSoALargeBlockFitsAgain) {
  FakeSegments seg(64u << 20);
  CachingArena a("cuda:0", &seg);
  void *p1, *p2, *p3;
  size_t third = CachingArena::kMinSegment / 4;
  ASSERT_TRUE(a.allocate(third, "a", &p1).isOk());
  ASSERT_TRUE(a.allocate(third, "b", &p2).isOk());
  ASSERT_TRUE(a.allocate(third, "c", &p3).isOk());
  a.free(p1);
  a.free(p3);
  a.free(p2);  // joins both neighbours
  void* big;
  ASSERT_TRUE(a.allocate(CachingArena::kMinSegment, "big", &big).isOk());
  EXPECT_EQ(big, p1);
  EXPECT_EQ(seg.reserves, 1);
}

TEST(CachingArena, LargeRequestGetsItsOwnSegment) {
  FakeSegments seg(64u << 20);
  CachingArena a("cuda:0", &seg);
  void *p, *q;
  ASSERT_TRUE(a.allocate(100, "small", &p).isOk());
  ASSERT_TRUE(a.allocate(10u << 20, "big", &q).isOk());
  EXPECT_EQ(seg.reserves, 2);
  EXPECT_EQ(a.reservedBytes(), CachingArena::kMinSegment + (10u << 20));
  a.free(q);
  EXPECT_EQ(a.releaseCached(), 10u << 20);  // the empty segment goes back, the used one stays
  EXPECT_EQ(a.segmentCount(), 1u);
}

TEST(CachingArena, OutOfMemoryNamesTheUserAndTheBytes) {
  FakeSegments seg(8u << 20);
  CachingArena a("cuda:0", &seg);
  void* p;
  Status st = a.allocate(9u << 20, "step 'conv1' (Conv) workspace", &p);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("out of memory on cuda:0"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("step 'conv1' (Conv) workspace"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find(std::to_string(9u << 20) + " bytes"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("cudaMalloc: out of memory"), std::string::npos) << st.message();
}

TEST(CachingArena, RetriesAfterReleasingTheCache) {
  // 6 MiB budget: a freed 4 MiB segment must be given back before a 5 MiB one can be reserved.
  FakeSegments seg(6u << 20);
  CachingArena a("cuda:0", &seg);
  void *p, *q;
  ASSERT_TRUE(a.allocate(4u << 20, "first", &p).isOk());
  a.free(p);
  ASSERT_TRUE(a.allocate(5u << 20, "second", &q).isOk());
  EXPECT_EQ(seg.releases, 1);
  EXPECT_EQ(a.reservedBytes(), 5u << 20);
}

TEST(CachingArena, FixedModeNeverGrows) {
  FakeSegments seg(64u << 20);
  CachingArena a("cuda:0", &seg, 4u << 20);
  ASSERT_TRUE(a.initStatus().isOk());
  EXPECT_EQ(seg.reserves, 1);
  void *p, *q;
  ASSERT_TRUE(a.allocate(3u << 20, "a", &p).isOk());
  Status st = a.allocate(2u << 20, "step 'fc' (Gemm)", &q);
  ASSERT_FALSE(st.isOk());
  EXPECT_EQ(seg.reserves, 1);
  EXPECT_NE(st.message().find("fixed"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("step 'fc' (Gemm) asked for 2097152 bytes"), std::string::npos)
      << st.message();
  a.free(p);
  EXPECT_TRUE(a.allocate(4u << 20, "all", &q).isOk());
}

TEST(CachingArena, PreallocationFailureIsReported) {
  FakeSegments seg(1u << 20);
  CachingArena a("cuda:0", &seg, 4u << 20);
  EXPECT_FALSE(a.initStatus().isOk());
}

TEST(CachingArena, ManyRandomBlocksNeverOverlap) {
  FakeSegments seg(256u << 20);
  CachingArena a("cuda:0", &seg);
  std::map<char*, size_t> live;
  unsigned x = 12345;
  for (int i = 0; i < 2000; ++i) {
    x = x * 1103515245 + 12345;
    if (!live.empty() && (x >> 16) % 3 == 0) {
      auto it = live.begin();
      std::advance(it, (x >> 8) % live.size());
      a.free(it->first);
      live.erase(it);
      continue;
    }
    size_t bytes = 1 + (x >> 4) % (300000);
    void* p;
    ASSERT_TRUE(a.allocate(bytes, "r", &p).isOk());
    char* c = static_cast<char*>(p);
    auto next = live.lower_bound(c);
    if (next != live.end()) {
      ASSERT_LE(c + bytes, next->first);
    }
    if (next != live.begin()) {
      auto prev = std::prev(next);
      ASSERT_LE(prev->first + prev->second, c);
    }
    live[c] = bytes;
  }
  for (auto& b : live) a.free(b.first);
  EXPECT_EQ(a.inUseBytes(), 0u);
}

}  // namespace
