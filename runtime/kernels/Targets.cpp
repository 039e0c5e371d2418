// Highway target reporting (see Targets.h).

#include "runtime/kernels/Targets.h"

#include <hwy/targets.h>

#include <strings.h>

#include <cstdlib>
#include <vector>

namespace transfuse::kernels {

std::string bestTargetName() {
  // Best first: targets are bits, and lower bits are better ones.
  std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
  return targets.empty() ? "none" : hwy::TargetName(targets.front());
}

std::string availableTargetNames() {
  std::string names;
  for (int64_t t : hwy::SupportedAndGeneratedTargets())
    names += (names.empty() ? "" : ",") + std::string(hwy::TargetName(t));
  return names;
}

rt::Status forceTarget(std::string_view name) {
  const std::string wanted(name);
  for (int64_t t : hwy::SupportedAndGeneratedTargets()) {
    if (::strcasecmp(wanted.c_str(), hwy::TargetName(t)) != 0) continue;
    // Targets are bits, better ones lower: keep t and the worse ones.
    // (Highway 1.0.3's DisableTargets does not change the target that
    // dynamic dispatch has chosen; SetSupportedTargetsForTest does.)
    hwy::SetSupportedTargetsForTest(hwy::SupportedTargets() & ~(t - 1));
    return rt::Status::ok();
  }
  return rt::Status::error("Highway target '" + wanted +
                           "' is not available on this CPU and build (available: " +
                           availableTargetNames() + ")");
}

rt::Status forceTargetFromEnvironment() {
  const char* isa = std::getenv("TRANSFUSE_ISA");
  if (!isa || !*isa) return rt::Status::ok();
  rt::Status s = forceTarget(isa);
  return s ? s : rt::Status::error("TRANSFUSE_ISA: " + s.message());
}

}  // namespace transfuse::kernels
