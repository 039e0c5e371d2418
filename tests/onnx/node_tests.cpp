// The ONNX backend node tests as Transfuse's conformance suite.
//
//   onnx_node_tests CASES_DIR EXPECTED_FAILURES [--report FILE] [--only NAME]
//
// CASES_DIR holds the cases make_node_tests.py wrote (cases.tsv, one
// directory per case). Every case whose op the importer claims
// (onnx_import::supportedOps) is imported and run on the reference backend
// against each of its data sets: outputs must have the expected shapes and
// agree within the case's tolerances, |ours - expected| <= atol + rtol ·
// |expected| (numpy.testing.assert_allclose, NaN equal to NaN, as the
// ONNX backend test runner compares).
//
// EXPECTED_FAILURES lists the cases expected to fail, one per line: the
// name, then why. The run fails when a case fails that the list does not
// name, or when a listed case passes (the list must shrink as the importer
// grows). The report (markdown) gives the pass count per op.
#include "codegen/reference/Interpreter.h"
#include "frontend/onnx/OnnxFile.h"
#include "frontend/onnx/OnnxImport.h"
#include "ir/TransfuseDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;
namespace rt = transfuse::rt;
using namespace mlir::transfuse;

namespace {

struct Case {
  std::string name, op;
  double rtol = 1e-3, atol = 1e-7;
};

std::string readFile(const fs::path &p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

llvm::Expected<onnx_import::TensorValues> readPb(const fs::path &p) {
  onnx::TensorProto t;
  if (!t.ParseFromString(readFile(p)))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   p.string() + ": not a TensorProto");
  return onnx_import::readTensor(t, p.string());
}

/// The input `v` as the tensor `func`'s argument takes.
llvm::Expected<rt::Tensor> toInput(const onnx_import::TensorValues &v, mlir::Type elem) {
  rt::Tensor t;
  t.shape = v.dims;
  const int64_t n = t.numElements();
  if (elem.isF32()) {
    if (!v.isFloat())
      return llvm::createStringError(llvm::inconvertibleErrorCode(), "a float input expected");
    t.dtype = rt::DType::F32;
    t.bytes.resize(n * 4);
    std::copy(v.floats.begin(), v.floats.end(), t.data<float>());
  } else if (elem.isInteger(32)) {
    t.dtype = rt::DType::I32;
    t.bytes.resize(n * 4);
    for (int64_t i = 0; i < n; ++i) {
      if (v.ints[i] < INT32_MIN || v.ints[i] > INT32_MAX)
        return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                       "an integer input outside int32");
      t.data<int32_t>()[i] = static_cast<int32_t>(v.ints[i]);
    }
  } else {
    t.dtype = rt::DType::Bool;
    t.bytes.resize(n);
    for (int64_t i = 0; i < n; ++i)
      t.data<uint8_t>()[i] = v.ints[i] != 0;
  }
  return t;
}

double element(const rt::Tensor &t, int64_t i) {
  switch (t.dtype) {
  case rt::DType::F32: return t.data<float>()[i];
  case rt::DType::F64: return t.data<double>()[i];
  case rt::DType::I32: return t.data<int32_t>()[i];
  case rt::DType::I64: return static_cast<double>(t.data<int64_t>()[i]);
  case rt::DType::Bool: return t.data<uint8_t>()[i];
  default: return NAN;
  }
}

