// CPU kernels of If-16, Loop-16 and Scan-16: each loads its subgraphs' plans (runtime/ControlFlow.h)
// as Executables of their own, once, at load, and runs them per call. They live beside the
// executor, not in cpu/ref, because they need Executable.
#include <cstring>
#include <memory>

#include "runtime/ControlFlow.h"
#include "runtime/DynamicRegion.h"
#include "runtime/Executable.h"
#include "runtime/Kernel.h"

namespace tandem {
namespace {

std::string label(const KernelContext& ctx) {
  return ctx.opType + (ctx.nodeName.empty() ? "" : " '" + ctx.nodeName + "'");
}

// Loads the parsed subgraph `p` (attribute `name`) as an Executable (verified like any plan),
// on the caller's thread count.
Status loadSubgraphPlan(const KernelContext& ctx, const std::string& name, const plan::Plan& p,
                        std::unique_ptr<Executable>* out) {
  if (p.eager())
    return Status::error(label(ctx) + ": subgraph '" + name + "' reads values whose shapes are "
                         "known only at run time, which only If's branches and Loop's body may "
                         "(not yet " + ctx.opType + "'s)");
  LoadOptions o;
  o.threads = ctx.threads;
  o.seed = ctx.seed;
  o.deviceFallback = true;
  o.tuning = TuningMode::Off;  // a subgraph is small; measuring its variants would cost more
  Status st = Executable::load(p, o, out);
  if (!st.isOk()) return Status::error(label(ctx) + ": subgraph '" + name + "': " + st.message());
  return Status::ok();
}

// Parses subgraph `name` of the op's attributes, then loadSubgraphPlan.
Status loadSubgraph(const KernelContext& ctx, const std::string& name,
                    std::unique_ptr<Executable>* out) {
  plan::Plan p;
  Status st = parseSubgraph(*ctx.attrs, name, &p);
  if (!st.isOk()) return Status::error(label(ctx) + ": " + st.message());
  return loadSubgraphPlan(ctx, name, p, out);
}

Tensor viewOf(const Tensor& t) { return Tensor::view(t.dtype(), t.shape(), const_cast<void*>(t.raw())); }

// Copies a subgraph result into the planned output, which must have its type.
Status copyResult(const KernelContext& ctx, const std::string& what, const Tensor& got, Tensor* dst) {
  if (got.dtype() != dst->dtype() || got.shape() != dst->shape())
    return Status::error(label(ctx) + ": " + what + " is " + dtypeName(got.dtype()) +
                         shapeToString(got.shape()) + " but the plan has " +
                         dtypeName(dst->dtype()) + shapeToString(dst->shape()) +
                         " (planned from the operands known at compile time)");
  if (got.bytes()) std::memcpy(dst->raw(), got.raw(), got.bytes());
  return Status::ok();
}

bool scalarTrue(const Tensor& t) { return t.numel() > 0 && *t.data<uint8_t>() != 0; }

// Index `index` along `axis` of a row-major [outer, length, inner] view: copies that slice
// between `whole` and the contiguous `slice` (toSlice: whole -> slice, else slice -> whole).
void moveSlice(const Shape& wholeShape, size_t elem, int64_t axis, int64_t index, void* whole,
               void* slice, bool toSlice) {
  int64_t outer = 1, inner = (int64_t)elem;
  for (int64_t d = 0; d < axis; ++d) outer *= wholeShape[d];
  for (size_t d = axis + 1; d < wholeShape.size(); ++d) inner *= wholeShape[d];
  const int64_t length = wholeShape[axis];
  auto* w = static_cast<char*>(whole);
  auto* s = static_cast<char*>(slice);
  for (int64_t o = 0; o < outer; ++o) {
    char* wp = w + (o * length + index) * inner;
    char* sp = s + o * inner;
    if (toSlice) std::memcpy(sp, wp, inner);
    else std::memcpy(wp, sp, inner);
  }
}

// One subgraph (an If branch, a Loop body): a plan of static shapes (an Executable), or an
// eager body (plan.eager: it reads values of run-time shape, or reshapes a loop-carried value,
// so it runs op by op as a DynamicRegion does, runtime/DynamicRegion.h).
struct Subgraph {
  std::unique_ptr<Executable> plan;
  std::unique_ptr<EagerPlan> eager;
  SubgraphSignature signature;

