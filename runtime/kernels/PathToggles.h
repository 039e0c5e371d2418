// Toggles of the int8 and bf16 GEMMs' paths ("-amx,-vnni": Int8Gemm.h,
// Bf16Gemm.h, Targets.h's forceTarget): comma lists, names in any case.
#ifndef TRANSFUSE_RUNTIME_KERNELS_PATHTOGGLES_H
#define TRANSFUSE_RUNTIME_KERNELS_PATHTOGGLES_H

#include "runtime/Status.h"

#include <strings.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace transfuse::kernels {

// The non-empty items of a comma-separated list.
inline std::vector<std::string> commaItems(std::string_view list) {
  std::vector<std::string> items;
  for (size_t start = 0; start <= list.size();) {
    const size_t end = std::min(list.find(',', start), list.size());
    if (end > start) items.emplace_back(list.substr(start, end - start));
    start = end + 1;
  }
  return items;
}

// The path `name` names (any case) among `all`, as nameOf spells them.
template <class Path, size_t N>
std::optional<Path> pathNamed(std::string_view name, const std::array<Path, N>& all,
                              const char* (*nameOf)(Path)) {
  for (Path p : all)
    if (name.size() == std::strlen(nameOf(p)) &&
        ::strncasecmp(name.data(), nameOf(p), name.size()) == 0)
      return p;
  return std::nullopt;
}

// Removes from `available` each path a "-name" toggle names; the last of
// `all` (scalar) stays. Error, naming `gemm` ("int8"): an item that is not
// "-" and the name of another path.
template <class Path, size_t N>
rt::Status removeToggledPaths(std::string_view toggles, std::vector<Path>& available,
                              const std::array<Path, N>& all, const char* (*nameOf)(Path),
                              const char* gemm) {
  for (const std::string& item : commaItems(toggles)) {
    const std::optional<Path> p =
        item[0] == '-' ? pathNamed(std::string_view(item).substr(1), all, nameOf) : std::nullopt;
    if (!p || *p == all.back()) {
      std::string names;
      for (size_t i = 0; i + 1 < N; ++i) names += (i ? ", -" : "-") + std::string(nameOf(all[i]));
      return rt::Status::error(std::string(gemm) + " path toggle '" + item + "': not one of " +
                               names + " (" + nameOf(all.back()) + " stays)");
    }
    available.erase(std::remove(available.begin(), available.end(), *p), available.end());
  }
  return rt::Status::ok();
}

}  // namespace transfuse::kernels

#endif  // TRANSFUSE_RUNTIME_KERNELS_PATHTOGGLES_H
