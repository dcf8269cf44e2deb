// Registration of the reference CPU kernels and the helpers of RefCommon.h.
#include <algorithm>
#include <cassert>

#include "runtime/OpTable.h"
#include "runtime/cpu/ref/RefCommon.h"
#include "runtime/CheckedMath.h"

namespace tandem {

void registerCpuReferenceKernels(KernelRegistry& r) {
  ref::registerElementwiseKernels(r);
  ref::registerMathKernels(r);
  ref::registerConvKernels(r);
  ref::registerPoolKernels(r);
  ref::registerNormKernels(r);
  ref::registerReductionKernels(r);
  ref::registerTensorKernels(r);
  ref::registerIndexingKernels(r);
  ref::registerEmbeddingBagKernels(r);
  ref::registerSelectionKernels(r);
  ref::registerImageKernels(r);
  ref::registerEinsumKernels(r);
  ref::registerLossKernels(r);
  ref::registerOptimizerKernels(r);
  ref::registerGenerateKernels(r);
  ref::registerQuantizeKernels(r);
  ref::registerQuantizedMathKernels(r);
  ref::registerDequantizeMatMulKernels(r);
  ref::registerRecurrentKernels(r);
  ref::registerSignalKernels(r);
  ref::registerAttentionKernels(r);
  ref::registerFusedKernels(r);
}

namespace ref {

const std::vector<DType>& floatTypes() {
  static const std::vector<DType> t = {DType::F32, DType::F64};
  return t;
}
const std::vector<DType>& signedTypes() {
  static const std::vector<DType> t = {DType::F32, DType::F64, DType::I32, DType::I64, DType::I8};
  return t;
}
const std::vector<DType>& numericTypes() {
  static const std::vector<DType> t = {DType::F32, DType::F64, DType::I32,
                                       DType::I64, DType::U8,  DType::I8};
  return t;
}
const std::vector<DType>& allTypes() {
  static const std::vector<DType> t = {DType::F32, DType::F64, DType::I32, DType::I64,
                                       DType::U8,  DType::I8,  DType::Bool, DType::U16,
                                       DType::I16, DType::U32, DType::U64};
  return t;
}
const std::vector<DType>& wideNumericTypes() {
  static const std::vector<DType> t = {DType::F32, DType::F64, DType::I32, DType::I64,
                                       DType::U8,  DType::I8,  DType::U16, DType::I16,
                                       DType::U32, DType::U64};
  return t;
}
const std::vector<DType>& unsignedTypes() {
  static const std::vector<DType> t = {DType::U8, DType::U16, DType::U32, DType::U64};
  return t;
}
const std::vector<DType>& indexTypes() {
  static const std::vector<DType> t = {DType::I32, DType::I64};
  return t;
}

bool contains(const std::vector<DType>& set, DType t) {
  return std::find(set.begin(), set.end(), t) != set.end();
}

AcceptsFn acceptsAllSame(std::vector<DType> types) {
  return [types](const std::vector<DType>& in) {
    if (in.empty() || !contains(types, in[0])) return false;
    for (DType t : in)
      if (t != in[0]) return false;
    return true;
  };
}

std::string dtypesToText(const std::vector<DType>& set) {
  std::string s;
  for (size_t i = 0; i < set.size(); ++i) s += (i ? "," : "") + std::string(dtypeName(set[i]));
  return s;
}

void addRef(KernelRegistry& r, const std::string& op, const std::vector<DType>& types,
            KernelFactory create) {
  addRef(r, op, acceptsFirstInput(types), dtypesToText(types), std::move(create));
}

void addRef(KernelRegistry& r, const std::string& op, AcceptsFn accepts, std::string dtypesText,
            KernelFactory create) {
  KernelDef d;
  d.opType = op;
  d.deviceKind = "cpu";
  d.impl = "ref";
  d.priority = 0;
  d.accepts = std::move(accepts);
  d.dtypesText = std::move(dtypesText);
  // Checks every factory relies on, done once here: a data input and a first output exist, and
  // the first output has the data dtype unless the op defines its own output dtype. A wrong
  // output dtype would make a kernel write past a smaller buffer. (The op table's
  // kOwnResultDType rows define their own.)
  const bool checkDType = !opHas(op, kOwnResultDType);
  const bool needsInput = op != "Constant";
  d.create = [create = std::move(create), checkDType, needsInput](
                 const KernelContext& ctx, std::unique_ptr<Kernel>* out) -> Status {
    assert(ctx.attrs && "KernelContext::attrs must not be null");
    if (ctx.outputTypes.empty() || !ctx.outputTypes[0].present())
      return opError(ctx, "output 0 is required");
    if (needsInput && (ctx.inputTypes.empty() || !ctx.inputTypes[0].present()))
      return opError(ctx, "input 0 is required");
    if (ctx.constInputs.size() > ctx.inputTypes.size())
      return opError(ctx, "more constant inputs than inputs");
    if (checkDType && ctx.outputTypes[0].dtype != ctx.inputTypes[0].dtype)
      return opError(ctx, std::string("output dtype ") + dtypeName(ctx.outputTypes[0].dtype) +
                              " differs from the input dtype " +
                              dtypeName(ctx.inputTypes[0].dtype));
    return create(ctx, out);
  };
  r.add(std::move(d));
}

Status checkSameShape(const KernelContext& ctx, size_t output) {
  if (ctx.outputTypes[output].shape != ctx.inputTypes[0].shape)
    return opError(ctx, "output " + std::to_string(output) + " shape " +
                            shapeToString(ctx.outputTypes[output].shape) +
                            " differs from the input shape " +
                            shapeToString(ctx.inputTypes[0].shape));
  return Status::ok();
}

bool normalizeAxis(int64_t axis, int64_t rank, int64_t* out) {
  if (axis < -rank || axis >= rank) return false;
  *out = axis < 0 ? axis + rank : axis;
  return true;
}

std::vector<int64_t> rowMajorStrides(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int64_t d = (int64_t)s.size() - 2; d >= 0; --d) st[d] = st[d + 1] * s[d + 1];
  return st;
}

bool broadcastsTo(const Shape& in, const Shape& out) {
  if (in.size() > out.size()) return false;
  size_t off = out.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d)
    if (in[d] != 1 && in[d] != out[off + d]) return false;
  return true;
}

