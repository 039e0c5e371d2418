//===- FusionReport.cpp - the fusion report -------------------------------===//

#include "passes/FusionReport.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::transfuse;

std::string mlir::transfuse::locationString(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().str();
  if (auto file = dyn_cast<FileLineColLoc>(loc))
    return (file.getFilename().str() + ":" + std::to_string(file.getLine()) + ":" +
            std::to_string(file.getColumn()));
  if (auto fused = dyn_cast<FusedLoc>(loc))
    return fused.getLocations().empty() ? "unknown" : locationString(fused.getLocations()[0]);
  std::string s;
  llvm::raw_string_ostream os(s);
  loc.print(os);
  return s;
}

void FusionReport::missed(llvm::StringRef fusion, Location loc, llvm::StringRef reason) {
  entries[fusion.str()].missed.push_back({locationString(loc), reason.str()});
}

llvm::json::Value FusionReport::toJson() const {
  llvm::json::Object out;
  for (const auto &[fusion, entry] : entries) {
    llvm::json::Array missed;
    for (const Miss &m : entry.missed)
      missed.push_back(llvm::json::Object{{"location", m.location}, {"reason", m.reason}});
    out[fusion] = llvm::json::Object{{"fused", entry.fused}, {"not_fused", std::move(missed)}};
  }
  return llvm::json::Value(std::move(out));
}

std::string FusionReport::format() const {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "fusion report\n";
  for (const auto &[fusion, entry] : entries)
    os << "  " << llvm::left_justify(fusion, 22) << llvm::right_justify(std::to_string(entry.fused), 5)
       << " fused, " << entry.missed.size() << " not fused\n";
  bool any = false;
  for (const auto &[fusion, entry] : entries)
    for (const Miss &m : entry.missed) {
      if (!any)
        os << "not fused:\n";
      any = true;
      os << "  " << fusion << " at " << m.location << ": " << m.reason << "\n";
    }
  return s;
}
