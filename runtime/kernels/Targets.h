// Which Highway targets this build dispatches to, for benchmark and test
// reports. The kernels themselves dispatch at their coarse entry points.
#ifndef TRANSFUSE_RUNTIME_KERNELS_TARGETS_H
#define TRANSFUSE_RUNTIME_KERNELS_TARGETS_H

#include <string>

namespace transfuse::kernels {

// The name of the best Highway target this CPU supports among those compiled
// in, e.g. "AVX3".
std::string bestTargetName();

}  // namespace transfuse::kernels

#endif  // TRANSFUSE_RUNTIME_KERNELS_TARGETS_H