std::vector<int64_t> broadcastStrides(const Shape& in, const Shape& out) {
  std::vector<int64_t> st(out.size(), 0);
  std::vector<int64_t> inSt = rowMajorStrides(in);
  size_t off = out.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d) st[off + d] = in[d] == 1 ? 0 : inSt[d];
  return st;
}

int64_t product(const Shape& s, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end && i < s.size(); ++i) p *= s[i];
  return p;
}

Status readInts(const OpName& ctx, const Tensor* t, const char* what, std::vector<int64_t>* out) {
  out->clear();
  if (!t) return opError(ctx, std::string(what) + " is absent");
  const int64_t n = t->numel();
  out->reserve(n);
  if (t->dtype() == DType::I64) {
    out->assign(t->data<int64_t>(), t->data<int64_t>() + n);
  } else if (t->dtype() == DType::I32) {
    for (int64_t i = 0; i < n; ++i) out->push_back(t->data<int32_t>()[i]);
  } else {
    return opError(ctx, std::string(what) + " must be i32 or i64, got " + dtypeName(t->dtype()));
  }
  return Status::ok();
}

double elementAsDouble(const Tensor& t, int64_t i) {
  double v = 0;
  dispatchDType(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    v = static_cast<double>(t.data<T>()[i]);
  });
  return v;
}

Status intsAttr(const KernelContext& ctx, const char* name, size_t n, int64_t dflt,
                std::vector<int64_t>* out) {
  const Attr* a = ctx.attrs->find(name);
  if (!a) {
    out->assign(n, dflt);
    return Status::ok();
  }
  if (a->kind != Attr::Kind::Ints)
    return opError(ctx, std::string("attribute '") + name + "' must be a list of ints");
  if (a->ints.size() != n)
    return opError(ctx, std::string("attribute '") + name + "' has " +
                            std::to_string(a->ints.size()) + " values, expected " +
                            std::to_string(n));
  *out = a->ints;
  return Status::ok();
}