/// Runs one case; an empty string when it passes, else why not.
std::string runCase(mlir::MLIRContext &context, const fs::path &dir, const Case &c) {
  auto imported = onnx_import::importOnnxFile(context, (dir / "model.onnx").string(), {});
  if (!imported)
    return "import: " + llvm::toString(imported.takeError());
  auto func = imported->module->lookupSymbol<mlir::func::FuncOp>("forward");
  reference::TensorMap weights;
  for (const auto &w : imported->weights) {
    rt::Tensor t;
    t.shape = w.shape;
    t.bytes.resize(w.values.size() * 4);
    std::copy(w.values.begin(), w.values.end(), t.data<float>());
    weights[w.name] = std::move(t);
  }
  int sets = 0;
  for (int k = 0; fs::exists(dir / ("test_data_set_" + std::to_string(k))); ++k, ++sets) {
    const fs::path ds = dir / ("test_data_set_" + std::to_string(k));
    reference::TensorMap inputs;
    for (unsigned i = 0; i < func.getNumArguments(); ++i) {
      auto v = readPb(ds / ("input_" + std::to_string(i) + ".pb"));
      if (!v)
        return "input: " + llvm::toString(v.takeError());
      auto type = mlir::cast<mlir::RankedTensorType>(func.getArgument(i).getType());
      auto t = toInput(*v, type.getElementType());
      if (!t)
        return "input " + std::to_string(i) + ": " + llvm::toString(t.takeError());
      inputs[func.getArgAttrOfType<mlir::StringAttr>(i, kNameAttr).str()] = std::move(*t);
    }
    auto outputs = reference::run(func, weights, inputs);
    if (!outputs)
      return "run: " + llvm::toString(outputs.takeError());
    for (unsigned i = 0; i < func.getNumResults(); ++i) {
      const std::string name = func.getResultAttrOfType<mlir::StringAttr>(i, kNameAttr).str();
      auto expected = readPb(ds / ("output_" + std::to_string(i) + ".pb"));
      if (!expected)
        return "expected output: " + llvm::toString(expected.takeError());
      const rt::Tensor &got = outputs->at(name);
      if (got.shape != expected->dims)
        return "output '" + name + "' has shape " + rt::shapeToString(got.shape) + ", expected " +
               rt::shapeToString(expected->dims);
      const int64_t n = got.numElements();
      for (int64_t j = 0; j < n; ++j) {
        const double want = expected->isFloat() ? expected->floats[j]
                                                : static_cast<double>(expected->ints[j]);
        const double have = element(got, j);
        const bool same = (std::isnan(want) && std::isnan(have)) || want == have ||
                          std::fabs(have - want) <= c.atol + c.rtol * std::fabs(want);
        if (!same)
          return "output '" + name + "' element " + std::to_string(j) + ": " +
                 std::to_string(have) + ", expected " + std::to_string(want);
      }
    }
  }
  if (sets == 0)
    return "no test_data_set_0";
  return "";
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 3) {
    std::cerr << "usage: onnx_node_tests CASES_DIR EXPECTED_FAILURES [--report FILE] "
                 "[--only NAME]\n";
    return 2;
  }
  const fs::path casesDir = argv[1];
  std::string reportPath, only;
  for (int i = 3; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--report")
      reportPath = argv[i + 1];
    else if (std::string(argv[i]) == "--only")
      only = argv[i + 1];
  }
  std::map<std::string, std::string> expected; // name -> why
  {
    std::ifstream f(argv[2]);
    if (!f) {
      std::cerr << "onnx_node_tests: cannot read " << argv[2] << "\n";
      return 2;
    }
    std::string line;
    while (std::getline(f, line)) {
      if (line.empty() || line[0] == '#')
        continue;
      const size_t sp = line.find_first_of(" \t");
      expected[line.substr(0, sp)] = sp == std::string::npos ? "" : line.substr(sp + 1);
    }
  }
  std::set<std::string> claimed;
  for (const std::string &op : onnx_import::supportedOps())
    claimed.insert(op);
  std::vector<Case> cases;
  {
    std::ifstream f(casesDir / "cases.tsv");
    if (!f) {
      std::cerr << "onnx_node_tests: no cases.tsv in " << casesDir << "\n";
      return 2;
    }
    std::string line;
    while (std::getline(f, line)) {
      std::istringstream s(line);
      Case c;
      s >> c.name >> c.op >> c.rtol >> c.atol;
      if (claimed.count(c.op) && (only.empty() || c.name == only))
        cases.push_back(c);
    }
  }
  mlir::MLIRContext context;
  std::map<std::string, std::pair<int, int>> perOp; // op -> passed, total
  int unexpected = 0, fixed = 0, passed = 0;
  std::set<std::string> seen;
  for (const Case &c : cases) {
    seen.insert(c.name);
    const std::string why = runCase(context, casesDir / c.name, c);
    const bool ok = why.empty();
    auto &[p, t] = perOp[c.op];
    p += ok;
    ++t;
    passed += ok;
    const bool listed = expected.count(c.name) != 0;
    if (!ok && !listed) {
      ++unexpected;
      std::cout << "FAIL " << c.name << ": " << why << "\n";
    } else if (ok && listed) {
      ++fixed;
      std::cout << "PASSES BUT LISTED " << c.name << " (remove it from the expected failures)\n";
    } else if (!only.empty()) {
      std::cout << (ok ? "PASS " : "EXPECTED FAIL ") << c.name << (ok ? "" : ": " + why) << "\n";
    }
  }
  int stale = 0;
  if (only.empty())
    for (const auto &[name, why] : expected)
      if (!seen.count(name)) {
        ++stale;
        std::cout << "LISTED BUT NOT RUN " << name << "\n";
      }
  std::cout << "onnx node tests: " << passed << " of " << cases.size() << " pass ("
            << cases.size() - passed << " expected to fail: " << expected.size() << " listed); "
            << unexpected << " unexpected failures, " << fixed << " listed cases pass, " << stale
            << " listed cases not run\n";
  if (!reportPath.empty()) {
    std::ofstream r(reportPath);
    r << "| op | pass | cases |\n|---|---:|---:|\n";
    for (const auto &[op, pt] : perOp)
      r << "| " << op << " | " << pt.first << " | " << pt.second << " |\n";
    r << "| **all** | **" << passed << "** | **" << cases.size() << "** |\n";
  }
  return unexpected || fixed || stale ? 1 : 0;
}
