//===- FusionReport.h - what fused, and why the rest did not --------------===//
//
// Each fusion pass records, per fusion kind, the sites it fused and every
// candidate site it left alone with the reason. The driver prints the report
// and writes report.json; passes run without a report (transfuse-opt) emit
// the same facts as remarks when asked (`remarks=true`).
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_PASSES_FUSIONREPORT_H
#define TRANSFUSE_PASSES_FUSIONREPORT_H

#include "mlir/IR/Location.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/JSON.h"

#include <map>
#include <string>
#include <vector>

namespace mlir::transfuse {

class FusionReport {
public:
  struct Miss {
    std::string location;
    std::string reason;
  };
  struct Entry {
    int64_t fused = 0;
    std::vector<Miss> missed;
  };

  void fused(llvm::StringRef fusion) { entries[fusion.str()].fused++; }
  void missed(llvm::StringRef fusion, Location loc, llvm::StringRef reason);

  const std::map<std::string, Entry> &all() const { return entries; }
  llvm::json::Value toJson() const;
  /// A human-readable table: counts per fusion, then the why-not list.
  std::string format() const;

private:
  std::map<std::string, Entry> entries;
};

/// Formats a location as "file:line:col" or the name of a NameLoc.
std::string locationString(Location loc);

} // namespace mlir::transfuse

#endif // TRANSFUSE_PASSES_FUSIONREPORT_H
