// Selections of the ops whose result shapes depend on operand values (runtime/DataDependent.h).
#include "runtime/DataDependent.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace tandem {

bool sizeCountedFromData(const std::string& opType) {
  return opType == "NonZero" || opType == "Compress" || opType == "Unique" ||
         opType == "NonMaxSuppression";
}

Shape selectedShape(const Shape& x, int64_t axis, int64_t n) {
  if (axis < 0) return {n};
  Shape y = x;
  y[axis] = n;
  return y;
}

int64_t countNonZero(const Tensor& x) {
  int64_t n = 0;
  dispatchDType(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* p = x.data<T>();
    for (int64_t i = 0, e = x.numel(); i < e; ++i) n += p[i] != T(0);
  });
  return n;
}

int64_t countTrue(const Tensor& condition, int64_t limit) {
  const uint8_t* c = static_cast<const uint8_t*>(condition.raw());
  int64_t n = 0;
  for (int64_t i = 0, e = std::min(limit, condition.numel()); i < e; ++i) n += c[i] != 0;
  return n;
}

namespace {

// Three-way comparison of two slices of `len` elements; NaN sorts after every number and
// equals NaN (numpy.unique's order, which the ONNX reference uses).
template <typename T>
int compareSlices(const T* a, const T* b, int64_t len, int64_t stride) {
  for (int64_t k = 0; k < len; ++k) {
    T x = a[k * stride], y = b[k * stride];
    if constexpr (std::is_floating_point_v<T>) {
      bool nx = std::isnan(x), ny = std::isnan(y);
      if (nx || ny) {
        if (nx && ny) continue;
        return nx ? 1 : -1;
      }
    }
    if (x < y) return -1;
    if (y < x) return 1;
  }
  return 0;
}

}  // namespace

Status uniqueSlices(const Tensor& x, int64_t axis, bool sorted, UniqueResult* out) {
  // Slice i starts at outer*... : with an axis, slice i is x[..., i, ...]; its elements are
  // visited as (outer o, inner j) so one slice is `outer * inner` elements apart by `inner`.
  const Shape& s = x.shape();
  int64_t n, outer = 1, inner = 1;
  if (axis < 0) {
    n = x.numel();
  } else {
    if (axis >= (int64_t)s.size()) return Status::error("Unique: axis out of range");
    n = s[axis];
    for (int64_t d = 0; d < axis; ++d) outer *= s[d];
    for (size_t d = axis + 1; d < s.size(); ++d) inner *= s[d];
  }
  bool ok = dispatchDType(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* p = x.data<T>();
    // Compare slice i and j over every (o, j') element.
    auto cmp = [&](int64_t i, int64_t j) {
      if (axis < 0) return compareSlices(p + i, p + j, 1, 1);
      for (int64_t o = 0; o < outer; ++o) {
        const int64_t base = o * n * inner;
        if (int c = compareSlices(p + base + i * inner, p + base + j * inner, inner, 1)) return c;
      }
      return 0;
    };
    std::vector<int64_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    // Stable: equal slices keep index order, so the first of a run is the first occurrence.
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return cmp(a, b) < 0; });
    std::vector<int64_t> group(n);  // slice -> rank of its value in sorted order
    std::vector<int64_t> firstSorted, countSorted;
    for (int64_t k = 0; k < n; ++k) {
      if (k == 0 || cmp(order[k - 1], order[k]) != 0) {
        firstSorted.push_back(order[k]);
        countSorted.push_back(0);
      }
      group[order[k]] = (int64_t)firstSorted.size() - 1;
      ++countSorted.back();
    }
    const int64_t u = (int64_t)firstSorted.size();
    std::vector<int64_t> pos(u);  // sorted rank -> output position
    std::iota(pos.begin(), pos.end(), 0);
    if (!sorted) {
      std::vector<int64_t> byFirst(u);
      std::iota(byFirst.begin(), byFirst.end(), 0);
      std::sort(byFirst.begin(), byFirst.end(),
                [&](int64_t a, int64_t b) { return firstSorted[a] < firstSorted[b]; });
      for (int64_t k = 0; k < u; ++k) pos[byFirst[k]] = k;
    }
    out->first.assign(u, 0);
    out->counts.assign(u, 0);
    for (int64_t g = 0; g < u; ++g) {
      out->first[pos[g]] = firstSorted[g];
      out->counts[pos[g]] = countSorted[g];
    }
    out->inverse.resize(n);
    for (int64_t i = 0; i < n; ++i) out->inverse[i] = pos[group[i]];
  });
  if (!ok) return Status::error(std::string("Unique: unsupported dtype ") + dtypeName(x.dtype()));
  return Status::ok();
}

namespace {

// The boxes one (batch, class) has kept so far, for the IoU test of each next candidate. Kept
// boxes are filed in buckets along x by their x1, each bucket at least as wide as the widest
// candidate: a kept box can overlap candidate [ax1, ax2] only if ax1 - width < kx1 < ax2, so
// only the buckets from ax1's (less two, for rounding) to ax2's are tested. A batched NMS
// (torchvision offsets each class's boxes apart) then tests the candidate's own class only,
// O(n * kept boxes nearby) instead of O(n * kept). Few candidates (< 256), or a coordinate
// that is not finite, use one bucket: the plain pairwise test. Within a bucket the test runs
// in blocks of 64 before looking at the result, a loop the compiler vectorises.
class KeptBoxes {
 public:
  void reset(const std::vector<float>& corners, const std::vector<int64_t>& candidates) {
    double lo = 0, hi = 0, width = 0;
    bool finite = true;
    for (size_t k = 0; k < candidates.size(); ++k) {
      const float* q = &corners[4 * candidates[k]];
      finite &= std::isfinite(q[0]) && std::isfinite(q[1]) && std::isfinite(q[2]) && std::isfinite(q[3]);
      lo = k ? std::min<double>(lo, q[1]) : q[1];
      hi = k ? std::max<double>(hi, q[1]) : q[1];
      width = std::max<double>(width, (double)q[3] - q[1]);
    }
    minX_ = lo;
    cell_ = std::max(width, (hi - lo) / kMaxBuckets);
    size_t n = 1;
    if (candidates.size() >= 256 && finite && cell_ > 0) n = (size_t)std::floor((hi - lo) / cell_) + 1;
    n = std::min<size_t>(n, kMaxBuckets + 1);
    if (buckets_.size() < n) buckets_.resize(n);
    for (size_t k = 0; k < n; ++k) buckets_[k].clear();
    used_ = n;
  }

