// The plan loader's step verifier: ids, then each op through the compiler's shape functions
// (compiler/shapes is MLIR-free), so a hand-made or corrupted plan is refused with the step
// named instead of reaching a kernel that trusts its operand types.
#include "runtime/PlanVerify.h"

#include <map>
#include <vector>

#include "compiler/ShapeInference.h"
#include "runtime/CheckedMath.h"
#include "runtime/Kernel.h"
#include "runtime/OpTable.h"
#include "runtime/PlanFormat.h"

namespace tandem {
namespace {

// Constant operands up to this many elements count by their values, as in the compiler's
// verifier (kMaxConstOperandElements, compiler/TandemDialect.cpp): shape operands are small.
constexpr int64_t kMaxValueOperandElements = 4096;

std::string stepLabel(const plan::Step& s, int si) {
  std::string l = "plan step " + std::to_string(si) + " (" + s.op_type();
  if (!s.name().empty()) l += " '" + s.name() + "'";
  return l + ")";
}

// "f32[2,?,3]": ? for a dim inference could not know (a shape operand that is not constant).
std::string typeStr(DType t, const std::vector<int64_t>& dims) {
  std::string s = std::string(dtypeName(t)) + "[";
  for (size_t i = 0; i < dims.size(); ++i)
    s += (i ? "," : "") + (dims[i] == kUnknownDim ? std::string("?") : std::to_string(dims[i]));
  return s + "]";
}

int64_t product(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;  // sizes were checked (checkTensorSize): no overflow
  return n;
}

// A declared result agrees with inference: same dtype and rank, and every dim inference knows.
bool agrees(const TensorType& declared, const ResultInfo& inferred) {
  if (declared.dtype != inferred.dtype || declared.shape.size() != inferred.dims.size()) return false;
  for (size_t i = 0; i < inferred.dims.size(); ++i)
    if (inferred.dims[i] != kUnknownDim && inferred.dims[i] != declared.shape[i]) return false;
  return true;
}

class StepVerifier {
 public:
  explicit StepVerifier(const plan::Plan& p) : p_(p), writer_(p.values_size(), -1) {}

  // "" when step `si` verifies, else the reason (the caller names the step).
  std::string verify(int si) {
    const plan::Step& s = p_.steps(si);
    if (std::string e = checkIds(s, si); !e.empty()) return e;
    if (s.op_type() == "Copy") return checkCopy(s);
    if (s.op_type() == "Fused") return checkFused(s);
    if (!findOp(s.op_type()))
      return "unknown op type '" + s.op_type() + "' (not an op of the op table, Copy or Fused)";
    std::vector<OperandInfo> in;
    for (size_t k = 0; k < (size_t)s.inputs_size(); ++k) {
      in.emplace_back();
      if (std::string e = operand(s.inputs((int)k), &in.back()); !e.empty())
        return "input " + std::to_string(k) + ": " + e;
    }
    AttrMap attrs;
    if (Status st = attrsFromPlan(s.attrs(), &attrs); !st.isOk()) return st.message();
    std::vector<TensorType> declared;
    std::vector<std::string> what;
    for (int k = 0; k < s.outputs_size(); ++k) {
      declared.emplace_back();
      if (std::string e = valueType(s.outputs(k), &declared.back(), s.op_type() == "DynamicRegion"); !e.empty())
        return e;
      what.push_back("result " + std::to_string(k) + " (value '" + p_.values(s.outputs(k)).name() + "')");
    }
    return checkOp(s.op_type(), in, attrs, declared, what);
  }

 private:
  // Ids resolve, intermediates are read after their one writer, and this step is that writer
  // of each of its outputs.
  std::string checkIds(const plan::Step& s, int si) {
    const int n = p_.values_size();
    for (int k = 0; k < s.inputs_size(); ++k) {
      int id = s.inputs(k);
      if (id == -1) continue;
      if (id < 0 || id >= n)
        return "input " + std::to_string(k) + " refers to value id " + std::to_string(id) +
               ", which does not exist";
      if (p_.values(id).kind() == plan::Value::INTERMEDIATE && writer_[id] < 0)
        return "input " + std::to_string(k) + " reads value '" + p_.values(id).name() +
               "', which no earlier step writes";
    }
    for (int k = 0; k < s.outputs_size(); ++k) {
      int id = s.outputs(k);
      if (id < 0 || id >= n)
        return "output " + std::to_string(k) + " refers to value id " + std::to_string(id) +
               ", which does not exist";
      const plan::Value& v = p_.values(id);
      if (v.kind() != plan::Value::INTERMEDIATE)
        return "output " + std::to_string(k) + " writes value '" + v.name() + "', which is not an intermediate";
      if (writer_[id] >= 0)
        return "output " + std::to_string(k) + " writes value '" + v.name() + "', which " +
               (writer_[id] == si ? std::string("this step already writes")
                                  : "plan step " + std::to_string(writer_[id]) + " writes");
      writer_[id] = si;
    }
    return "";
  }

