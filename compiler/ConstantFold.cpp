// Constant folding of single tandem ops (compiler/ConstantFold.h): Shape of a static shape, and
// ops on constants evaluated by their CPU reference kernels.
#include "compiler/ConstantFold.h"

#include <algorithm>

#include "compiler/IrConventions.h"
#include "compiler/OpBuilding.h"
#include "compiler/TandemDialect.h"
#include "mlir/IR/BuiltinTypes.h"
#include "runtime/CheckedMath.h"
#include "runtime/Kernel.h"

namespace tandem {

namespace {

// The dims ONNX Shape-15 `op` returns ([start, end) with negative values counting from the end,
// clamped), kDynamic where unknown; false when its input is unranked.
bool shapeOpDims(mlir::Operation* op, std::vector<int64_t>* dims) {
  auto inType = llvm::dyn_cast<mlir::RankedTensorType>(op->getOperand(0).getType());
  if (!inType) return false;
  int64_t rank = inType.getRank();
  auto clampAxis = [&](const char* name, int64_t dflt) {
    int64_t v = intAttrOr(op, name, dflt);
    if (v < 0) v += rank;
    return std::clamp<int64_t>(v, 0, rank);
  };
  int64_t start = clampAxis("start", 0), end = clampAxis("end", rank);
  dims->clear();
  for (int64_t i = start; i < end; ++i) dims->push_back(inType.getDimSize(i));
  return true;
}

// Replaces `op` by the constant `t`; `replacement` (optional) gets the new value.
void replaceByConstant(mlir::RewriterBase& rewriter, mlir::Operation* op, const Tensor& t,
                       llvm::SmallVectorImpl<mlir::Value>* replacement) {
  rewriter.setInsertionPoint(op);
  mlir::Value c = createConstant(rewriter, op->getLoc(), t);
  rewriter.replaceOp(op, c);
  if (replacement) replacement->assign({c});
}

}  // namespace

bool isConstantOrNone(mlir::Value v) {
  return v.getDefiningOp<ConstantOp>() || v.getDefiningOp<NoneOp>();
}

bool foldShapeOp(mlir::RewriterBase& rewriter, mlir::Operation* op,
                 llvm::SmallVectorImpl<mlir::Value>* replacement) {
  std::vector<int64_t> dims;
  if (!shapeOpDims(op, &dims) ||
      llvm::any_of(dims, [](int64_t d) { return mlir::ShapedType::isDynamic(d); }))
    return false;
  replaceByConstant(rewriter, op, Tensor::fromVector<int64_t>({(int64_t)dims.size()}, dims),
                    replacement);
  return true;
}

bool foldGatherOfShape(mlir::RewriterBase& rewriter, mlir::Operation* op,
                       llvm::SmallVectorImpl<mlir::Value>* replacement) {
  if (op->getNumOperands() != 2 || op->getNumResults() != 1) return false;
  mlir::Operation* shape = op->getOperand(0).getDefiningOp();
  if (!shape || onnxOpType(shape) != "Shape") return false;
  auto axis = op->getAttrOfType<mlir::IntegerAttr>("axis");
  if (axis && axis.getInt() != 0 && axis.getInt() != -1) return false;
  std::vector<int64_t> dims;
  Tensor idx;
  if (!shapeOpDims(shape, &dims) || !getConstantValue(op->getOperand(1), &idx) ||
      idx.shape().size() > 1 || (idx.dtype() != DType::I64 && idx.dtype() != DType::I32))
    return false;
  std::vector<int64_t> picked;
  for (int64_t i = 0; i < idx.numel(); ++i) {
    int64_t k = idx.dtype() == DType::I64 ? idx.data<int64_t>()[i] : idx.data<int32_t>()[i];
    if (k < 0) k += (int64_t)dims.size();
    if (k < 0 || k >= (int64_t)dims.size() || mlir::ShapedType::isDynamic(dims[k])) return false;
    picked.push_back(dims[k]);
  }
  replaceByConstant(rewriter, op, Tensor::fromVector<int64_t>(idx.shape(), picked), replacement);
  return true;
}

mlir::FailureOr<bool> foldWithCpuKernel(mlir::RewriterBase& rewriter, mlir::Operation* op,
                                        const std::string& type, int64_t limit,
                                        llvm::StringRef who,
                                        llvm::SmallVectorImpl<mlir::Value>* replacements) {
  std::vector<Tensor> inputs(op->getNumOperands());
  int64_t inElements = 0, outElements = 0;
  KernelContext kc;
  kc.opType = type;
  kc.nodeName = nodeName(op->getLoc());
  for (auto [i, v] : llvm::enumerate(op->getOperands())) {
    // An absent optional input (tandem.none) stays an undefined tensor and a null pointer.
    if (!v.getDefiningOp<NoneOp>()) getConstantValue(v, &inputs[i]);
    inElements += inputs[i].defined() ? inputs[i].numel() : 0;
    kc.inputTypes.push_back(TensorType{inputs[i].dtype(), inputs[i].shape()});
    kc.constInputs.push_back(inputs[i].defined() ? &inputs[i] : nullptr);
  }

  for (mlir::Value r : op->getResults()) {
    auto t = llvm::cast<mlir::RankedTensorType>(r.getType());
    if (!t.hasStaticShape()) return false;
    TensorType tt{mlirToDType(t.getElementType()), Shape(t.getShape().begin(), t.getShape().end())};
    // Checked before the kernel sees the shape: ConstantOfShape [INT64_MAX] must be an
    // error here, not a 64-byte buffer the kernel writes past.
    int64_t n = 0;
    if (std::string e = checkTensorSize(tt.shape, (int64_t)dtypeSize(tt.dtype), dtypeName(tt.dtype));
        !e.empty() || !checkedNumElements(tt.shape, &n) || !checkedAdd(outElements, n, &outElements)) {
      op->emitError() << who << ": result " << llvm::cast<mlir::OpResult>(r).getResultNumber() << " of "
                      << type << ": " << (e.empty() ? "the element count overflows" : e);
      return mlir::failure();
    }
    kc.outputTypes.push_back(tt);
  }
  if (outElements > std::max<int64_t>(limit, inElements)) return false;

  AttrMap attrs = toAttrMap(op);
  kc.attrs = &attrs;
  std::unique_ptr<Kernel> kernel;
  if (!KernelRegistry::global().create("cpu", kc, &kernel).isOk()) return false;

  std::vector<Tensor> outputs;
  for (const TensorType& t : kc.outputTypes) {
    Tensor o;
    if (Status st = Tensor::tryAlloc(t.dtype, t.shape, "the folded result", &o); !st.isOk()) {
      op->emitError() << who << ": folding " << type << ": " << st.message();
      return mlir::failure();
    }
    outputs.push_back(o);
  }
  std::vector<const Tensor*> in = kc.constInputs;
  std::vector<Tensor*> out;
  for (Tensor& t : outputs) out.push_back(&t);
  Status st = kernel->run(in, out);
  if (!st.isOk()) {
    op->emitError() << who << ": folding " << type << " on constant inputs failed: " << st.message();
    return mlir::failure();
  }
  rewriter.setInsertionPoint(op);
  llvm::SmallVector<mlir::Value> values;
  for (const Tensor& t : outputs) values.push_back(createConstant(rewriter, op->getLoc(), t));
  rewriter.replaceOp(op, values);
  if (replacements) replacements->assign(values.begin(), values.end());
  return true;
}

}  // namespace tandem
