// Plan version check and the plan <-> runtime conversions of attributes and tensors
// (runtime/PlanFormat.h).
#include "runtime/PlanFormat.h"

#include <cstring>

#include "runtime/CheckedMath.h"

namespace tandem {

Status checkPlanVersion(int version) {
  if (version == kPlanVersion) return Status::ok();
  const std::string v = "plan version " + std::to_string(version);
  if (version < kPlanVersion)
    return Status::error(v + " was written by an older tandem; recompile the model");
  return Status::error(v + " was written by a newer tandem (this one reads version " +
                       std::to_string(kPlanVersion) + "); recompile the model with this one");
}

Status tensorFromPlan(const plan::TensorData& d, const std::string& what, Tensor* out) {
  if (!isKnownDType(d.dtype()))
    return Status::error(what + ": unsupported dtype code " + std::to_string(d.dtype()));
  Shape shape(d.dims().begin(), d.dims().end());
  for (int64_t x : shape)
    if (x < 0) return Status::error(what + ": negative dimension in " + shapeToString(shape));
  // The data's length is checked against the shape before anything is allocated.
  DType dt = (DType)d.dtype();
  int64_t bytes = 0;
  if (std::string e = checkTensorSize(shape, (int64_t)dtypeSize(dt), dtypeName(dt), &bytes); !e.empty())
    return Status::error(what + ": " + e);
  if ((int64_t)d.raw().size() != bytes)
    return Status::error(what + ": has " + std::to_string(d.raw().size()) + " bytes, expected " +
                         std::to_string(bytes));
  Tensor t;
  TANDEM_RETURN_IF_ERROR(Tensor::tryAlloc(dt, shape, what, &t));
  if (t.bytes()) std::memcpy(t.raw(), d.raw().data(), t.bytes());
  *out = t;
  return Status::ok();
}

Status attrsFromPlan(const google::protobuf::RepeatedPtrField<plan::Attribute>& attrs, AttrMap* out) {
  for (const plan::Attribute& a : attrs) {
    switch (a.kind()) {
      case plan::Attribute::INT: out->set(a.name(), Attr::ofInt(a.i())); break;
      case plan::Attribute::FLOAT: out->set(a.name(), Attr::ofFloat(a.f())); break;
      case plan::Attribute::STRING: out->set(a.name(), Attr::ofString(a.s())); break;
      case plan::Attribute::INTS:
        out->set(a.name(), Attr::ofInts({a.ints().begin(), a.ints().end()}));
        break;
      case plan::Attribute::FLOATS:
        out->set(a.name(), Attr::ofFloats({a.floats().begin(), a.floats().end()}));
        break;
      case plan::Attribute::STRINGS:
        out->set(a.name(), Attr::ofStrings({a.strings().begin(), a.strings().end()}));
        break;
      case plan::Attribute::TENSOR: {
        Tensor t;
        TANDEM_RETURN_IF_ERROR(tensorFromPlan(a.t(), "attribute '" + a.name() + "'", &t));
        out->set(a.name(), Attr::ofTensor(t));
        break;
      }
      case plan::Attribute::GRAPH: out->set(a.name(), Attr::ofGraph(a.g().SerializeAsString())); break;
      default:
        return Status::error("attribute '" + a.name() + "' has an unknown kind");
    }
  }
  return Status::ok();
}

void attrToPlan(const std::string& name, const Attr& a, plan::Attribute* out) {
  out->set_name(name);
  switch (a.kind) {
    case Attr::Kind::Int:
      out->set_kind(plan::Attribute::INT);
      out->set_i(a.i);
      break;
    case Attr::Kind::Float:
      out->set_kind(plan::Attribute::FLOAT);
      out->set_f(a.f);
      break;
    case Attr::Kind::String:
      out->set_kind(plan::Attribute::STRING);
      out->set_s(a.s);
      break;
    case Attr::Kind::Ints:
      out->set_kind(plan::Attribute::INTS);
      for (int64_t v : a.ints) out->add_ints(v);
      break;
    case Attr::Kind::Floats:
      out->set_kind(plan::Attribute::FLOATS);
      for (float v : a.floats) out->add_floats(v);
      break;
    case Attr::Kind::Strings:
      out->set_kind(plan::Attribute::STRINGS);
      for (const std::string& v : a.strings) out->add_strings(v);
      break;
    case Attr::Kind::Tensor: {
      out->set_kind(plan::Attribute::TENSOR);
      plan::TensorData* t = out->mutable_t();
      t->set_dtype((int32_t)a.t.dtype());
      for (int64_t d : a.t.shape()) t->add_dims(d);
      t->set_raw(a.t.raw(), a.t.bytes());
      break;
    }
    case Attr::Kind::Graph:
      out->set_kind(plan::Attribute::GRAPH);
      // Made by the compiler from a plan it serialized itself: it parses.
      (void)out->mutable_g()->ParseFromString(a.s);
      break;
  }
}

}  // namespace tandem