  // `firstInput`: the op operand that subgraph input `constFrom` (and each after it) takes, for
  // handing the op's constant operands on to an eager body's kernels.
  Status load(const KernelContext& ctx, const std::string& name, size_t constFrom, size_t firstInput) {
    plan::Plan p;
    Status st = parseSubgraph(*ctx.attrs, name, &p, &signature);
    if (!st.isOk()) return Status::error(label(ctx) + ": " + st.message());
    if (!p.eager()) return loadSubgraphPlan(ctx, name, p, &plan);
    std::vector<const Tensor*> consts(signature.inputs.size(), nullptr);
    for (size_t j = constFrom; j < consts.size(); ++j)
      if (firstInput + j < ctx.constInputs.size()) consts[j] = ctx.constInputs[firstInput + j];
    return EagerPlan::load(std::move(p), label(ctx) + " " + name, ctx, consts, &eager);
  }
  Status run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>* res) {
    if (eager) return eager->run(inputs, res);
    std::vector<Tensor> in;
    for (const Tensor* t : inputs) in.push_back(viewOf(*t));
    return plan->run(in, res);
  }
};

class IfKernel : public Kernel {
 public:
  static Status create(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
    auto k = std::make_unique<IfKernel>();
    k->ctx_ = ctx;
    // Branch input j is operand j + 1 (after cond).
    TANDEM_RETURN_IF_ERROR(k->then_.load(ctx, "then_branch", 0, 1));
    TANDEM_RETURN_IF_ERROR(k->else_.load(ctx, "else_branch", 0, 1));
    *out = std::move(k);
    return Status::ok();
  }
  Status run(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs) override {
    const bool cond = scalarTrue(*inputs[0]);
    std::vector<Tensor> res;
    std::vector<const Tensor*> in(inputs.begin() + 1, inputs.end());
    TANDEM_RETURN_IF_ERROR((cond ? then_ : else_).run(in, &res));
    const char* branch = cond ? "then_branch" : "else_branch";
    for (size_t k = 0; k < outputs.size(); ++k) {
      // Inside a DynamicRegion, an output whose shape the branches do not agree on comes
      // unallocated: the branch taken sizes it.
      if (outputs[k]->dtype() == DType::Undefined) {
        *outputs[k] = std::move(res[k]);
        continue;
      }
      TANDEM_RETURN_IF_ERROR(copyResult(
          ctx_, std::string(branch) + " output " + std::to_string(k), res[k], outputs[k]));
    }
    return Status::ok();
  }
  std::string implName() const override { return "subgraph"; }

