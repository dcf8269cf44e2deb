// Kernel registry lookups: feasibility for the placer, best-kernel creation for the executor.
#include <algorithm>
#include <sstream>

#include "runtime/Kernel.h"

namespace tandem {

void KernelRegistry::add(KernelDef def) {
  // Keep defs ordered by descending priority so lookups take the first match.
  auto it = std::find_if(defs_.begin(), defs_.end(),
                         [&](const KernelDef& d) { return d.priority < def.priority; });
  defs_.insert(it, std::move(def));
}

bool KernelRegistry::capabilityOnly(const std::string& deviceKind) const {
  for (const KernelDef& d : defs_)
    if (d.deviceKind == deviceKind) return false;
  for (const KernelDef& d : capabilities_)
    if (d.deviceKind == deviceKind) return true;
  return false;
}

const std::vector<KernelDef>& KernelRegistry::answering(const std::string& deviceKind) const {
  return capabilityOnly(deviceKind) ? capabilities_ : defs_;
}

bool KernelRegistry::supports(const std::string& opType, const std::string& deviceKind,
                              const std::vector<DType>& inputDTypes) const {
  for (const KernelDef& d : answering(deviceKind))
    if (d.opType == opType && d.deviceKind == deviceKind && (!d.accepts || d.accepts(inputDTypes)))
      return true;
  return false;
}

namespace {
std::vector<DType> presentDTypes(const KernelContext& ctx) {
  std::vector<DType> dts;
  for (const TensorType& t : ctx.inputTypes)
    if (t.present()) dts.push_back(t.dtype);
  return dts;
}
}  // namespace

std::string KernelRegistry::rejects(const std::string& deviceKind, const KernelContext& ctx) const {
  const std::vector<DType> dts = presentDTypes(ctx);
  std::string why;
  for (const KernelDef& d : answering(deviceKind)) {
    if (d.opType != ctx.opType || d.deviceKind != deviceKind) continue;
    if (d.accepts && !d.accepts(dts)) continue;
    std::string r = d.rejects ? d.rejects(ctx) : "";
    if (r.empty()) return "";
    if (why.empty()) why = r;
  }
  return why;
}

// A step whose activations the plan keeps in oneDNN's blocked layout (`input_layouts` /
// `output_layouts`, set by --tandem-fuse) needs a kernel that reads those attributes: only the
// dnnl ones do. Any other kernel would read the bytes as row-major. A "blocked" value that the
// host keeps plain (its channels would need padding: blockedRule_) is plain to every kernel.
bool KernelRegistry::hasBlockedLayout(const KernelContext& ctx) const {
  if (!ctx.attrs) return false;
  for (bool input : {true, false})
    if (const Attr* a = ctx.attrs->find(input ? "input_layouts" : "output_layouts"))
      for (size_t i = 0; i < a->strings.size(); ++i)
        if (a->strings[i] == "blocked" && (!blockedRule_ || blockedRule_(ctx, input, i))) return true;
  return false;
}

Status KernelRegistry::create(const std::string& deviceKind, const KernelContext& ctx,
                              std::unique_ptr<Kernel>* out) const {
  const bool blocked = hasBlockedLayout(ctx);
  const std::vector<DType> dts = presentDTypes(ctx);
  std::string lastError;
  for (const KernelDef& d : defs_) {
    if (d.opType != ctx.opType || d.deviceKind != deviceKind) continue;
    if (d.accepts && !d.accepts(dts)) continue;
    if (d.supportsContext && !d.supportsContext(ctx)) continue;
    // The rule the placer read (rejects()): a plan made elsewhere or by hand gets the same
    // answer here, before the kernel touches a device.
    if (std::string why = d.rejects ? d.rejects(ctx) : ""; !why.empty()) {
      lastError = d.impl + ": " + why;
      continue;
    }
    if (blocked && d.impl != "dnnl") {
      // A blocked-layout kernel's own error says more than this one.
      if (lastError.empty()) lastError = d.impl + ": cannot read the blocked activation layout the plan gives it";
      continue;
    }
    Status st = d.create(ctx, out);
    if (st.isOk()) return st;
    lastError = d.impl + ": " + st.message();
  }
  std::ostringstream os;
  os << "no " << deviceKind << " kernel for " << ctx.opType << " on (";
  for (size_t i = 0; i < dts.size(); ++i) os << (i ? "," : "") << dtypeName(dts[i]);
  os << ")";
  if (!lastError.empty()) os << " [" << lastError << "]";
  return Status::error(os.str());
}

std::vector<std::string> KernelRegistry::variants(const std::string& deviceKind,
                                                 const KernelContext& ctx) const {
  const bool blocked = hasBlockedLayout(ctx);
  const std::vector<DType> dts = presentDTypes(ctx);
  for (const KernelDef& d : defs_) {
    if (d.opType != ctx.opType || d.deviceKind != deviceKind) continue;
    if (d.accepts && !d.accepts(dts)) continue;
    if (d.supportsContext && !d.supportsContext(ctx)) continue;
    if (d.rejects && !d.rejects(ctx).empty()) continue;
    if (blocked && d.impl != "dnnl") continue;
    return d.variants ? d.variants(ctx) : std::vector<std::string>{};
  }
  return {};
}

std::function<bool(const std::vector<DType>&)> acceptsFirstInput(std::vector<DType> dtypes) {
  return [dtypes](const std::vector<DType>& in) {
    return !in.empty() && std::find(dtypes.begin(), dtypes.end(), in[0]) != dtypes.end();
  };
}

}  // namespace tandem
