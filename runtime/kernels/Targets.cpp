// Highway target reporting (see Targets.h).

#include "runtime/kernels/Targets.h"

#include "runtime/kernels/Bf16Gemm.h"
#include "runtime/kernels/Int8Gemm.h"
#include "runtime/kernels/PathToggles.h"

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
    // The int8 and bf16 paths of a better machine go too: AVX2 code has no
    // VNNI, BF16 or AMX, and below AVX2 no vpmaddubsw or FMA path.
    const bool avx3 = ::strncasecmp(wanted.c_str(), "AVX3", 4) == 0;
    const bool avx2 = avx3 || ::strcasecmp(wanted.c_str(), "AVX2") == 0;
    if (avx3) return rt::Status::ok();
    if (rt::Status s = restrictBf16Paths(avx2 ? "-amx,-avx512bf16" : "-amx,-avx512bf16,-avx2"); !s)
      return s;
    return restrictInt8Paths(avx2 ? "-amx,-vnni" : "-amx,-vnni,-avx2");
  }
  return rt::Status::error("Highway target '" + wanted +
                           "' is not available on this CPU and build (available: " +
                           availableTargetNames() + ")");
}

}  // namespace

rt::Status forceTarget(std::string_view spec) {
  // "AVX3,-AMX": at most one target, then toggles of the int8 and bf16
  // paths, each going to the GEMMs that have the path ("-amx": both).
  std::string target, int8Toggles, bf16Toggles;
  for (const std::string& item : commaItems(spec)) {
    if (item[0] != '-') {
      if (!target.empty())
        return rt::Status::error("'" + std::string(spec) + "' names two targets (" + target +
                                 ", " + item + ")");
      target = item;
      continue;
    }
    const std::string name = item.substr(1);
    const bool int8 = int8PathNamed(name) && *int8PathNamed(name) != Int8Path::kScalar;
    const bool bf16 = bf16PathNamed(name) && *bf16PathNamed(name) != Bf16Path::kScalar;
    if (!int8 && !bf16)
      return rt::Status::error("path toggle '" + item +
                               "': not one of -amx, -vnni, -avx512bf16, -avx2 (scalar stays)");
    if (int8) int8Toggles += (int8Toggles.empty() ? "" : ",") + item;
    if (bf16) bf16Toggles += (bf16Toggles.empty() ? "" : ",") + item;
  }
  if (!target.empty())
    if (rt::Status s = forceHighwayTarget(target); !s.isOk()) return s;
  if (rt::Status s = restrictBf16Paths(bf16Toggles); !s) return s;
  return restrictInt8Paths(int8Toggles);
}

rt::Status forceTargetFromEnvironment() {
  const char* isa = std::getenv("TRANSFUSE_ISA");
  if (!isa || !*isa) return rt::Status::ok();
  rt::Status s = forceTarget(isa);
  return s ? s : rt::Status::error("TRANSFUSE_ISA: " + s.message());
}

}  // namespace transfuse::kernels