 private:
  KernelContext ctx_;
  Subgraph then_, else_;
};

// Loop-16. Outputs the plan leaves unallocated (DType::Undefined: inside a DynamicRegion, where
// the iteration count or a loop-carried shape is known only at run time) are sized here.
class LoopKernel : public Kernel {
 public:
  static Status create(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
    auto k = std::make_unique<LoopKernel>();
    k->ctx_ = ctx;
    k->captures_ = (size_t)ctx.attrs->getInt("num_captures", 0);
    k->carried_ = ctx.inputTypes.size() - 2 - k->captures_;
    // Body input j is operand j; loop-carried inputs change each iteration, captures do not.
    TANDEM_RETURN_IF_ERROR(k->body_.load(ctx, "body", 2 + k->carried_, 0));
    *out = std::move(k);
    return Status::ok();
  }
  Status run(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs) override {
    const int64_t m = inputs[0] ? *inputs[0]->data<int64_t>() : INT64_MAX;
    bool cond = inputs[1] ? scalarTrue(*inputs[1]) : true;
    const size_t n = carried_, s = outputs.size() - n;
    // Iteration i's body inputs: (i, cond, v..., captures...); v starts as the initial values
    // and then is the previous iteration's results (owned, in `carried`).
    std::vector<const Tensor*> in(inputs.begin(), inputs.end());
    Tensor iter = Tensor::alloc(DType::I64, {});
    Tensor condT = Tensor::alloc(DType::Bool, {});
    in[0] = &iter;
    in[1] = &condT;
    std::vector<Tensor> carried, res;
    std::vector<std::vector<Tensor>> slices(s);  // per scan output the kernel sizes
    auto planned = [&](size_t k) { return outputs[n + k]->dtype() != DType::Undefined; };
    int64_t i = 0;
    for (; i < m && cond; ++i) {
      for (size_t k = 0; k < s; ++k)
        if (planned(k) && i >= outputs[n + k]->dim(0))
          return Status::error(label(ctx_) + ": runs more than the " +
                               std::to_string(outputs[n + k]->dim(0)) +
                               " iterations its scan outputs were planned for");
      *iter.data<int64_t>() = i;
      *condT.data<uint8_t>() = 1;
      TANDEM_RETURN_IF_ERROR(body_.run(in, &res));
      cond = scalarTrue(res[0]);
      for (size_t k = 0; k < s; ++k) {
        Tensor& slice = res[1 + n + k];
        if (!planned(k)) {
          if (!slices[k].empty() && (slice.dtype() != slices[k][0].dtype() || slice.shape() != slices[k][0].shape()))
            return Status::error(label(ctx_) + ": scan output " + std::to_string(k) + " is " +
                                 dtypeName(slice.dtype()) + shapeToString(slice.shape()) + " in iteration " +
                                 std::to_string(i) + " but " + dtypeName(slices[k][0].dtype()) +
                                 shapeToString(slices[k][0].shape()) + " in iteration 0; scan outputs "
                                 "stack slices of one shape");
          slices[k].push_back(std::move(slice));
          continue;
        }
        Tensor* dst = outputs[n + k];
        const size_t bytes = dst->bytes() / dst->dim(0);
        if (slice.bytes() != bytes || slice.dtype() != dst->dtype())
          return Status::error(label(ctx_) + ": scan output " + std::to_string(k) + " of iteration " +
                               std::to_string(i) + " is " + dtypeName(slice.dtype()) +
                               shapeToString(slice.shape()) + ", not the planned slice of " +
                               shapeToString(dst->shape()));
        if (bytes) std::memcpy(static_cast<char*>(dst->raw()) + i * bytes, slice.raw(), bytes);
      }
      carried.assign(res.begin() + 1, res.begin() + 1 + n);
      for (size_t k = 0; k < n; ++k) in[2 + k] = &carried[k];
    }
    for (size_t k = 0; k < s; ++k) {
      if (planned(k)) {
        if (i != outputs[n + k]->dim(0))
          return Status::error(label(ctx_) + ": ran " + std::to_string(i) +
                               " iterations but its scan outputs were planned for " +
                               std::to_string(outputs[n + k]->dim(0)));
        continue;
      }
      // [iterations, slice...]; with no iteration, the body's declared slice (unknown dims 0).
      const SubgraphValueType& decl = body_.signature.outputs[1 + n + k];
      Shape sliceShape = slices[k].empty() ? Shape(decl.dims.begin(), decl.dims.end()) : slices[k][0].shape();
      for (int64_t& d : sliceShape) d = std::max<int64_t>(d, 0);
      Shape shape = {i};
      shape.insert(shape.end(), sliceShape.begin(), sliceShape.end());
      const DType dt = slices[k].empty() ? decl.dtype : slices[k][0].dtype();
      TANDEM_RETURN_IF_ERROR(Tensor::tryAlloc(dt, shape, label(ctx_) + " scan output " + std::to_string(k),
                                              outputs[n + k]));
      const size_t bytes = numElements(sliceShape) * dtypeSize(dt);
      for (int64_t j = 0; j < i && bytes; ++j)
        std::memcpy(static_cast<char*>(outputs[n + k]->raw()) + j * bytes, slices[k][j].raw(), bytes);
    }
    for (size_t k = 0; k < n; ++k) {
      if (outputs[k]->dtype() == DType::Undefined) {
        *outputs[k] = i == 0 ? Tensor::copyOf(*in[2 + k]) : std::move(carried[k]);
        continue;
      }
      TANDEM_RETURN_IF_ERROR(copyResult(ctx_, "loop-carried value " + std::to_string(k), *in[2 + k], outputs[k]));
    }
    return Status::ok();
  }
  std::string implName() const override { return "subgraph"; }