  bool suppresses(const float* a, float iouThreshold) const {
    const float ay1 = a[0], ax1 = a[1], ay2 = a[2], ax2 = a[3];
    const float areaA = (ay2 - ay1) * (ax2 - ax1);
    const int64_t first = std::max<int64_t>(bucketOf(ax1) - 2, 0), last = bucketOf(ax2);
    for (int64_t j = first; j <= last; ++j) {
      const Bucket& k = buckets_[j];
      const int64_t nk = (int64_t)k.x1.size();
      // Suppressed when a kept box overlaps it (positive height and width) with
      // IoU = inter / union > iouThreshold (a NaN anywhere suppresses nothing).
      for (int64_t k0 = 0; k0 < nk; k0 += kBlock) {
        const int64_t k1 = std::min(nk, k0 + kBlock);
        int hit = 0;
        for (int64_t m = k0; m < k1; ++m) {
          const float ih = std::min(ay2, k.y2[m]) - std::max(ay1, k.y1[m]);
          const float iw = std::min(ax2, k.x2[m]) - std::max(ax1, k.x1[m]);
          const float inter = ih * iw;
          const float uni = areaA + k.area[m] - inter;
          hit |= (ih > 0.f) & (iw > 0.f) & (uni > 0.f) & (inter / uni > iouThreshold);
        }
        if (hit) return true;
      }
    }
    return false;
  }

  void add(const float* a) {
    Bucket& k = buckets_[bucketOf(a[1])];
    k.y1.push_back(a[0]), k.x1.push_back(a[1]), k.y2.push_back(a[2]), k.x2.push_back(a[3]);
    k.area.push_back((a[2] - a[0]) * (a[3] - a[1]));
  }

 private:
  static constexpr double kMaxBuckets = 4096;
  static constexpr int64_t kBlock = 64;
  struct Bucket {
    std::vector<float> y1, x1, y2, x2, area;
    void clear() { y1.clear(), x1.clear(), y2.clear(), x2.clear(), area.clear(); }
  };
  int64_t bucketOf(float x) const {
    if (used_ == 1) return 0;
    const double t = std::floor(((double)x - minX_) / cell_);
    return (int64_t)std::clamp<double>(t, 0, (double)used_ - 1);
  }
  std::vector<Bucket> buckets_;
  size_t used_ = 1;
  double minX_ = 0, cell_ = 1;
};

}  // namespace

Status nonMaxSuppression(const Tensor& boxes, const Tensor& scores, int64_t maxPerClass,
                         float iouThreshold, bool hasScoreThreshold, float scoreThreshold,
                         bool centerPointBox, std::vector<int64_t>* selected) {
  selected->clear();
  const Shape &bs = boxes.shape(), &ss = scores.shape();
  if (boxes.dtype() != DType::F32 || scores.dtype() != DType::F32)
    return Status::error("NonMaxSuppression: boxes and scores must be f32");
  if (bs.size() != 3 || bs[2] != 4 || ss.size() != 3 || ss[0] != bs[0] || ss[2] != bs[1])
    return Status::error("NonMaxSuppression: boxes " + shapeToString(bs) + " and scores " +
                         shapeToString(ss) + " must be [batches, n, 4] and [batches, classes, n]");
  const int64_t B = bs[0], C = ss[1], N = bs[1];
  if (maxPerClass <= 0) return Status::ok();
  const float* bx = boxes.data<float>();
  const float* sc = scores.data<float>();
  // Corners (y1, x1, y2, x2), ordered so y1 <= y2 and x1 <= x2, once per box.
  std::vector<float> corners(4 * N);
  std::vector<int64_t> order;
  KeptBoxes kept;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t i = 0; i < N; ++i) {
      const float* p = bx + (b * N + i) * 4;
      float y1, x1, y2, x2;
      if (centerPointBox) {
        x1 = p[0] - p[2] / 2, x2 = p[0] + p[2] / 2, y1 = p[1] - p[3] / 2, y2 = p[1] + p[3] / 2;
      } else {
        y1 = std::min(p[0], p[2]), y2 = std::max(p[0], p[2]);
        x1 = std::min(p[1], p[3]), x2 = std::max(p[1], p[3]);
      }
      float* q = &corners[4 * i];
      q[0] = y1, q[1] = x1, q[2] = y2, q[3] = x2;
    }
    for (int64_t c = 0; c < C; ++c) {
      const float* s = sc + (b * C + c) * N;
      order.clear();
      for (int64_t i = 0; i < N; ++i)
        if (!hasScoreThreshold || s[i] > scoreThreshold) order.push_back(i);
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b2) { return s[a] > s[b2]; });
      kept.reset(corners, order);
      int64_t nk = 0;
      for (int64_t i : order) {
        if (nk >= maxPerClass) break;
        if (kept.suppresses(&corners[4 * i], iouThreshold)) continue;
        kept.add(&corners[4 * i]);
        ++nk;
        selected->insert(selected->end(), {b, c, i});
      }
    }
  }
  return Status::ok();
}

}  // namespace tandem
