//===- TransfuseDialect.cpp - dialect registration and shared helpers ----===//

#include "ir/TransfuseDialect.h"
#include "ir/Gradients.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::transfuse;

#include "ir/TransfuseDialect.cpp.inc"
#include "ir/TransfuseEnums.cpp.inc"
#define GET_ATTRDEF_CLASSES
#include "ir/TransfuseAttrs.cpp.inc"
#include "ir/TransfuseInterfaces.cpp.inc"

void TransfuseDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "ir/TransfuseAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "ir/TransfuseOps.cpp.inc"
      >();
  attachGradientRules(getContext());
}

Operation *TransfuseDialect::materializeConstant(OpBuilder &builder,
                                                 Attribute value, Type type,
                                                 Location loc) {
  if (auto elements = dyn_cast<ElementsAttr>(value))
    if (elements.getType() == type)
      return ConstantOp::create(builder, loc, elements);
  return nullptr;
}

LogicalResult mlir::transfuse::broadcastShapes(ArrayRef<int64_t> a,
                                               ArrayRef<int64_t> b,
                                               SmallVectorImpl<int64_t> &out,
                                               std::string &error) {
  size_t rank = std::max(a.size(), b.size());
  out.assign(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    // Align from the right.
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da == 1) {
      out[i] = db;
    } else if (db == 1) {
      out[i] = da;
    } else if (ShapedType::isDynamic(da)) {
      out[i] = db;
    } else if (ShapedType::isDynamic(db) || da == db) {
      out[i] = da;
    } else {
      error = "dimension " + std::to_string(i) + " of the broadcast result: " +
              std::to_string(da) + " vs " + std::to_string(db);
      return failure();
    }
  }
  return success();
}
