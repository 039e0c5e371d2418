//===- PassDetail.h - what every pass file includes -----------------------===//
#ifndef TRANSFUSE_PASSES_PASSDETAIL_H
#define TRANSFUSE_PASSES_PASSDETAIL_H

#include "ir/TransfuseDialect.h"
#include "passes/FusionUtils.h"
#include "passes/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Pass/Pass.h"

#endif // TRANSFUSE_PASSES_PASSDETAIL_H