  // The static type of value `id` (in range), refused when unsound. A DynamicRegion's result
  // (`runTime`) may have dims known only at run time: -1.
  std::string valueType(int id, TensorType* out, bool runTime = false) const {
    const plan::Value& v = p_.values(id);
    if (!isKnownDType(v.dtype()))
      return "value '" + v.name() + "' has unsupported dtype code " + std::to_string(v.dtype());
    out->dtype = (DType)v.dtype();
    out->shape.assign(v.dims().begin(), v.dims().end());
    bool unknown = false;
    for (int64_t d : out->shape) {
      if (d < 0 && !(runTime && d == kUnknownDim))
        return "value '" + v.name() + "' has a negative dim in " + shapeToString(out->shape);
      unknown |= d < 0;
    }
    if (std::string e = unknown ? "" : checkTensorSize(out->shape, (int64_t)dtypeSize(out->dtype), dtypeName(out->dtype));
        !e.empty())
      return "value '" + v.name() + "': " + e;
    return "";
  }

  // Operand `id` (-1: absent) as inference sees it: type, and the value of a small constant.
  std::string operand(int id, OperandInfo* out) {
    if (id == -1) {
      out->present = false;
      return "";
    }
    TensorType t;
    if (std::string e = valueType(id, &t); !e.empty()) return e;
    out->dtype = t.dtype;
    out->dims = t.shape;
    const plan::Value& v = p_.values(id);
    if (v.kind() != plan::Value::CONSTANT || product(t.shape) > kMaxValueOperandElements) return "";
    auto it = constants_.find(id);
    if (it == constants_.end()) {
      Tensor c;
      if (Status st = tensorFromPlan(v.constant(), "value '" + v.name() + "'", &c); !st.isOk())
        return st.message();
      if (c.dtype() != t.dtype || c.shape() != t.shape)
        return "value '" + v.name() + "': constant data does not match its declared type";
      it = constants_.emplace(id, std::move(c)).first;
    }
    out->value = &it->second;
    return "";
  }

  // Op `op` (a row of the op table) on `in` and `attrs` gives `declared` (described by `what`).
  static std::string checkOp(const std::string& op, const std::vector<OperandInfo>& in,
                             const AttrMap& attrs, const std::vector<TensorType>& declared,
                             const std::vector<std::string>& what) {
    std::vector<ResultInfo> inferred;
    std::string err = inferResultTypes(op, in, attrs, declared.size(), &inferred);
    // Shape functions begin most messages with "<op>: "; the step's label already says it.
    if (err.compare(0, op.size() + 2, op + ": ") == 0) err.erase(0, op.size() + 2);
    if (!err.empty()) return err;
    if (inferred.size() != declared.size())
      return "its shape function gave " + std::to_string(inferred.size()) + " results for " +
             std::to_string(declared.size());
    for (size_t k = 0; k < declared.size(); ++k)
      if (!agrees(declared[k], inferred[k]))
        return what[k] + " is declared " + typeStr(declared[k].dtype, declared[k].shape) +
               " but its operands and attributes give " + typeStr(inferred[k].dtype, inferred[k].dims);
    // Where a shape operand is not constant, inference leaves dims unknown; an op that keeps its
    // input's bytes must still keep their count, or its kernel copies past one end.
    if (findOp(op)->work == OpWorkKind::Reshape && !in.empty() && in[0].present &&
        product(declared[0].shape) != product(in[0].dims))
      return what[0] + " " + typeStr(declared[0].dtype, declared[0].shape) + " has " +
             std::to_string(product(declared[0].shape)) + " elements but input 0 " +
             typeStr(in[0].dtype, in[0].dims) + " has " + std::to_string(product(in[0].dims));
    return "";
  }

  std::string checkCopy(const plan::Step& s) const {
    if (s.inputs_size() != 1 || s.outputs_size() != 1 || s.inputs(0) < 0)
      return "a copy has one present input and one output, not " + std::to_string(s.inputs_size()) +
             " and " + std::to_string(s.outputs_size());
    TensorType a, b;
    if (std::string e = valueType(s.inputs(0), &a); !e.empty()) return e;
    if (std::string e = valueType(s.outputs(0), &b); !e.empty()) return e;
    if (a.dtype != b.dtype || a.shape != b.shape)
      return "copies value '" + p_.values(s.inputs(0)).name() + "' " + typeStr(a.dtype, a.shape) +
             " to value '" + p_.values(s.outputs(0)).name() + "' " + typeStr(b.dtype, b.shape) +
             "; a copy keeps the type";
    return "";
  }

