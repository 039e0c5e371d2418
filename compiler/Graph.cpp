//===- Graph.cpp - the graph as Graphviz, before fusion and after ----------===//
//
// One cluster per function, one node per op of its body (the terminator
// aside) and per argument, one edge per use. An op node is labelled with
// the op's name and result shapes and filled by kind: fused attention red,
// norms (add + layer norm, RMSNorm) blue, GEMMs green (darker with an
// epilogue fused), fused elementwise chains orange, the rest white. With a
// fusion report, every op at a why-not site has a dashed red border and the
// reason as its tooltip.
//
//===----------------------------------------------------------------------===//

#include "compiler/Graph.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::transfuse;

namespace {

std::string escape(llvm::StringRef s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c == '\n' ? ' ' : c;
  }
  return out;
}

std::string typeLabel(Type t) {
  auto ranked = dyn_cast<RankedTensorType>(t);
  if (!ranked) {
    std::string s;
    llvm::raw_string_ostream os(s);
    os << t;
    return s;
  }
  std::string s = "[";
  for (int64_t i = 0; i < ranked.getRank(); ++i) {
    if (i)
      s += ",";
    s += ranked.isDynamicDim(i) ? "?" : std::to_string(ranked.getDimSize(i));
  }
  return s + "]";
}

/// The fill of an op by kind, "" for the plain ones.
const char *fillOf(Operation *op) {
  llvm::StringRef name = op->getName().getStringRef();
  if (name.contains("attention"))
    return "#f1948a";
  if (name.contains("layer_norm") || name.contains("rms_norm"))
    return "#85c1e9";
  if (name.ends_with(".linear") || name.ends_with(".matmul") || name.contains("gemm")) {
    for (NamedAttribute a : op->getAttrs())
      if (a.getName().getValue().contains("activation") || a.getName().getValue() == "epilogue")
        return "#58d68d";
    return op->getNumOperands() > 2 ? "#58d68d" : "#abebc6";
  }
  if (name.contains("elementwise") || name.contains("fused"))
    return "#f8c471";
  if (name.contains("rotary"))
    return "#d7bde2";
  return "";
}

} // namespace

std::string mlir::transfuse::compiler::graphDot(ModuleOp module, const FusionReport *report) {
  std::map<std::string, std::string> missed; // location -> reasons
  if (report)
    for (const auto &[kind, entry] : report->all())
      for (const FusionReport::Miss &m : entry.missed) {
        std::string &why = missed[m.location];
        why += (why.empty() ? "" : "; ") + kind + ": " + m.reason;
      }
  std::string out;
  llvm::raw_string_ostream os(out);
  os << "digraph transfuse {\n  rankdir=TB;\n  node [fontname=\"Helvetica\", fontsize=10];\n";
  int next = 0, cluster = 0;
  for (auto func : module.getOps<func::FuncOp>()) {
    if (func.isExternal())
      continue;
    llvm::DenseMap<Value, std::string> nodeOf;
    llvm::DenseMap<Operation *, std::string> opNode;
    os << "  subgraph cluster_" << cluster++ << " {\n    label=\"@" << escape(func.getName())
       << "\";\n    style=rounded;\n";
    for (BlockArgument arg : func.getArguments()) {
      std::string id = "arg" + std::to_string(next++);
      nodeOf[arg] = id;
      std::string name = "arg" + std::to_string(arg.getArgNumber());
      if (auto names = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "transfuse.name"))
        name = names.getValue().str();
      os << "    " << id << " [shape=ellipse, label=\"" << escape(name) << "\\n"
         << escape(typeLabel(arg.getType())) << "\"];\n";
    }
    for (Operation &op : func.getBody().front()) {
      if (op.hasTrait<OpTrait::IsTerminator>())
        continue;
      std::string id = "op" + std::to_string(next++);
      opNode[&op] = id;
      for (Value r : op.getResults())
        nodeOf[r] = id;
      std::string label = op.getName().getStringRef().str();
      for (Value r : op.getResults())
        label += "\\n" + escape(typeLabel(r.getType()));
      os << "    " << id << " [shape=box, style=\"filled";
      auto why = missed.find(locationString(op.getLoc()));
      const bool miss = why != missed.end();
      os << (miss ? ",dashed\", color=\"#c0392b\", penwidth=2" : "\"");
      const char *fill = fillOf(&op);
      os << ", fillcolor=\"" << (*fill ? fill : "#ffffff") << "\", label=\"" << label << "\"";
      if (miss)
        os << ", tooltip=\"" << escape(why->second) << "\"";
      os << "];\n";
    }
    for (Operation &op : func.getBody().front())
      for (Value operand : op.getOperands()) {
        auto from = nodeOf.find(operand);
        if (from == nodeOf.end())
          continue;
        if (op.hasTrait<OpTrait::IsTerminator>()) {
          os << "    " << from->second << " -> out" << cluster << ";\n";
          continue;
        }
        os << "    " << from->second << " -> " << opNode[&op] << ";\n";
      }
    os << "    out" << cluster << " [shape=ellipse, label=\"outputs\"];\n  }\n";
  }
  os << "}\n";
  return out;
}
