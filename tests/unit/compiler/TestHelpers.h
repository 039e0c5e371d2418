// Helpers shared by the compiler unit tests: building a tiny func::FuncOp with
// named arguments and results, running it on the reference interpreter, and
// making and reading rt::Tensor values.
#ifndef TRANSFUSE_TESTS_UNIT_COMPILER_TESTHELPERS_H
#define TRANSFUSE_TESTS_UNIT_COMPILER_TESTHELPERS_H

#include "codegen/reference/Interpreter.h"
#include "frontend/GraphBuilder.h"
#include "ir/TransfuseDialect.h"
#include "runtime/Tensor.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/Error.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace transfuse_test {

namespace rt = ::transfuse::rt;
using mlir::transfuse::reference::TensorMap;

/// The message of an error, or "" (consumed either way).
inline std::string errorText(llvm::Error err) {
  if (!err)
    return "";
  return llvm::toString(std::move(err));
}

template <typename T>
std::string errorText(llvm::Expected<T> &value) {
  if (value)
    return "";
  return llvm::toString(value.takeError());
}

inline bool contains(const std::string &haystack, const std::string &needle) {
  return haystack.find(needle) != std::string::npos;
}

inline rt::Tensor f32Tensor(std::vector<int64_t> shape, const std::vector<double> &values) {
  rt::Tensor t = rt::Tensor::zeros(rt::DType::F32, std::move(shape));
  EXPECT_EQ((size_t)t.numElements(), values.size());
  for (size_t i = 0; i < values.size() && i < (size_t)t.numElements(); ++i)
    t.data<float>()[i] = (float)values[i];
  return t;
}

inline rt::Tensor i32Tensor(std::vector<int64_t> shape, const std::vector<int32_t> &values) {
  rt::Tensor t = rt::Tensor::zeros(rt::DType::I32, std::move(shape));
  EXPECT_EQ((size_t)t.numElements(), values.size());
  for (size_t i = 0; i < values.size() && i < (size_t)t.numElements(); ++i)
    t.data<int32_t>()[i] = values[i];
  return t;
}

inline rt::Tensor boolTensor(std::vector<int64_t> shape, const std::vector<int> &values) {
  rt::Tensor t = rt::Tensor::zeros(rt::DType::Bool, std::move(shape));
  EXPECT_EQ((size_t)t.numElements(), values.size());
  for (size_t i = 0; i < values.size() && i < (size_t)t.numElements(); ++i)
    t.data<uint8_t>()[i] = values[i] ? 1 : 0;
  return t;
}

/// The elements of an F64 (or F32, I32, Bool) tensor as doubles.
inline std::vector<double> values(const rt::Tensor &t) {
  std::vector<double> out;
  for (int64_t i = 0; i < t.numElements(); ++i) {
    switch (t.dtype) {
    case rt::DType::F64: out.push_back(t.data<double>()[i]); break;
    case rt::DType::F32: out.push_back(t.data<float>()[i]); break;
    case rt::DType::I32: out.push_back(t.data<int32_t>()[i]); break;
    case rt::DType::Bool: out.push_back(t.data<uint8_t>()[i]); break;
    default: ADD_FAILURE() << "unexpected dtype " << rt::dtypeName(t.dtype); break;
    }
  }
  return out;
}

constexpr int64_t kDyn = mlir::ShapedType::kDynamic;

/// A module holding one function `f`, built from a body callback. Arguments
/// are named by `transfuse.name`; results are named out0, out1, ...
class TinyFunc {
public:
  using Body = llvm::function_ref<llvm::SmallVector<mlir::Value>(
      mlir::transfuse::GraphBuilder &, llvm::ArrayRef<mlir::Value>)>;

  TinyFunc() {
    ctx.loadDialect<mlir::transfuse::TransfuseDialect, mlir::func::FuncDialect>();
    module = mlir::ModuleOp::create(mlir::UnknownLoc::get(&ctx));
  }

  mlir::MLIRContext &context() { return ctx; }
  mlir::Type f32() { return mlir::Float32Type::get(&ctx); }
  mlir::Type f64() { return mlir::Float64Type::get(&ctx); }
  mlir::Type i32() { return mlir::IntegerType::get(&ctx, 32); }
  mlir::Type i1() { return mlir::IntegerType::get(&ctx, 1); }
  mlir::RankedTensorType t(std::vector<int64_t> shape, mlir::Type element) {
    return mlir::RankedTensorType::get(shape, element);
  }

  /// Builds `f(args...) -> body(...)`; returns false when it does not verify.
  bool build(const std::vector<std::pair<std::string, mlir::Type>> &args, Body body,
             int64_t maxBatch = 8, int64_t maxSeqLen = 16) {
    mlir::OpBuilder b(&ctx);
    b.setInsertionPointToEnd(module->getBody());
    llvm::SmallVector<mlir::Type> argTypes;
    for (const auto &a : args)
      argTypes.push_back(a.second);
    func = mlir::func::FuncOp::create(b, b.getUnknownLoc(), "f",
                                      b.getFunctionType(argTypes, {}));
    mlir::Block *entry = func.addEntryBlock();
    b.setInsertionPointToStart(entry);
    mlir::transfuse::GraphBuilder g(b, mlir::NameLoc::get(b.getStringAttr("test")));
    llvm::SmallVector<mlir::Value> argValues(entry->getArguments().begin(),
                                             entry->getArguments().end());
    llvm::SmallVector<mlir::Value> results = body(g, argValues);
    mlir::func::ReturnOp::create(b, b.getUnknownLoc(), results);
    llvm::SmallVector<mlir::Type> resultTypes;
    for (mlir::Value v : results)
      resultTypes.push_back(v.getType());
    func.setType(b.getFunctionType(argTypes, resultTypes));
    for (size_t i = 0; i < args.size(); ++i)
      func.setArgAttr(i, "transfuse.name", b.getStringAttr(args[i].first));
    for (size_t i = 0; i < results.size(); ++i)
      func.setResultAttr(i, "transfuse.name", b.getStringAttr("out" + std::to_string(i)));
    func->setAttr(mlir::transfuse::kMaxBatchAttr, b.getI64IntegerAttr(maxBatch));
    func->setAttr(mlir::transfuse::kMaxSeqLenAttr, b.getI64IntegerAttr(maxSeqLen));
    return mlir::succeeded(mlir::verify(*module));
  }

  llvm::Expected<TensorMap> run(const TensorMap &inputs, const TensorMap &weights = {}) {
    return mlir::transfuse::reference::run(func, weights, inputs, /*f64Outputs=*/true);
  }

  mlir::MLIRContext ctx;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  mlir::func::FuncOp func;
};

} // namespace transfuse_test

#endif // TRANSFUSE_TESTS_UNIT_COMPILER_TESTHELPERS_H
