// The ONNX backend node tests as Transfuse's conformance suite.
//
//   onnx_node_tests CASES_DIR EXPECTED_FAILURES [--report FILE] [--only NAME]
//                   [--compiled N]
//
// CASES_DIR holds the cases make_node_tests.py wrote (cases.tsv, one
// directory per case). Every case whose op the importer claims
// (onnx_import::supportedOps) is imported and run on the reference backend
// against each of its data sets: outputs must have the expected shapes and
// agree within the case's tolerances, |ours - expected| <= atol + rtol ·
// |expected| (numpy.testing.assert_allclose, NaN equal to NaN, as the
// ONNX backend test runner compares).
//
// With --compiled N, every case that passes on the reference backend is
// also compiled (cpu target, fusion all) and run through the C ABI: N cases
// to an artifact, each case one entry point (case_K), so that a few C++
// builds cover them all. A case passes when both backends pass.
//
// EXPECTED_FAILURES lists the cases expected to fail, one per line: the
// name, then why. The run fails when a case fails that the list does not
// name, or when a listed case passes (the list must shrink as the importer
// grows). A wrong result is never expected: only refusals (an error when
// importing, compiling or running) may be listed. The report (markdown) gives the pass count per op.
#include "codegen/reference/Interpreter.h"
#include "compiler/Compiler.h"
#include "runtime/host/CompiledModel.h"
#include "frontend/onnx/OnnxFile.h"
#include "frontend/onnx/OnnxImport.h"
#include "ir/TransfuseDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <functional>
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

/// Runs the function `func` of one case (through `run`) on each of its
/// data sets; an empty string when every output agrees, else why not.
std::string checkCase(
    const fs::path &dir, const Case &c, mlir::func::FuncOp func,
    const std::function<llvm::Expected<reference::TensorMap>(const reference::TensorMap &)> &run) {
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
    auto outputs = run(inputs);
    if (!outputs)
      return "run: " + llvm::toString(outputs.takeError());
    for (unsigned i = 0; i < func.getNumResults(); ++i) {
      const std::string name = func.getResultAttrOfType<mlir::StringAttr>(i, kNameAttr).str();
      auto expected = readPb(ds / ("output_" + std::to_string(i) + ".pb"));
      if (!expected)
        return "expected output: " + llvm::toString(expected.takeError());
      const rt::Tensor &got = outputs->at(name);
      if (got.shape != expected->dims)
        return "wrong: output '" + name + "' has shape " + rt::shapeToString(got.shape) + ", expected " +
               rt::shapeToString(expected->dims);
      const int64_t n = got.numElements();
      for (int64_t j = 0; j < n; ++j) {
        const double want = expected->isFloat() ? expected->floats[j]
                                                : static_cast<double>(expected->ints[j]);
        const double have = element(got, j);
        const bool same = (std::isnan(want) && std::isnan(have)) || want == have ||
                          std::fabs(have - want) <= c.atol + c.rtol * std::fabs(want);
        if (!same)
          return "wrong: output '" + name + "' element " + std::to_string(j) + ": " +
                 std::to_string(have) + ", expected " + std::to_string(want);
      }
    }
  }
  if (sets == 0)
    return "no test_data_set_0";
  return "";
}

/// Imports and runs one case on the reference backend.
std::string runReference(mlir::MLIRContext &context, const fs::path &dir, const Case &c) {
  auto imported = onnx_import::importOnnxFile(context, (dir / "model.onnx").string(), {});
  if (!imported)
    return "import: " + llvm::toString(imported.takeError());
  auto func = imported->module->lookupSymbol<mlir::func::FuncOp>("forward");
  const reference::TensorMap weights = compiler::carriedTensors(imported->weights);
  return checkCase(dir, c, func, [&](const reference::TensorMap &inputs) {
    return reference::run(func, weights, inputs);
  });
}