Status windowBeginPads(const KernelContext& ctx, const Shape& inSpatial, const Shape& outSpatial,
                       const std::vector<int64_t>& kernel, const std::vector<int64_t>& strides,
                       const std::vector<int64_t>& dilations, std::vector<int64_t>* beginPads,
                       std::vector<int64_t>* endPads) {
  const size_t n = inSpatial.size();
  std::string autoPad = ctx.attrs->getString("auto_pad", "NOTSET");
  beginPads->assign(n, 0);
  endPads->assign(n, 0);
  if (autoPad == "NOTSET") {
    std::vector<int64_t> pads;
    TANDEM_RETURN_IF_ERROR(intsAttr(ctx, "pads", 2 * n, 0, &pads));
    for (size_t i = 0; i < n; ++i) {
      if (pads[i] < 0 || pads[n + i] < 0) return opError(ctx, "negative pads are not allowed");
      (*beginPads)[i] = pads[i];
      (*endPads)[i] = pads[n + i];
    }
    return Status::ok();
  }
  if (autoPad == "VALID") return Status::ok();
  if (autoPad != "SAME_UPPER" && autoPad != "SAME_LOWER")
    return opError(ctx, "attribute auto_pad='" + autoPad +
                            "' is not one of NOTSET, SAME_UPPER, "
                            "SAME_LOWER, VALID");
  // The output extent is ceil(in / stride); the odd pixel of padding goes to the end for
  // SAME_UPPER and to the beginning for SAME_LOWER (ONNX Conv-11).
  for (size_t i = 0; i < n; ++i) {
    int64_t total =
        (outSpatial[i] - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 - inSpatial[i];
    if (total < 0) total = 0;
    int64_t begin = autoPad == "SAME_UPPER" ? total / 2 : total - total / 2;
    (*beginPads)[i] = begin;
    (*endPads)[i] = total - begin;
  }
  return Status::ok();
}

Status windowTable(const OpName& op, const Shape& iter, const Shape& bounds,
                   const std::vector<int64_t>& kernel, const std::vector<int64_t>& strides,
                   const std::vector<int64_t>& dilations, const std::vector<int64_t>& pads,
                   WindowTable* table) {
  const int64_t nb = numElements(bounds);
  if (nb < 0 || nb >= int64_t(std::numeric_limits<int32_t>::max()))
    return opError(op, "spatial extent " + shapeToString(bounds) + " is too large");
  // kernel_shape comes from the plan (untrusted): K * P int32 entries must be a table one
  // tensor could be, else a [2^40, 3] kernel allocates (or loops) for ever.
  int64_t tableBytes = 0;
  for (int64_t k : kernel)
    if (k <= 0) return opError(op, "kernel_shape " + shapeToString(kernel) + " has a dim < 1");
  std::vector<int64_t> tableShape = kernel;
  tableShape.insert(tableShape.end(), iter.begin(), iter.end());
  if (std::string e = checkTensorSize(tableShape, 4, "i32", &tableBytes); !e.empty())
    return opError(op, "kernel_shape " + shapeToString(kernel) + " over output window " +
                           shapeToString(iter) + ": the window table of " + e);
  const int64_t P = numElements(iter), K = numElements(kernel);
  const size_t r = iter.size();
  const std::vector<int64_t> bst = rowMajorStrides(bounds);
  table->assign(size_t(K * P), -1);
  forEachIndex(kernel, [&](int64_t kk, const int64_t* k) {
    int32_t* row = table->data() + kk * P;
    forEachIndex(iter, [&](int64_t p, const int64_t* o) {
      int64_t off = 0;
      for (size_t d = 0; d < r; ++d) {
        const int64_t c = o[d] * strides[d] - pads[d] + k[d] * dilations[d];
        if (c < 0 || c >= bounds[d]) return;
        off += c * bst[d];
      }
      row[p] = int32_t(off);
    });
  });
  return Status::ok();
}

}  // namespace ref
}  // namespace tandem