 private:
  KernelContext ctx_;
  Subgraph body_;
  size_t captures_ = 0, carried_ = 0;
};

class ScanKernel : public Kernel {
 public:
  static Status create(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
    auto k = std::make_unique<ScanKernel>();
    k->ctx_ = ctx;
    TANDEM_RETURN_IF_ERROR(loadSubgraph(ctx, "body", &k->body_));
    const AttrMap& a = *ctx.attrs;
    k->m_ = (size_t)a.getInt("num_scan_inputs", 0);
    k->captures_ = (size_t)a.getInt("num_captures", 0);
    k->n_ = ctx.inputTypes.size() - k->m_ - k->captures_;
    const size_t s = ctx.outputTypes.size() - k->n_;
    auto list = [&](const char* name, size_t count, std::vector<int64_t>* out) {
      *out = a.getInts(name);
      if (out->empty()) out->assign(count, 0);
    };
    list("scan_input_axes", k->m_, &k->inAxes_);
    list("scan_input_directions", k->m_, &k->inDirs_);
    list("scan_output_axes", s, &k->outAxes_);
    list("scan_output_directions", s, &k->outDirs_);
    for (size_t j = 0; j < k->m_; ++j) {
      int64_t rank = (int64_t)ctx.inputTypes[k->n_ + j].shape.size();
      if (k->inAxes_[j] < 0) k->inAxes_[j] += rank;
    }
    for (size_t j = 0; j < s; ++j) {
      int64_t rank = (int64_t)ctx.outputTypes[k->n_ + j].shape.size();
      if (k->outAxes_[j] < 0) k->outAxes_[j] += rank;
    }
    *out = std::move(k);
    return Status::ok();
  }
  Status run(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs) override {
    const size_t n = n_, m = m_, s = outputs.size() - n;
    const int64_t length = inputs[n]->dim(inAxes_[0]);
    std::vector<Tensor> in(n + m + captures_), res, state, slices(m);
    for (size_t k = 0; k < n; ++k) in[k] = viewOf(*inputs[k]);
    for (size_t j = 0; j < m; ++j) {
      Shape sliceShape = inputs[n + j]->shape();
      sliceShape.erase(sliceShape.begin() + inAxes_[j]);
      slices[j] = Tensor::alloc(inputs[n + j]->dtype(), sliceShape);
      in[n + j] = viewOf(slices[j]);
    }
    for (size_t k = 0; k < captures_; ++k) in[n + m + k] = viewOf(*inputs[n + m + k]);
    for (int64_t t = 0; t < length; ++t) {
      for (size_t j = 0; j < m; ++j) {
        const Tensor& x = *inputs[n + j];
        int64_t index = inDirs_[j] ? length - 1 - t : t;
        moveSlice(x.shape(), dtypeSize(x.dtype()), inAxes_[j], index, const_cast<void*>(x.raw()),
                  slices[j].raw(), /*toSlice=*/true);
      }
      TANDEM_RETURN_IF_ERROR(body_->run(in, &res));
      for (size_t k = 0; k < s; ++k) {
        Tensor* dst = outputs[n + k];
        const Tensor& slice = res[n + k];
        Shape want = dst->shape();
        want.erase(want.begin() + outAxes_[k]);
        if (slice.shape() != want || slice.dtype() != dst->dtype())
          return Status::error(label(ctx_) + ": scan output " + std::to_string(k) + " is " +
                               dtypeName(slice.dtype()) + shapeToString(slice.shape()) +
                               ", not the planned slice " + shapeToString(want));
        int64_t index = outDirs_[k] ? length - 1 - t : t;
        moveSlice(dst->shape(), dtypeSize(dst->dtype()), outAxes_[k], index, dst->raw(),
                  const_cast<void*>(slice.raw()), /*toSlice=*/false);
      }
      state.assign(res.begin(), res.begin() + n);
      for (size_t k = 0; k < n; ++k) in[k] = viewOf(state[k]);
    }
    for (size_t k = 0; k < n; ++k)
      TANDEM_RETURN_IF_ERROR(copyResult(ctx_, "state variable " + std::to_string(k), in[k], outputs[k]));
    return Status::ok();
  }
  std::string implName() const override { return "subgraph"; }

 private:
  KernelContext ctx_;
  std::unique_ptr<Executable> body_;
  size_t n_ = 0, m_ = 0, captures_ = 0;
  std::vector<int64_t> inAxes_, inDirs_, outAxes_, outDirs_;
};

void add(KernelRegistry& r, const char* op, KernelFactory f) {
  KernelDef d;
  d.opType = op;
  d.deviceKind = "cpu";
  d.impl = "subgraph";
  d.accepts = [](const std::vector<DType>&) { return true; };
  d.dtypesText = "any (the subgraphs' plans say)";
  d.create = std::move(f);
  r.add(std::move(d));
}

}  // namespace

void registerControlFlowKernels(KernelRegistry& r) {
  add(r, "If", IfKernel::create);
  add(r, "Loop", LoopKernel::create);
  add(r, "Scan", ScanKernel::create);
}

}  // namespace tandem
