// Highway target reporting (see Targets.h).

#include "runtime/kernels/Targets.h"

#include "runtime/kernels/Int8Gemm.h"

#include <hwy/targets.h>

#include <strings.h>

#include <algorithm>
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

namespace {

rt::Status forceHighwayTarget(const std::string& wanted) {
  for (int64_t t : hwy::SupportedAndGeneratedTargets()) {
    if (::strcasecmp(wanted.c_str(), hwy::TargetName(t)) != 0) continue;
    // Targets are bits, better ones lower: keep t and the worse ones.
    // (Highway 1.0.3's DisableTargets does not change the target that
    // dynamic dispatch has chosen; SetSupportedTargetsForTest does.)
    hwy::SetSupportedTargetsForTest(hwy::SupportedTargets() & ~(t - 1));
    // The int8 paths of a better machine go too: AVX2 code has no VNNI or
    // AMX, and below AVX2 no vpmaddubsw path.
    const bool avx3 = ::strncasecmp(wanted.c_str(), "AVX3", 4) == 0;
    const bool avx2 = avx3 || ::strcasecmp(wanted.c_str(), "AVX2") == 0;
    if (!avx3) return restrictInt8Paths(avx2 ? "-amx,-vnni" : "-amx,-vnni,-avx2");
    return rt::Status::ok();
  }
  return rt::Status::error("Highway target '" + wanted +
                           "' is not available on this CPU and build (available: " +
                           availableTargetNames() + ")");
}

}  // namespace

rt::Status forceTarget(std::string_view spec) {
  // "AVX3,-AMX": at most one target, then toggles of the int8 paths.
  std::string target, toggles;
  std::string list(spec);
  for (size_t start = 0; start <= list.size();) {
    const size_t end = std::min(list.find(',', start), list.size());
    const std::string item = list.substr(start, end - start);
    start = end + 1;
    if (item.empty()) continue;
    if (item[0] == '-') {
      toggles += (toggles.empty() ? "" : ",") + item;
    } else if (target.empty()) {
      target = item;
    } else {
      return rt::Status::error("'" + std::string(spec) + "' names two targets (" + target +
                               ", " + item + ")");
    }
  }
  if (!target.empty())
    if (rt::Status s = forceHighwayTarget(target); !s.isOk()) return s;
  return restrictInt8Paths(toggles);
}

rt::Status forceTargetFromEnvironment() {
  const char* isa = std::getenv("TRANSFUSE_ISA");
  if (!isa || !*isa) return rt::Status::ok();
  rt::Status s = forceTarget(isa);
  return s ? s : rt::Status::error("TRANSFUSE_ISA: " + s.message());
}

}  // namespace transfuse::kernels
