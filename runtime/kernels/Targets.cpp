// Highway target reporting (see Targets.h).

#include "runtime/kernels/Targets.h"

#include <hwy/targets.h>

#include <vector>

namespace transfuse::kernels {

std::string bestTargetName() {
  // Best first: targets are bits, and lower bits are better ones.
  std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
  return targets.empty() ? "none" : hwy::TargetName(targets.front());
}

}  // namespace transfuse::kernels
