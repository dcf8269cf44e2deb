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

bool foldShapeOp(mlir::RewriterBase& rewriter, mlir::Operation* op,
                 llvm::SmallVectorImpl<mlir::Value>* replacement) {
  auto inType = llvm::dyn_cast<mlir::RankedTensorType>(op->getOperand(0).getType());
  if (!inType || !inType.hasStaticShape()) return false;
  // ONNX Shape-15: [start, end) with negative values counting from the end, clamped.
  int64_t rank = inType.getRank();
  auto clampAxis = [&](const char* name, int64_t dflt) {
    auto a = op->getAttrOfType<mlir::IntegerAttr>(name);
    int64_t v = a ? a.getInt() : dflt;
    if (v < 0) v += rank;
    return std::clamp<int64_t>(v, 0, rank);
  };
  int64_t start = clampAxis("start", 0), end = clampAxis("end", rank);
  std::vector<int64_t> dims;
  for (int64_t i = start; i < end; ++i) dims.push_back(inType.getDimSize(i));
  Tensor t = Tensor::fromVector<int64_t>({(int64_t)dims.size()}, dims);
  rewriter.setInsertionPoint(op);
  mlir::Value c = createConstant(rewriter, op->getLoc(), t);
  rewriter.replaceOp(op, c);
  if (replacement) replacement->assign({c});
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
