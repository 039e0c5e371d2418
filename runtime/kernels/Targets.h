// Which Highway targets this build dispatches to, for benchmark and test
// reports. The kernels themselves dispatch at their coarse entry points.
#ifndef TRANSFUSE_RUNTIME_KERNELS_TARGETS_H
#define TRANSFUSE_RUNTIME_KERNELS_TARGETS_H

#include <string>
#include <string_view>

#include "runtime/Status.h"

namespace transfuse::kernels {

// The name of the best Highway target this CPU supports among those compiled
// in, e.g. "AVX3" (after forceTarget: the forced one).
std::string bestTargetName();

// The targets this CPU supports among those compiled in, best first,
// comma-separated ("AVX3,AVX2,SSE4,SSSE3,EMU128").
std::string availableTargetNames();

// Dispatches every kernel of this process, and of the artifacts it loads
// (they share Highway's dispatch state), to a target instead of the best
// one, so that one machine can measure e.g. its AVX2 path beside its
// AVX-512 one. `spec` is a target (as bestTargetName spells it, any case)
// and/or toggles of the int8 and bf16 GEMMs' paths: "AVX2", "AVX3,-AMX",
// "-amx,-vnni", "-avx512bf16" (Int8Gemm.h, Bf16Gemm.h; -amx and -avx2 turn
// off both GEMMs' paths of that name). A target below AVX3 also turns off
// the paths it lacks (VNNI, BF16 and AMX; below AVX2, vpmaddubsw and FMA). It disables the
// better targets and paths for the rest of the process. Error: a name this
// CPU or this build does not have, listing those it has.
rt::Status forceTarget(std::string_view spec);

// forceTarget($TRANSFUSE_ISA) when the variable is set and not empty.
rt::Status forceTargetFromEnvironment();

}  // namespace transfuse::kernels

#endif  // TRANSFUSE_RUNTIME_KERNELS_TARGETS_H
