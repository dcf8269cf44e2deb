// Reference kernel of Einsum-12: one loop nest over the result's labels, with the summed labels
// innermost; every operand reads through per-label strides (a repeated label adds its strides:
// a diagonal; an extent-1 dim under a longer label reads with stride 0: broadcasting).
#include "runtime/Einsum.h"
#include "runtime/cpu/ref/RefCommon.h"

namespace tandem {
namespace ref {
namespace {

Status createEinsum(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  std::vector<std::vector<int64_t>> shapes;
  for (const TensorType& t : ctx.inputTypes) {
    if (t.dtype != ctx.inputTypes[0].dtype) return opError(ctx, "every operand must have one dtype");
    shapes.push_back(t.shape);
  }
  EinsumSpec spec;
  if (std::string e = parseEinsum(ctx.attrs->getString("equation", ""), shapes, &spec); !e.empty())
    return opError(ctx, e);
  // Loop labels: the result's, in its order, then the summed ones.
  std::vector<int> loop = spec.outputLabels;
  for (int l = 0; l < (int)spec.used.size(); ++l)
    if (spec.used[l] && std::find(loop.begin(), loop.end(), l) == loop.end()) loop.push_back(l);
  Shape outShape, sumShape;
  for (size_t j = 0; j < loop.size(); ++j)
    (j < spec.outputLabels.size() ? outShape : sumShape).push_back(spec.extent[loop[j]]);
  if (outShape != ctx.outputTypes[0].shape)
    return opError(ctx, "output shape " + shapeToString(ctx.outputTypes[0].shape) + " is not " +
                            shapeToString(outShape));
  const size_t n = shapes.size(), nOut = outShape.size(), nSum = sumShape.size();
  // strides[i][j]: operand i's element stride for loop label j.
  std::vector<std::vector<int64_t>> strides(n, std::vector<int64_t>(loop.size(), 0));
  for (size_t i = 0; i < n; ++i) {
    const std::vector<int64_t> st = rowMajorStrides(shapes[i]);
    for (size_t d = 0; d < shapes[i].size(); ++d) {
      const size_t j = std::find(loop.begin(), loop.end(), spec.inputLabels[i][d]) - loop.begin();
      if (shapes[i][d] != 1) strides[i][j] += st[d];
    }
  }
  const int64_t outTotal = numElements(outShape), sumTotal = numElements(sumShape);
  RunFn fn;
  dispatchNumeric(ctx.inputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    using Acc = AccOf<T>;
    fn = [=](const Inputs& in, const Outputs& outs) -> Status {
      std::vector<const T*> x(n);
      for (size_t i = 0; i < n; ++i) x[i] = in[i]->data<T>();
      T* y = outs[0]->data<T>();
      std::vector<int64_t> oIdx(nOut, 0), sIdx(nSum, 0), base(n, 0), off(n, 0);
      const int64_t innerN = nSum ? sumShape[nSum - 1] : 1;
      for (int64_t o = 0; o < outTotal; ++o) {
        Acc acc = 0;
        off = base;
        std::fill(sIdx.begin(), sIdx.end(), 0);
        for (int64_t s = 0; s < sumTotal; s += innerN) {
          // Innermost summed label: a contiguous-stride run per operand.
          for (int64_t t = 0; t < innerN; ++t) {
            Acc p = 1;
            for (size_t i = 0; i < n; ++i) p *= (Acc)x[i][off[i] + (nSum ? t * strides[i][nOut + nSum - 1] : 0)];
            acc += p;
          }
          for (int64_t d = (int64_t)nSum - 2; d >= 0; --d) {
            for (size_t i = 0; i < n; ++i) off[i] += strides[i][nOut + d];
            if (++sIdx[d] < sumShape[d]) break;
            for (size_t i = 0; i < n; ++i) off[i] -= strides[i][nOut + d] * sumShape[d];
            sIdx[d] = 0;
          }
        }
        y[o] = (T)acc;
        for (int64_t d = (int64_t)nOut - 1; d >= 0; --d) {
          for (size_t i = 0; i < n; ++i) base[i] += strides[i][d];
          if (++oIdx[d] < outShape[d]) break;
          for (size_t i = 0; i < n; ++i) base[i] -= strides[i][d] * outShape[d];
          oIdx[d] = 0;
        }
      }
      return Status::ok();
    };
  });
  if (!fn) return opError(ctx, "unsupported dtype");
  return makeKernel(out, std::move(fn));
}

}  // namespace

void registerEinsumKernels(KernelRegistry& r) {
  addRef(r, "Einsum", acceptsAllSame(numericTypes()), dtypesToText(numericTypes()), createEinsum);
}

}  // namespace ref
}  // namespace tandem
