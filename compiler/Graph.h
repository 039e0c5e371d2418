//===- Graph.h - the graph as Graphviz ------------------------------------===//
//
// The dataflow graph of a module as Graphviz text: what `compile` writes as
// DIR/graph.before.dot (as built) and DIR/graph.after.dot (fused, with the
// why-not sites of `report` marked), and what transfuse.graph renders.
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_COMPILER_GRAPH_H
#define TRANSFUSE_COMPILER_GRAPH_H

#include "passes/FusionReport.h"

#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace mlir::transfuse::compiler {

/// One cluster per function, one node per op (terminators aside) and per
/// argument, one edge per use; fused ops filled by kind; with `report`, the
/// ops at its why-not sites outlined in red with the reason as tooltip.
std::string graphDot(ModuleOp module, const FusionReport *report);

} // namespace mlir::transfuse::compiler

#endif // TRANSFUSE_COMPILER_GRAPH_H
