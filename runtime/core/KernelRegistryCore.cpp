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

bool KernelRegistry::supports(const std::string& opType, const std::string& deviceKind,
                              const std::vector<DType>& inputDTypes) const {
  for (const KernelDef& d : defs_)
    if (d.opType == opType && d.deviceKind == deviceKind && (!d.accepts || d.accepts(inputDTypes)))
      return true;
  return false;
}

Status KernelRegistry::create(const std::string& deviceKind, const KernelContext& ctx,
                              std::unique_ptr<Kernel>* out) const {
  std::vector<DType> dts;
  for (const TensorType& t : ctx.inputTypes)
    if (t.present()) dts.push_back(t.dtype);
  std::string lastError;
  for (const KernelDef& d : defs_) {
    if (d.opType != ctx.opType || d.deviceKind != deviceKind) continue;
    if (d.accepts && !d.accepts(dts)) continue;
    if (d.supportsContext && !d.supportsContext(ctx)) continue;
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

std::function<bool(const std::vector<DType>&)> acceptsFirstInput(std::vector<DType> dtypes) {
  return [dtypes](const std::vector<DType>& in) {
    return !in.empty() && std::find(dtypes.begin(), dtypes.end(), in[0]) != dtypes.end();
  };
}

}  // namespace tandem