/// Compiles `batch` (cases that import) into one artifact, each case the
/// entry case_K with its parameters prefixed "case_K.", and runs each;
/// returns the failures by case name.
std::map<std::string, std::string> runCompiled(const fs::path &casesDir,
                                               const std::vector<Case> &batch) {
  std::map<std::string, std::string> failures;
  mlir::MLIRContext context;
  mlir::OpBuilder b(&context);
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::ModuleOp::create(b.getUnknownLoc());
  compiler::CompileOptions options;
  options.strategy = llvm::cantFail(FusionStrategy::parse("all"));
  std::vector<std::string> entries;
  for (const auto &[k, c] : llvm::enumerate(batch)) {
    auto imported =
        onnx_import::importOnnxFile(context, (casesDir / c.name / "model.onnx").string(), {});
    if (!imported) {
      failures[c.name] = "import: " + llvm::toString(imported.takeError());
      continue;
    }
    const std::string entry = "case_" + std::to_string(k);
    auto func = imported->module->lookupSymbol<mlir::func::FuncOp>("forward");
    func.walk([&](ParamOp p) { p.setName(entry + "." + p.getName().str()); });
    func->remove();
    func.setName(entry);
    module->push_back(func);
    for (auto &w : imported->weights) {
      w.name = entry + "." + w.name;
      options.weights.push_back(std::move(w));
    }
    entries.push_back(c.name);
  }
  auto dir = compiler::TemporaryDirectory::create("transfuse-onnx-node");
  if (!dir) {
    std::cerr << llvm::toString(dir.takeError()) << "\n";
    std::exit(2);
  }
  auto artifact = compiler::compile(*module, dir->path(), options);
  if (!artifact) {
    const std::string why = "compile: " + llvm::toString(artifact.takeError());
    if (batch.size() == 1) {
      failures.emplace(batch[0].name, why);
      return failures;
    }
    // One case that does not compile fails the batch: halve it to find which.
    const size_t half = batch.size() / 2;
    for (auto part : {std::vector<Case>(batch.begin(), batch.begin() + half),
                      std::vector<Case>(batch.begin() + half, batch.end())})
      for (auto &[name, w] : runCompiled(casesDir, part))
        failures[name] = w;
    return failures;
  }
  rt::LoadOptions load;
  load.weightsPath = dir->path() + "/" + compiler::kCarriedWeights;
  if (!fs::exists(load.weightsPath))
    load.weightsPath.clear();
  load.threads = 2;
  auto model = rt::CompiledModel::load(dir->path() + "/libmodel.so", load);
  if (!model.isOk()) {
    for (const Case &c : batch)
      failures.emplace(c.name, "load: " + model.status().message());
    return failures;
  }
  for (const auto &[k, c] : llvm::enumerate(batch)) {
    if (failures.count(c.name))
      continue;
    const std::string entry = "case_" + std::to_string(k);
    auto func = module->lookupSymbol<mlir::func::FuncOp>(entry);
    const std::string why =
        checkCase(casesDir / c.name, c, func,
                  [&](const reference::TensorMap &inputs) -> llvm::Expected<reference::TensorMap> {
                    auto out = (*model)->run(entry, inputs);
                    if (!out.isOk())
                      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                                     out.status().message());
                    return std::move(*out);
                  });
    if (!why.empty())
      failures[c.name] = "compiled: " + why;
  }
  return failures;
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
  size_t compiledBatch = 0;
  for (int i = 3; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--report")
      reportPath = argv[i + 1];
    else if (std::string(argv[i]) == "--only")
      only = argv[i + 1];
    else if (std::string(argv[i]) == "--compiled")
      compiledBatch = std::stoul(argv[i + 1]);
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
  std::map<std::string, std::string> why; // failures by case
  std::vector<Case> referencePassed;
  for (const Case &c : cases) {
    std::string w = runReference(context, casesDir / c.name, c);
    if (w.empty())
      referencePassed.push_back(c);
    else
      why[c.name] = w;
  }
  int compiledCases = 0;
  for (size_t i = 0; compiledBatch && i < referencePassed.size(); i += compiledBatch) {
    std::vector<Case> batch(referencePassed.begin() + i,
                            referencePassed.begin() +
                                std::min(referencePassed.size(), i + compiledBatch));
    compiledCases += static_cast<int>(batch.size());
    for (auto &[name, w] : runCompiled(casesDir, batch))
      why[name] = w;
  }
  std::map<std::string, std::pair<int, int>> perOp; // op -> passed, total
  int unexpected = 0, fixed = 0, passed = 0;
  std::set<std::string> seen;
  for (const Case &c : cases) {
    seen.insert(c.name);
    const bool ok = !why.count(c.name);
    auto &[p, t] = perOp[c.op];
    p += ok;
    ++t;
    passed += ok;
    // Outputs that disagree (a wrong result, not a refusal) fail even when listed.
    const bool wrong = !ok && why[c.name].find("wrong: ") != std::string::npos;
    const bool listed = expected.count(c.name) != 0 && !wrong;
    if (!ok && !listed) {
      ++unexpected;
      std::cout << "FAIL " << c.name << ": " << why[c.name] << "\n";
    } else if (ok && listed) {
      ++fixed;
      std::cout << "PASSES BUT LISTED " << c.name << " (remove it from the expected failures)\n";
    } else if (!only.empty()) {
      std::cout << (ok ? "PASS " : "EXPECTED FAIL ") << c.name << (ok ? "" : ": " + why[c.name])
                << "\n";
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
            << " listed cases not run; " << compiledCases << " also compiled (cpu)\n";
  if (!reportPath.empty()) {
    std::ofstream r(reportPath);
    r << "| op | pass | cases |\n|---|---:|---:|\n";
    for (const auto &[op, pt] : perOp)
      r << "| " << op << " | " << pt.first << " | " << pt.second << " |\n";
    r << "| **all** | **" << passed << "** | **" << cases.size() << "** |\n";
  }
  return unexpected || fixed || stale ? 1 : 0;
}