  // A fused step's body, as the CPU and CUDA fused kernels read it (runtime/cpu/ref/Fused.cpp
  // parseBody): every member's result has the step's dtype.
  std::string checkFused(const plan::Step& s) {
    if (!s.has_fused_body() || s.fused_body().members().empty())
      return "a fused step has no body (Step.fused_body)";
    if (s.outputs_size() == 0) return "a fused step has no outputs";
    std::vector<TensorType> outs(s.outputs_size());
    for (int k = 0; k < s.outputs_size(); ++k)
      if (std::string e = valueType(s.outputs(k), &outs[k]); !e.empty()) return e;
    const plan::FusedBody& body = s.fused_body();
    std::vector<std::vector<int64_t>> shapes;  // per member, its result's shape
    for (int j = 0; j < body.members_size(); ++j) {
      const plan::FusedBody::Member& m = body.members(j);
      std::string label = "body member " + std::to_string(j) + " (" + m.op_type() +
                          (m.name().empty() ? "" : " '" + m.name() + "'") + ")";
      if (std::string e = checkMember(s, m, outs, &shapes); !e.empty()) return label + ": " + e;
    }
    if (body.results_size() != s.outputs_size())
      return "the body has " + std::to_string(body.results_size()) + " results for the step's " +
             std::to_string(s.outputs_size()) + " outputs";
    for (int k = 0; k < body.results_size(); ++k) {
      int j = body.results(k);
      if (j < 0 || j >= body.members_size())
        return "output " + std::to_string(k) + " is the result of member " + std::to_string(j) +
               ", of " + std::to_string(body.members_size());
      if (outs[k].dtype != outs[0].dtype || outs[k].shape != shapes[j])
        return "output " + std::to_string(k) + " (value '" + p_.values(s.outputs(k)).name() + "') " +
               typeStr(outs[k].dtype, outs[k].shape) + " is not the type of member " +
               std::to_string(j) + "'s result " + typeStr(outs[0].dtype, shapes[j]);
    }
    return "";
  }

  // One member: its operands (step inputs or earlier members' results), attributes and
  // declared shape through its op's shape function; appends its shape to `shapes`.
  std::string checkMember(const plan::Step& s, const plan::FusedBody::Member& m,
                          const std::vector<TensorType>& outs, std::vector<std::vector<int64_t>>* shapes) {
    if (!findOp(m.op_type()))
      return "unknown op type '" + m.op_type() + "' (not an op of the op table)";
    const DType dtype = outs[0].dtype;
    std::vector<OperandInfo> in;
    for (int k = 0; k < m.inputs_size(); ++k) {
      const plan::FusedBody::Operand& o = m.inputs(k);
      in.emplace_back();
      if (o.source_case() == plan::FusedBody::Operand::kStepInput) {
        if (o.step_input() < 0 || o.step_input() >= s.inputs_size())
          return "input " + std::to_string(k) + " reads step input " + std::to_string(o.step_input()) +
                 " of " + std::to_string(s.inputs_size());
        if (std::string e = operand(s.inputs(o.step_input()), &in.back()); !e.empty())
          return "input " + std::to_string(k) + ": " + e;
      } else if (o.source_case() == plan::FusedBody::Operand::kMember) {
        if (o.member() < 0 || o.member() >= (int)shapes->size())
          return "input " + std::to_string(k) + " reads member " + std::to_string(o.member()) +
                 ", which is not an earlier one";
        in.back().dtype = dtype;
        in.back().dims = (*shapes)[o.member()];
      } else {
        in.back().present = false;
      }
    }
    AttrMap attrs;
    if (Status st = attrsFromPlan(m.attrs(), &attrs); !st.isOk()) return st.message();
    TensorType declared{dtype, outs[0].shape};
    if (m.has_shape()) {
      declared.shape.assign(m.shape().dims().begin(), m.shape().dims().end());
      for (int64_t d : declared.shape)
        if (d < 0) return "its shape " + shapeToString(declared.shape) + " has a negative dim";
      if (std::string e = checkTensorSize(declared.shape, (int64_t)dtypeSize(dtype), dtypeName(dtype));
          !e.empty())
        return "its result: " + e;
    }
    if (std::string e = checkOp(m.op_type(), in, attrs, {declared}, {"its result"}); !e.empty()) return e;
    shapes->push_back(declared.shape);
    return "";
  }

  const plan::Plan& p_;
  std::vector<int> writer_;         // value id -> the step that writes it, -1 before it
  std::map<int, Tensor> constants_; // small constant operands, decoded once
};

}  // namespace

Status verifyPlanSteps(const plan::Plan& plan) {
  StepVerifier v(plan);
  for (int si = 0; si < plan.steps_size(); ++si)
    if (std::string e = v.verify(si); !e.empty())
      return Status::error(stepLabel(plan.steps(si), si) + ": " + e);
  return Status::ok();
}

}  // namespace tandem
