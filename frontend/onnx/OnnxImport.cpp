//===- OnnxImport.cpp - an ONNX graph as a function of the transfuse dialect ===//
//
// One pass over the nodes in graph order. Each ONNX value is either a
// run-time tensor (an mlir::Value) or a value known at compile time (Host:
// float, integer or boolean elements in double, row-major), and a node
// whose inputs are all known is evaluated here (folded) instead of emitted.
// Integer elements may be symbolic: the run-time size of a dynamic
// dimension (a SizeExpr of an input's dimension), which is how Shape's
// results flow through Gather, Concat and Unsqueeze into Reshape's target
// or a Slice's end without ever becoming an op.
//
//===----------------------------------------------------------------------===//

#include "frontend/onnx/OnnxImport.h"

#include "frontend/GraphBuilder.h"
#include "frontend/onnx/OnnxFile.h"
#include "ir/Sizes.h"
#include "ir/TransfuseDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>
#include <set>

using namespace mlir;
using namespace mlir::transfuse;
using namespace mlir::transfuse::onnx_import;

namespace {

constexpr int64_t kDyn = ShapedType::kDynamic;
/// Float tensors of this many elements or more (not all equal) become
/// parameters; smaller ones are constants in the IR.
constexpr int64_t kParamElements = 16;
/// The most elements a tensor made when compiling (ConstantOfShape, Range,
/// Expand of known values) may hold.
constexpr int64_t kMaxFolded = int64_t{1} << 26;

enum class Elem { kFloat, kInt, kBool };

int64_t product(llvm::ArrayRef<int64_t> shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
}

/// A tensor known at compile time.
struct Host {
  Elem elem = Elem::kFloat;
  std::vector<int64_t> shape;
  std::vector<double> v;
  /// Empty, or one per element: a known() expression marks a run-time size.
  std::vector<SizeExpr> sym;

  int64_t numel() const { return static_cast<int64_t>(v.size()); }
  bool symbolic(int64_t i) const { return !sym.empty() && sym[i].known(); }
  bool anySymbolic() const {
    return llvm::any_of(sym, [](const SizeExpr &s) { return s.known(); });
  }
  /// Element i's symbol (or an unknown expression).
  SizeExpr symbolAt(int64_t i) const { return sym.empty() ? SizeExpr() : sym[i]; }
};

/// The elements of `x` at `from` (flat indices) in `shape`.
Host pick(const Host &x, std::vector<int64_t> shape, llvm::ArrayRef<int64_t> from) {
  Host r;
  r.elem = x.elem;
  r.shape = std::move(shape);
  r.v.reserve(from.size());
  for (int64_t i : from)
    r.v.push_back(x.v[i]);
  if (x.anySymbolic())
    for (int64_t i : from)
      r.sym.push_back(x.sym[i]);
  return r;
}

/// A known element as an integer: saturated to int64's range (an int64
/// tensor's INT64_MAX, "to the end", survives its trip through double), NaN
/// as 0.
int64_t toInt(double x) {
  if (std::isnan(x))
    return 0;
  if (x >= 9.2233720368547758e18)
    return std::numeric_limits<int64_t>::max();
  if (x <= -9.2233720368547758e18)
    return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(x);
}

/// "2x?x768".
std::string shapeStr(llvm::ArrayRef<int64_t> shape) {
  std::string s;
  for (auto [i, d] : llvm::enumerate(shape))
    s += (i ? "x" : "") + (d == kDyn ? std::string("?") : std::to_string(d));
  return s.empty() ? "a scalar" : s;
}

std::vector<int64_t> stridesOf(llvm::ArrayRef<int64_t> shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    s[i] = s[i + 1] * shape[i + 1];
  return s;
}

/// Calls f(flat index, multi-index) for every element of `shape`.
void forEachIndex(llvm::ArrayRef<int64_t> shape,
                  llvm::function_ref<void(int64_t, llvm::ArrayRef<int64_t>)> f) {
  const int64_t n = product(shape);
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    f(i, idx);
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
      if (++idx[d] < shape[d])
        break;
      idx[d] = 0;
    }
  }
}

/// "FLOAT16"; the number for a type newer than libonnx's enum.
std::string typeName(int64_t t) {
  return onnx::TensorProto::DataType_IsValid(static_cast<int>(t))
             ? onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(t))
             : "type " + std::to_string(t);
}

/// A run-time tensor or a known one.
struct Val {
  Value rt;
  std::optional<Host> host;
  /// A float initializer's name: the parameter it becomes.
  std::string initializer;
  /// When > 0, the ONNX value is `rt` with its first `folded` dimensions
  /// merged into one: x.view(-1, D) or Flatten of a [B, S, D] tensor, which
  /// the dialect's reshape cannot write (it keeps dynamic dimensions
  /// apart). Only a product by a weight (Gemm, MatMul) and a Reshape that
  /// keeps `rt`'s dynamic dimensions in order (back) take it.
  int64_t folded = 0;
};

std::string opTypeOf(const onnx::NodeProto &n) {
  return n.domain().empty() || n.domain() == "ai.onnx" ? n.op_type()
                                                       : n.domain() + "." + n.op_type();
}

class Importer {
public:
  Importer(MLIRContext &context, const onnx::ModelProto &model, llvm::StringRef path,
           const ImportOptions &options)
      : context(context), model(model), path(path.str()), options(options), b(&context),
        loc(UnknownLoc::get(&context)) {}

  llvm::Expected<ImportedModel> run();

  /// The ops of the default domain the importer maps, each to its handler.
  struct OpEntry {
    llvm::StringRef name;
    llvm::Error (*handler)(Importer &, llvm::StringRef);
  };
  static llvm::ArrayRef<OpEntry> table();

private:
  // --- errors -------------------------------------------------------------
  llvm::Error fail(const llvm::Twine &message) const {
    std::string where = path + ": ";
    if (node)
      where += "node '" + node->name() + "' (" + opTypeOf(*node) + ", opset " +
               std::to_string(opset) + "): ";
    return llvm::createStringError(llvm::inconvertibleErrorCode(), where + message.str());
  }

  // --- values -------------------------------------------------------------
  llvm::Error setup();
  void findPositionTables();
  llvm::Error importNode(const onnx::NodeProto &n);
  /// Input i of the current node; null when absent or empty (optional).
  const Val *in(int i) const {
    if (i >= node->input_size() || node->input(i).empty())
      return nullptr;
    auto it = values.find(node->input(i));
    return it == values.end() ? nullptr : &it->second;
  }
  llvm::Expected<const Val *> need(int i) const {
    if (const Val *v = in(i))
      return v;
    return fail("input " + std::to_string(i) + " is missing");
  }
  void out(int i, Val v) {
    if (i < node->output_size() && !node->output(i).empty())
      values[node->output(i)] = std::move(v);
  }
  void outRt(int i, Value v) { out(i, Val{v, std::nullopt, "", 0}); }
  void outHost(int i, Host h) { out(i, Val{Value(), std::move(h), "", 0}); }
  /// A known input as integers (axes, shapes, starts); fails when it is a
  /// run-time tensor or symbolic unless `symbols`.
  llvm::Expected<const Host *> known(int i, const char *what, bool symbols = false,
                                     bool integers = true) const {
    auto v = need(i);
    if (!v)
      return v.takeError();
    if (!(*v)->host)
      return fail(llvm::Twine(what) + " (input " + std::to_string(i) + ", '" + node->input(i) +
                  "') must be known when compiling; it depends on run-time data");
    if (integers && (*v)->host->elem == Elem::kFloat)
      return fail(llvm::Twine(what) + " (input " + std::to_string(i) + ") must be integers");
    if (!symbols && (*v)->host->anySymbolic())
      return fail(llvm::Twine(what) + " (input " + std::to_string(i) +
                  ") depends on a run-time size");
    return &*(*v)->host;
  }
  llvm::Expected<std::vector<int64_t>> knownInts(int i, const char *what) const {
    auto h = known(i, what);
    if (!h)
      return h.takeError();
    std::vector<int64_t> r;
    for (double x : (*h)->v)
      r.push_back(toInt(x));
    return r;
  }
  /// The value as a run-time tensor (a known one materialized as a
  /// constant or parameter).
  llvm::Expected<Value> materialize(const Val &v, const std::string &name);
  llvm::Expected<Value> rtIn(int i) {
    auto v = need(i);
    if (!v)
      return v.takeError();
    return materialize(**v, node->input(i));
  }

  // --- attributes ---------------------------------------------------------
  const onnx::AttributeProto *attr(llvm::StringRef name) const {
    for (const auto &a : node->attribute())
      if (a.name() == name)
        return &a;
    return nullptr;
  }
  int64_t attrInt(llvm::StringRef name, int64_t dflt) const {
    const auto *a = attr(name);
    return a ? a->i() : dflt;
  }
  double attrFloat(llvm::StringRef name, double dflt) const {
    const auto *a = attr(name);
    return a ? a->f() : dflt;
  }
  std::optional<std::vector<int64_t>> attrInts(llvm::StringRef name) const {
    const auto *a = attr(name);
    if (!a)
      return std::nullopt;
    return std::vector<int64_t>(a->ints().begin(), a->ints().end());
  }
  /// Fails on any attribute of the node not in `known`.
  llvm::Error onlyAttributes(std::initializer_list<llvm::StringRef> known) const {
    for (const auto &a : node->attribute())
      if (!llvm::is_contained(known, a.name()))
        return fail("attribute '" + a.name() + "' is not supported");
    return llvm::Error::success();
  }

  // --- shapes -------------------------------------------------------------
  static RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }
  llvm::ArrayRef<int64_t> shapeOf(const Val &v) const {
    return v.rt ? typeOf(v.rt).getShape() : llvm::ArrayRef<int64_t>(v.host->shape);
  }
  int64_t rankOf(const Val &v) const { return static_cast<int64_t>(shapeOf(v).size()); }
  llvm::Expected<int64_t> axis(int64_t a, int64_t rank, const char *what = "axis") const {
    if (a < -rank || a >= std::max<int64_t>(rank, 1))
      return fail(llvm::Twine(what) + " " + std::to_string(a) + " is outside rank " +
                  std::to_string(rank));
    return a < 0 ? a + rank : a;
  }
  /// Dimension `axis` of a run-time tensor as a size expression.
  SizeExpr sizeOf(Value v, int64_t a) { return sizes.dim(v, a); }
  /// An index value of a run-time size (an input's dimension).
  llvm::Expected<Value> indexOf(const SizeExpr &s) {
    if (s.kind() != SizeExpr::Kind::kArgument)
      return fail("uses the run-time size " + s.str() +
                  ", which is not a dimension of an input");
    return DimOp::create(b, loc, func.getArgument(s.arg()), s.dim()).getResult();
  }
  llvm::Expected<Value> reshapeTo(Value x, llvm::ArrayRef<int64_t> shape);
  // The dialect's elementwise ops, matmul and concat infer their result
  // types, and an op whose inference fails aborts the process: these check
  // the operands first and fail with the node's error.
  llvm::Error broadcasts(llvm::ArrayRef<Value> xs);
  llvm::Expected<Value> matmulOf(Value x, Value y, bool tx, bool ty);
  llvm::Expected<Value> concatOf(llvm::ArrayRef<Value> xs, int64_t axis);
  /// ONNX Gather of a run-time float tensor along `axis` by i32 indices
  /// (normalized): transfuse.gather of rows, with transposes around it.
  llvm::Expected<Value> gatherAlong(Value table, int64_t axis, Value ids32);
  /// [B, S, H·d] as heads [B, H, S, d] (the opset-23 ops' 3-D inputs), and back.
  llvm::Expected<Value> splitHeads(Value x, int64_t heads, const char *attribute);
  llvm::Expected<Value> mergeHeads(Value x);
  /// Whether a just-built op verifies (its diagnostics dropped: the caller
  /// reports the node); one that does not is erased.
  bool verifies(Operation *op) {
    ScopedDiagnosticHandler quiet(&context, [](Diagnostic &) { return success(); });
    if (succeeded(mlir::verify(op)))
      return true;
    op->erase();
    return false;
  }

  // --- folding ------------------------------------------------------------
  llvm::Expected<Host> broadcastFold(const Host &x, const Host &y, Elem elem,
                                     llvm::function_ref<double(double, double)> f);
  llvm::Expected<std::vector<int64_t>> broadcastShape(llvm::ArrayRef<int64_t> a,
                                                      llvm::ArrayRef<int64_t> b) const;

  // --- ops ----------------------------------------------------------------
  llvm::Error binary(llvm::StringRef op);
  llvm::Error unary(llvm::StringRef op);
  llvm::Error gelu();
  llvm::Error compare(llvm::StringRef op);
  llvm::Error equalSizes(const Host &x, const Host &y);
  llvm::Error pow();
  llvm::Error matmul();
  llvm::Error gemm();
  /// Gemm's alpha·product + beta·C.
  llvm::Expected<Value> gemmEpilogue(Value product);
  /// Gemm or MatMul of a folded view (Val::folded) by a weight.
  llvm::Error foldedProduct(const Val &x, bool transA, bool transB);
  llvm::Error softmax();
  llvm::Error reduce(llvm::StringRef op);
  llvm::Error layerNorm(bool rms);
  llvm::Error transpose();
  llvm::Error reshape();
  llvm::Error squeeze(bool unsqueeze);
  llvm::Error flatten();
  llvm::Error gather();
  llvm::Error concat();
  llvm::Error slice();
  llvm::Error split();
  llvm::Error expand();
  /// A float tensor of `shape`'s rank whose dynamic dimensions are the
  /// run-time sizes `syms` and whose others are 1: what an Expand to those
  /// sizes broadcasts with.
  llvm::Expected<Value> likeOfSizes(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<SizeExpr> syms);
  llvm::Error where();
  llvm::Error castNode();
  llvm::Error shape();
  llvm::Error constantOfShape();
  llvm::Error size();
  llvm::Error range();
  llvm::Error rangeToSize(Elem elem, double start, double delta, const SizeExpr &limit);
  llvm::Error trilu();
  llvm::Error constant();
  llvm::Error conv();
  llvm::Error attention();
  llvm::Error rotary();

  llvm::Error reshapeRuntime(const Val &x, const Host &target, bool allowZero);
  /// Reshapes to and from a folded view (Val::folded); none when `target`
  /// is neither.
  std::optional<llvm::Error> reshapeFolded(const Val &x, const Host &target);
  std::string foldedUse(const std::string &name) const {
    return "'" + name + "' is a view merging dynamic dimensions (x.view(-1, D) of a [B, S, D] "
           "tensor); only Gemm and MatMul by a weight and a Reshape back to the dimensions "
           "it merged take it";
  }
  llvm::Expected<Value> sliceRuntime(Value x, int64_t axis, int64_t start, int64_t end,
                                     const SizeExpr &endSym);

  MLIRContext &context;
  const onnx::ModelProto &model;
  std::string path;
  ImportOptions options;
  OpBuilder b;
  Location loc;
  func::FuncOp func;
  SizeAnalysis sizes;
  int64_t opset = 0;
  /// The compiled maxima of the batch and the other dynamic dimensions.
  int64_t maxBatch = 0, maxSeqLen = 0;
  const onnx::NodeProto *node = nullptr;
  std::map<std::string, Val> values;
  std::map<std::string, Value> materialized;
  Operation *lastMaterialized = nullptr;
  std::vector<Weight> weights;
  std::set<std::string> paramNames;
  /// Float initializers (of at most 2^20 elements) read only by Slices to a
  /// computed end or as RotaryEmbedding's caches (through Identity): tables
  /// of positions, such as rotary cos/sin caches, whose values the raising
  /// patterns check. They become constants, not parameters.
  std::set<std::string> positionTables;
};

//===----------------------------------------------------------------------===//
// Setup: opsets, inputs, initializers
//===----------------------------------------------------------------------===//

Host hostOf(const TensorValues &t) {
  Host h;
  h.shape = t.dims;
  if (t.isFloat()) {
    h.elem = Elem::kFloat;
    h.v.assign(t.floats.begin(), t.floats.end());
  } else {
    h.elem = t.dataType == onnx::TensorProto::BOOL ? Elem::kBool : Elem::kInt;
    h.v.assign(t.ints.begin(), t.ints.end());
  }
  return h;
}

void Importer::findPositionTables() {
  // Every use of each initializer, through Identity (exporters alias equal
  // buffers of different layers with it). A table is sliced to a computed
  // end (a length), not to a constant one (a weight cut in pieces), and
  // holds at most 2^20 elements.
  const onnx::GraphProto &graph = model.graph();
  std::map<std::string, std::string> root; // a value -> the initializer it aliases
  std::set<std::string> constants;         // initializers and Constant nodes' outputs
  for (const auto &t : graph.initializer()) {
    if (values.at(t.name()).host->numel() <= (int64_t{1} << 20))
      root[t.name()] = t.name();
    constants.insert(t.name());
  }
  for (const auto &n : graph.node())
    if (n.op_type() == "Constant")
      for (const auto &o : n.output())
        constants.insert(o);
  std::map<std::string, bool> onlySliced;
  for (const auto &n : graph.node())
    for (int i = 0; i < n.input_size(); ++i) {
      auto it = root.find(n.input(i));
      if (it == root.end())
        continue;
      if (n.op_type() == "Identity" && n.output_size() == 1) {
        root[n.output(0)] = it->second;
        continue;
      }
      const bool toLength = n.op_type() == "Slice" && i == 0 && n.input_size() > 2 &&
                            !constants.count(n.input(2));
      const bool cache = n.op_type() == "RotaryEmbedding" && (i == 1 || i == 2);
      auto [entry, inserted] = onlySliced.try_emplace(it->second, true);
      entry->second = entry->second && (toLength || cache);
    }
  for (const auto &[name, sliced] : onlySliced)
    if (sliced)
      positionTables.insert(name);
  for (const auto &o : graph.output())
    positionTables.erase(root.count(o.name()) ? root[o.name()] : o.name());
}

llvm::Error Importer::setup() {
  for (const auto &o : model.opset_import()) {
    if (o.domain().empty() || o.domain() == "ai.onnx")
      opset = o.version();
  }
  if (opset < kMinOpset || opset > kMaxOpset)
    return fail("the model imports opset " + std::to_string(opset) +
                " of the default domain; the importer maps opsets " + std::to_string(kMinOpset) +
                " to " + std::to_string(kMaxOpset) + " (convert it with onnx.version_converter)");
  const onnx::GraphProto &graph = model.graph();

  for (const auto &t : graph.initializer()) {
    if (t.name().empty())
      return fail("an initializer has no name");
    auto values = readTensor(t, path);
    if (!values)
      return values.takeError();
    Val v{Value(), hostOf(*values), ""};
    if (v.host->elem == Elem::kFloat)
      v.initializer = t.name();
    this->values[t.name()] = std::move(v);
  }
  findPositionTables();

  // Inputs: the graph's inputs that no initializer gives.
  ModuleOp module = cast<ModuleOp>(b.getInsertionBlock()->getParentOp());
  SmallVector<Type> argTypes;
  std::vector<const onnx::ValueInfoProto *> inputs;
  std::vector<std::vector<std::string>> dimNames;
  std::string batchParam;
  int64_t batchDims = 0, seqDims = 0; // the largest --dim of each kind
  llvm::StringSet<> usedDims;
  for (const auto &input : graph.input()) {
    if (values.count(input.name()))
      continue;
    const auto &type = input.type();
    if (!type.has_tensor_type())
      return fail("input '" + input.name() + "' is not a tensor");
    const auto &tt = type.tensor_type();
    Type elem;
    switch (tt.elem_type()) {
    case onnx::TensorProto::FLOAT:
      elem = b.getF32Type();
      break;
    case onnx::TensorProto::INT64:
    case onnx::TensorProto::INT32:
      elem = b.getI32Type();
      break;
    case onnx::TensorProto::BOOL:
      elem = b.getI1Type();
      break;
    default:
      return fail("input '" + input.name() + "' has data type " + typeName(tt.elem_type()) +
                  "; inputs are float32, int64, int32 or bool");
    }
    if (!tt.has_shape())
      return fail("input '" + input.name() + "' has no shape");
    SmallVector<int64_t> shape;
    std::vector<std::string> names;
    for (const auto &[i, d] : llvm::enumerate(tt.shape().dim())) {
      if (d.has_dim_value()) {
        if (d.dim_value() < 1)
          return fail("input '" + input.name() + "' has dimension " + std::to_string(i) +
                      " of size " + std::to_string(d.dim_value()));
        shape.push_back(d.dim_value());
        names.emplace_back();
        continue;
      }
      shape.push_back(kDyn);
      std::string name = d.has_dim_param() ? d.dim_param() : "";
      names.push_back(name);
      usedDims.insert(name);
      if (i == 0) {
        if (!batchParam.empty() && name != batchParam)
          return fail("input '" + input.name() + "' has dynamic dimension 0 '" + name +
                      "' where an earlier input has '" + batchParam +
                      "': a dynamic dimension 0 is the batch, one for every input");
        batchParam = name;
      }
      if (auto it = options.dims.find(name); it != options.dims.end())
        (i == 0 ? batchDims : seqDims) = std::max(i == 0 ? batchDims : seqDims, it->second);
    }
    argTypes.push_back(RankedTensorType::get(shape, elem));
    inputs.push_back(&input);
    dimNames.push_back(std::move(names));
  }
  for (const auto &[name, max] : options.dims)
    if (!usedDims.contains(name))
      return fail("--dim " + name + "=" + std::to_string(max) +
                  ": no input has a dimension named '" + name + "'");

  // --max-batch and --max-seq-len, raised by --dim; 8 and 512 when neither.
  auto maximum = [](int64_t given, int64_t fromDims, int64_t dflt) {
    return given || fromDims ? std::max(given, fromDims) : dflt;
  };
  maxBatch = maximum(options.maxBatch, batchDims, 8);
  maxSeqLen = maximum(options.maxSeqLen, seqDims, 512);
  SmallVector<Type> resultTypes; // set when the outputs are known
  b.setInsertionPointToEnd(module.getBody());
  func = func::FuncOp::create(b, loc, "forward", b.getFunctionType(argTypes, resultTypes));
  Block *entry = func.addEntryBlock();
  b.setInsertionPointToStart(entry);
  func->setAttr(kMaxBatchAttr, b.getI64IntegerAttr(maxBatch));
  func->setAttr(kMaxSeqLenAttr, b.getI64IntegerAttr(maxSeqLen));
  for (auto [i, input] : llvm::enumerate(inputs)) {
    func.setArgAttr(i, kNameAttr, b.getStringAttr(input->name()));
    values[input->name()] = Val{func.getArgument(i), std::nullopt, ""};
    // An input whose dynamic dimensions are an earlier input's (the same
    // dim_params in the same places, every one named) has its sizes.
    const auto &names = dimNames[i];
    const bool dynamic = llvm::any_of(names, [](const std::string &n) { return !n.empty(); });
    const bool allNamed =
        llvm::all_of(llvm::zip(names, typeOf(func.getArgument(i)).getShape()), [](auto p) {
          return std::get<1>(p) != kDyn || !std::get<0>(p).empty();
        });
    for (size_t j = 0; dynamic && allNamed && j < i; ++j)
      if (dimNames[j] == names) {
        func.setArgAttr(i, kSizesOfAttr, b.getI64IntegerAttr(static_cast<int64_t>(j)));
        break;
      }
  }
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Materializing known values
//===----------------------------------------------------------------------===//

llvm::Expected<Value> Importer::materialize(const Val &v, const std::string &name) {
  if (v.folded)
    return fail(foldedUse(name));
  if (v.rt)
    return v.rt;
  // An initializer once, whatever Identity aliases name it.
  const std::string key = v.initializer.empty() ? name : v.initializer;
  if (auto it = materialized.find(key); it != materialized.end())
    return it->second;
  const Host &h = *v.host;
  for (int64_t i = 0; i < h.numel(); ++i)
    if (h.symbolic(i))
      return fail("'" + name + "' holds the run-time size " + h.sym[i].str() +
                  " and is used as a tensor; only shapes, axes and slice bounds may be sizes");
  // Known values sit at the top of the function, in the order they are
  // first used.
  OpBuilder::InsertionGuard guard(b);
  if (lastMaterialized)
    b.setInsertionPointAfter(lastMaterialized);
  else
    b.setInsertionPointToStart(&func.getBody().front());
  const bool splat = h.numel() > 0 && llvm::all_of(h.v, [&](double x) {
                       return x == h.v[0] || (std::isnan(x) && std::isnan(h.v[0]));
                     });
  Value result;
  if (h.elem == Elem::kFloat) {
    auto type = RankedTensorType::get(h.shape, b.getF32Type());
    if (splat || h.numel() < kParamElements || positionTables.count(v.initializer)) {
      std::vector<float> f(h.v.begin(), h.v.end());
      DenseElementsAttr attr = splat ? DenseElementsAttr::get(type, static_cast<float>(h.v[0]))
                                     : DenseElementsAttr::get(type, llvm::ArrayRef<float>(f));
      result = ConstantOp::create(b, loc, attr);
    } else {
      std::string pname = v.initializer.empty() ? name : v.initializer;
      if (!paramNames.insert(pname).second)
        return fail("two parameters are named '" + pname + "'");
      weights.push_back(Weight{pname, h.shape, std::vector<float>(h.v.begin(), h.v.end())});
      result = ParamOp::create(b, loc, type, b.getStringAttr(pname),
                               InitKindAttr::get(&context, InitKind::Normal002), IntegerAttr(),
                               UnitAttr(), UnitAttr());
    }
  } else if (h.elem == Elem::kInt) {
    auto type = RankedTensorType::get(h.shape, b.getI32Type());
    std::vector<int32_t> ints;
    for (double x : h.v) {
      if (!(x >= std::numeric_limits<int32_t>::min() && x <= std::numeric_limits<int32_t>::max()))
        return fail("'" + name + "' holds " + std::to_string(toInt(x)) +
                    ", outside the int32 range of run-time integer tensors");
      ints.push_back(static_cast<int32_t>(x));
    }
    result = ConstantOp::create(b, loc, DenseElementsAttr::get(type, llvm::ArrayRef(ints)));
  } else {
    auto type = RankedTensorType::get(h.shape, b.getI1Type());
    SmallVector<bool> bits;
    for (double x : h.v)
      bits.push_back(x != 0);
    result = ConstantOp::create(b, loc, DenseElementsAttr::get(type, llvm::ArrayRef<bool>(bits)));
  }
  materialized[key] = result;
  lastMaterialized = result.getDefiningOp();
  return result;
}

llvm::Expected<Value> Importer::reshapeTo(Value x, llvm::ArrayRef<int64_t> shape) {
  if (typeOf(x).getShape() == shape)
    return x;
  auto type = RankedTensorType::get(shape, typeOf(x).getElementType());
  auto op = ReshapeOp::create(b, loc, type, x);
  if (!verifies(op))
    return fail("cannot reshape a tensor of " + shapeStr(typeOf(x).getShape()) + " to " +
                shapeStr(shape));
  return op.getResult();
}

llvm::Error Importer::broadcasts(llvm::ArrayRef<Value> xs) {
  SmallVector<int64_t> shape;
  for (Value x : xs) {
    SmallVector<int64_t> next;
    std::string error;
    if (failed(broadcastShapes(shape, typeOf(x).getShape(), next, error)))
      return fail("operands do not broadcast: " + error);
    shape = std::move(next);
  }
  return llvm::Error::success();
}

llvm::Expected<Value> Importer::matmulOf(Value x, Value y, bool tx, bool ty) {
  llvm::ArrayRef<int64_t> xs = typeOf(x).getShape(), ys = typeOf(y).getShape();
  const int64_t rx = static_cast<int64_t>(xs.size()), ry = static_cast<int64_t>(ys.size());
  SmallVector<int64_t> batch;
  std::string error;
  if (rx < 2 || ry < 2 || !compatibleSizes(tx ? xs[rx - 2] : xs[rx - 1], ty ? ys[ry - 1] : ys[ry - 2]) ||
      failed(broadcastShapes(xs.drop_back(2), ys.drop_back(2), batch, error)))
    return fail("operands of " + shapeStr(xs) + " and " + shapeStr(ys) + " do not multiply");
  return MatmulOp::create(b, loc, x, y, tx, ty).getResult();
}

llvm::Expected<Value> Importer::concatOf(llvm::ArrayRef<Value> xs, int64_t axis) {
  RankedTensorType first = typeOf(xs[0]);
  for (Value x : xs.drop_front()) {
    RankedTensorType t = typeOf(x);
    bool ok = t.getRank() == first.getRank() && t.getElementType() == first.getElementType();
    for (int64_t d = 0; ok && d < t.getRank(); ++d)
      ok = d == axis || compatibleSizes(t.getDimSize(d), first.getDimSize(d));
    if (!ok)
      return fail("inputs of " + shapeStr(first.getShape()) + " and " + shapeStr(t.getShape()) +
                  " do not concatenate along axis " + std::to_string(axis));
  }
  return ConcatOp::create(b, loc, xs, axis).getResult();
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

llvm::Expected<std::vector<int64_t>> Importer::broadcastShape(llvm::ArrayRef<int64_t> x,
                                                              llvm::ArrayRef<int64_t> y) const {
  size_t rank = std::max(x.size(), y.size());
  std::vector<int64_t> r(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t a = i < rank - x.size() ? 1 : x[i - (rank - x.size())];
    int64_t c = i < rank - y.size() ? 1 : y[i - (rank - y.size())];
    if (a != c && a != 1 && c != 1)
      return fail("shapes do not broadcast (" + std::to_string(a) + " against " +
                  std::to_string(c) + ")");
    r[i] = a == 1 ? c : a;
  }
  return r;
}

/// Flat index into `shape` of the element at `idx` of a broadcast result.
int64_t broadcastIndex(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> idx) {
  int64_t flat = 0, stride = 1;
  for (size_t k = 0; k < shape.size(); ++k) {
    size_t d = shape.size() - 1 - k;
    int64_t i = idx[idx.size() - 1 - k];
    flat += (shape[d] == 1 ? 0 : i) * stride;
    stride *= shape[d];
  }
  return flat;
}

llvm::Expected<Host> Importer::broadcastFold(const Host &x, const Host &y, Elem elem,
                                             llvm::function_ref<double(double, double)> f) {
  auto shape = broadcastShape(x.shape, y.shape);
  if (!shape)
    return shape.takeError();
  Host r;
  r.elem = elem;
  r.shape = *shape;
  r.v.resize(product(*shape));
  const bool sym = x.anySymbolic() || y.anySymbolic();
  if (sym)
    r.sym.resize(r.v.size());
  llvm::Error err = llvm::Error::success();
  forEachIndex(*shape, [&](int64_t i, llvm::ArrayRef<int64_t> idx) {
    int64_t xi = broadcastIndex(x.shape, idx), yi = broadcastIndex(y.shape, idx);
    r.v[i] = f(x.v[xi], y.v[yi]);
    if (sym && (x.symbolic(xi) || y.symbolic(yi)) && !err) {
      // A size passes through x·1, x/1, x+0, x-0; anything else would need
      // arithmetic on run-time sizes.
      const SizeExpr s = x.symbolic(xi) ? x.sym[xi] : y.sym[yi];
      const double other = x.symbolic(xi) ? y.v[yi] : x.v[xi];
      const bool passes = !(x.symbolic(xi) && y.symbolic(yi)) &&
                          (r.v[i] == (x.symbolic(xi) ? x.v[xi] : y.v[yi])) &&
                          (other == 0 || other == 1);
      if (!passes)
        err = fail("computes with the run-time size " + s.str() +
                   "; sizes may only be gathered, concatenated and passed on");
      r.sym[i] = s;
    }
  });
  if (err)
    return std::move(err);
  return r;
}

/// ONNX integer division: truncation toward zero, as C.
double intDiv(double a, double b) { return b == 0 ? 0 : std::trunc(a / b); }

llvm::Error Importer::binary(llvm::StringRef op) {
  auto x = need(0), y = need(1);
  if (!x || !y)
    return llvm::joinErrors(x.takeError(), y.takeError());
  if (auto e = onlyAttributes({}))
    return e;
  const Val &a = **x, &c = **y;
  if (op == "Sub" && a.host && c.host && a.host->numel() == 1 && c.host->numel() == 1 &&
      a.host->symbolic(0) && a.host->sym == c.host->sym) {
    // A run-time size less itself (GPT-2's key_length - query_length
    // without a past): 0, known.
    Host zero = *a.host;
    zero.v = {0.0};
    zero.sym.clear();
    outHost(0, std::move(zero));
    return llvm::Error::success();
  }
  if (a.host && c.host) {
    const Elem elem = a.host->elem;
    if (elem != c.host->elem)
      return fail("operands of different data types");
    std::function<double(double, double)> f;
    const bool isInt = elem != Elem::kFloat;
    if (op == "Add")
      f = [](double p, double q) { return p + q; };
    else if (op == "Sub")
      f = [](double p, double q) { return p - q; };
    else if (op == "Mul")
      f = [](double p, double q) { return p * q; };
    else
      f = isInt ? intDiv : [](double p, double q) { return static_cast<double>(
                                                     static_cast<float>(p) / static_cast<float>(q)); };
    if (elem == Elem::kFloat && op != "Div") {
      auto g = f;
      f = [g](double p, double q) { return static_cast<double>(static_cast<float>(g(p, q))); };
    }
    auto r = broadcastFold(*a.host, *c.host, elem, f);
    if (!r)
      return r.takeError();
    outHost(0, std::move(*r));
    return llvm::Error::success();
  }
  auto lhs = materialize(a, node->input(0));
  if (!lhs)
    return lhs.takeError();
  auto rhs = materialize(c, node->input(1));
  if (!rhs)
    return rhs.takeError();
  if (!isa<FloatType>(typeOf(*lhs).getElementType()) ||
      !isa<FloatType>(typeOf(*rhs).getElementType()))
    return fail("integer arithmetic on run-time tensors is not supported (only float32)");
  if (auto e = broadcasts({*lhs, *rhs}))
    return e;
  Value r;
  if (op == "Add")
    r = AddOp::create(b, loc, *lhs, *rhs);
  else if (op == "Sub")
    r = SubOp::create(b, loc, *lhs, *rhs);
  else if (op == "Mul")
    r = MulOp::create(b, loc, *lhs, *rhs);
  else
    r = DivOp::create(b, loc, *lhs, *rhs);
  outRt(0, r);
  return llvm::Error::success();
}

llvm::Error Importer::pow() {
  auto x = need(0), y = need(1);
  if (!x || !y)
    return llvm::joinErrors(x.takeError(), y.takeError());
  const Val &a = **x, &e = **y;
  auto f32 = [](double p, double q) {
    return static_cast<double>(std::pow(static_cast<float>(p), static_cast<float>(q)));
  };
  if (a.host && e.host) {
    auto r = broadcastFold(*a.host, *e.host, a.host->elem, f32);
    if (!r)
      return r.takeError();
    outHost(0, std::move(*r));
    return llvm::Error::success();
  }
  auto base = materialize(a, node->input(0));
  if (!base)
    return base.takeError();
  if (!isa<FloatType>(typeOf(*base).getElementType()))
    return fail("an integer base at run time is not supported");
  // A known scalar exponent: the exact forms.
  if (e.host && e.host->numel() == 1 && e.host->shape.size() <= typeOf(*base).getRank()) {
    double p = e.host->v[0];
    Value xv = *base, r;
    if (p == 1)
      r = xv;
    else if (p == 2)
      r = MulOp::create(b, loc, xv, xv);
    else if (p == 3)
      r = MulOp::create(b, loc, MulOp::create(b, loc, xv, xv), xv);
    else if (p == 0.5)
      r = SqrtOp::create(b, loc, xv);
    if (r) {
      auto shaped = reshapeTo(r, typeOf(r).getShape()); // same type
      outRt(0, *shaped);
      return llvm::Error::success();
    }
  }
  auto ex = materialize(e, node->input(1));
  if (!ex)
    return ex.takeError();
  if (!isa<FloatType>(typeOf(*ex).getElementType()))
    return fail("an integer exponent at run time is not supported");
  if (auto e = broadcasts({*base, *ex}))
    return e;
  outRt(0, PowOp::create(b, loc, *base, *ex));
  return llvm::Error::success();
}

llvm::Error Importer::unary(llvm::StringRef op) {
  auto x = need(0);
  if (!x)
    return x.takeError();
  const Val &a = **x;
  if (op == "Identity") {
    out(0, a);
    return llvm::Error::success();
  }
  if (auto e = onlyAttributes({}))
    return e;
  if (a.host) {
    std::function<double(double)> f;
    if (op == "Neg")
      f = [](double v) { return -v; };
    else if (op == "Not")
      f = [](double v) { return v == 0 ? 1.0 : 0.0; };
    else if (a.host->elem != Elem::kFloat && op != "Relu")
      return fail("an integer input is not supported");
    else if (op == "Sqrt")
      f = [](double v) { return double(std::sqrt(float(v))); };
    else if (op == "Reciprocal")
      f = [](double v) { return double(1.0f / float(v)); };
    else if (op == "Erf")
      f = [](double v) { return double(std::erf(float(v))); };
    else if (op == "Tanh")
      f = [](double v) { return double(std::tanh(float(v))); };
    else if (op == "Sigmoid")
      f = [](double v) { return double(1.0f / (1.0f + std::exp(-float(v)))); };
    else if (op == "Relu")
      f = [](double v) { return v < 0 ? 0.0 : v; };
    else if (op == "Exp")
      f = [](double v) { return double(std::exp(float(v))); };
    if (a.host->anySymbolic())
      return fail("computes with a run-time size");
    Host r = *a.host;
    for (double &v : r.v)
      v = f(v);
    outHost(0, std::move(r));
    return llvm::Error::success();
  }
  Value v = a.rt;
  Type elem = typeOf(v).getElementType();
  if (op == "Not") {
    return fail("Not of a run-time tensor is not supported (only of masks known when "
                "compiling)");
  }
  if (!isa<FloatType>(elem))
    return fail("integer run-time tensors are not supported here (only float32)");
  Value r;
  if (op == "Neg")
    r = ScaleOp::create(b, loc, v, b.getF64FloatAttr(-1.0));
  else if (op == "Sqrt")
    r = SqrtOp::create(b, loc, v);
  else if (op == "Reciprocal")
    r = DivOp::create(b, loc, GraphBuilder(b, loc).scalar(1.0), v);
  else if (op == "Erf")
    r = ErfOp::create(b, loc, v);
  else if (op == "Tanh")
    r = TanhOp::create(b, loc, v);
  else if (op == "Sigmoid")
    r = SigmoidOp::create(b, loc, v);
  else if (op == "Relu")
    r = ReluOp::create(b, loc, v);
  else if (op == "Exp")
    r = ExpOp::create(b, loc, v);
  outRt(0, r);
  return llvm::Error::success();
}

llvm::Error Importer::equalSizes(const Host &x, const Host &y) {
  // A run-time size equals itself and is never negative (expand's -1
  // "keep this dimension", compared with a shape holding the batch size);
  // any other comparison with one would need its value.
  auto shape = broadcastShape(x.shape, y.shape);
  if (!shape)
    return shape.takeError();
  Host r;
  r.elem = Elem::kBool;
  r.shape = *shape;
  llvm::Error err = llvm::Error::success();
  forEachIndex(*shape, [&](int64_t, llvm::ArrayRef<int64_t> idx) {
    const int64_t i = broadcastIndex(x.shape, idx), j = broadcastIndex(y.shape, idx);
    const bool sx = x.symbolic(i), sy = y.symbolic(j);
    if (!sx && !sy)
      r.v.push_back(x.v[i] == y.v[j] ? 1.0 : 0.0);
    else if (sx && sy && x.sym[i] == y.sym[j])
      r.v.push_back(1.0);
    else if ((sx && !sy && y.v[j] < 0) || (sy && !sx && x.v[i] < 0))
      r.v.push_back(0.0);
    else if (!err)
      err = fail("compares the run-time size " + (sx ? x.sym[i] : y.sym[j]).str() +
                 " with a value it may equal");
  });
  if (err)
    return err;
  outHost(0, std::move(r));
  return llvm::Error::success();
}

llvm::Error Importer::gelu() {
  // Opset 20: approximate "none" (erf) or "tanh".
  if (auto e = onlyAttributes({"approximate"}))
    return e;
  const auto *a = attr("approximate");
  const std::string approximate = a ? a->s() : "none";
  if (approximate != "none" && approximate != "tanh")
    return fail("approximate '" + approximate + "' is not none or tanh");
  auto x = rtIn(0);
  if (!x)
    return x.takeError();
  if (!isa<FloatType>(typeOf(*x).getElementType()))
    return fail("Gelu of an integer tensor");
  outRt(0, GeluOp::create(b, loc, *x,
                          approximate == "tanh" ? GeluApproximation::Tanh : GeluApproximation::None)
               .getResult());
  return llvm::Error::success();
}

llvm::Error Importer::compare(llvm::StringRef op) {
  auto x = need(0), y = need(1);
  if (!x || !y)
    return llvm::joinErrors(x.takeError(), y.takeError());
  if (!(*x)->host || !(*y)->host)
    return fail(op + " of a run-time tensor is not supported: comparisons and boolean logic "
                     "are folded when their inputs are known when compiling");
  std::function<double(double, double)> f;
  if (op == "Equal")
    f = [](double p, double q) { return p == q ? 1.0 : 0.0; };
  else if (op == "Less")
    f = [](double p, double q) { return p < q ? 1.0 : 0.0; };
  else if (op == "Greater")
    f = [](double p, double q) { return p > q ? 1.0 : 0.0; };
  else if (op == "And")
    f = [](double p, double q) { return p != 0 && q != 0 ? 1.0 : 0.0; };
  else
    f = [](double p, double q) { return p != 0 || q != 0 ? 1.0 : 0.0; };
  if (op == "Equal" && ((*x)->host->anySymbolic() || (*y)->host->anySymbolic()))
    return equalSizes(*(*x)->host, *(*y)->host);
  if ((*x)->host->anySymbolic() || (*y)->host->anySymbolic())
    return fail("compares a run-time size");
  auto r = broadcastFold(*(*x)->host, *(*y)->host, Elem::kBool, f);
  if (!r)
    return r.takeError();
  outHost(0, std::move(*r));
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Products, normalizations, reductions
//===----------------------------------------------------------------------===//

llvm::Error Importer::matmul() {
  if (const Val *v = in(0); v && v->folded)
    return foldedProduct(*v, false, false);
  auto x = rtIn(0);
  if (!x)
    return x.takeError();
  auto y = rtIn(1);
  if (!y)
    return y.takeError();
  Value a = *x, w = *y;
  if (!isa<FloatType>(typeOf(a).getElementType()) || !isa<FloatType>(typeOf(w).getElementType()))
    return fail("MatMul of integer tensors is not supported");
  const int64_t ra = typeOf(a).getRank(), rw = typeOf(w).getRank();
  if (ra == 0 || rw == 0)
    return fail("MatMul of a scalar");
  // Vectors: [K] as [1, K] on the left, [K, 1] on the right, dropped after.
  if (ra == 1) {
    auto r = reshapeTo(a, {1, typeOf(a).getDimSize(0)});
    if (!r)
      return r.takeError();
    a = *r;
  }
  if (rw == 1) {
    auto r = reshapeTo(w, {typeOf(w).getDimSize(0), 1});
    if (!r)
      return r.takeError();
    w = *r;
  }
  auto product = matmulOf(a, w, false, false);
  if (!product)
    return product.takeError();
  Value r = *product;
  if (ra == 1 || rw == 1) {
    SmallVector<int64_t> shape(typeOf(r).getShape());
    if (rw == 1)
      shape.pop_back();
    if (ra == 1)
      shape.erase(shape.end() - (rw == 1 ? 1 : 2));
    auto s = reshapeTo(r, shape);
    if (!s)
      return s.takeError();
    r = *s;
  }
  outRt(0, r);
  return llvm::Error::success();
}

llvm::Error Importer::gemm() {
  if (auto e = onlyAttributes({"alpha", "beta", "transA", "transB"}))
    return e;
  if (const Val *v = in(0); v && v->folded)
    return foldedProduct(*v, attrInt("transA", 0) != 0, attrInt("transB", 0) != 0);
  auto x = rtIn(0);
  if (!x)
    return x.takeError();
  auto y = rtIn(1);
  if (!y)
    return y.takeError();
  if (typeOf(*x).getRank() != 2 || typeOf(*y).getRank() != 2)
    return fail("Gemm takes matrices");
  if (!isa<FloatType>(typeOf(*x).getElementType()) || !isa<FloatType>(typeOf(*y).getElementType()))
    return fail("Gemm of integer tensors is not supported");
  auto product = matmulOf(*x, *y, attrInt("transA", 0) != 0, attrInt("transB", 0) != 0);
  if (!product)
    return product.takeError();
  auto r = gemmEpilogue(*product);
  if (!r)
    return r.takeError();
  outRt(0, *r);
  return llvm::Error::success();
}

llvm::Expected<Value> Importer::gemmEpilogue(Value r) {
  const double alpha = attrFloat("alpha", 1.0), beta = attrFloat("beta", 1.0);
  if (alpha != 1.0)
    r = ScaleOp::create(b, loc, r, b.getF64FloatAttr(alpha));
  if (in(2) && beta != 0.0) {
    auto c = rtIn(2);
    if (!c)
      return c.takeError();
    Value cv = *c;
    if (!isa<FloatType>(typeOf(cv).getElementType()))
      return fail("C (input 2) of integers is not supported (only float32)");
    if (beta != 1.0)
      cv = ScaleOp::create(b, loc, cv, b.getF64FloatAttr(beta));
    if (auto e = broadcasts({r, cv}))
      return std::move(e);
    r = AddOp::create(b, loc, r, cv);
  }
  return r;
}

llvm::Error Importer::foldedProduct(const Val &x, bool transA, bool transB) {
  // [B·S, K] (x.rt [B, S, K]) by a [K, N] weight: [B, S, N], still folded.
  auto w = rtIn(1);
  if (!w)
    return w.takeError();
  if (transA || typeOf(*w).getRank() != 2)
    return fail(foldedUse(node->input(0)));
  if (!isa<FloatType>(typeOf(x.rt).getElementType()) ||
      !isa<FloatType>(typeOf(*w).getElementType()))
    return fail(node->op_type() + " of integer tensors is not supported");
  if (const Val *c = in(2); c && rankOf(*c) == 2 && shapeOf(*c)[0] != 1)
    return fail("C has a row per row of a view merging dynamic dimensions");
  auto product = matmulOf(x.rt, *w, false, transB);
  if (!product)
    return product.takeError();
  Value r = *product;
  if (node->op_type() == "Gemm") {
    auto e = gemmEpilogue(r);
    if (!e)
      return e.takeError();
    r = *e;
  }
  out(0, Val{r, std::nullopt, "", x.folded});
  return llvm::Error::success();
}

llvm::Error Importer::softmax() {
  if (auto e = onlyAttributes({"axis"}))
    return e;
  auto x = rtIn(0);
  if (!x)
    return x.takeError();
  auto a = axis(attrInt("axis", -1), typeOf(*x).getRank());
  if (!a)
    return a.takeError();
  outRt(0, SoftmaxOp::create(b, loc, *x, *a));
  return llvm::Error::success();
}

llvm::Error Importer::reduce(llvm::StringRef op) {
  if (auto e = onlyAttributes({"axes", "keepdims", "noop_with_empty_axes"}))
    return e;
  auto x = rtIn(0);
  if (!x)
    return x.takeError();
  const int64_t rank = typeOf(*x).getRank();
  // Axes: an attribute before opset 18 (13 for ReduceSum), an input after.
  const bool axesInput = opset >= (op == "ReduceSum" ? 13 : 18);
  std::vector<int64_t> axes;
  if (axesInput) {
    if (attr("axes"))
      return fail("attribute 'axes' is an input from this opset on");
    if (in(1)) {
      auto k = knownInts(1, "axes");
      if (!k)
        return k.takeError();
      axes = *k;
    }
  } else if (auto a = attrInts("axes")) {
    axes = *a;
  }
  if (axes.empty()) {
    if (attrInt("noop_with_empty_axes", 0)) {
      outRt(0, *x);
      return llvm::Error::success();
    }
    for (int64_t i = 0; i < rank; ++i)
      axes.push_back(i);
  }
  if (rank == 0)
    return fail("reduces a scalar");
  for (int64_t &a : axes) {
    auto n = axis(a, rank);
    if (!n)
      return n.takeError();
    a = *n;
  }
  llvm::sort(axes);
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  const bool keep = attrInt("keepdims", 1) != 0;
  Value r;
  if (op == "ReduceSum")
    r = ReduceSumOp::create(b, loc, *x, axes, keep);
  else if (op == "ReduceMean")
    r = ReduceMeanOp::create(b, loc, *x, axes, keep);
  else
    r = ReduceMaxOp::create(b, loc, *x, axes, keep);
  outRt(0, r);
  return llvm::Error::success();
}

llvm::Error Importer::layerNorm(bool rms) {
  if (auto e = onlyAttributes({"axis", "epsilon", "stash_type"}))
    return e;
  if (attrInt("stash_type", 1) != 1)
    return fail("stash_type " + std::to_string(attrInt("stash_type", 1)) +
                " is not supported (statistics are computed in float32)");
  auto x = rtIn(0);
  if (!x)
    return x.takeError();
  const int64_t rank = typeOf(*x).getRank();
  if (rank == 0)
    return fail("normalizes a scalar");
  if (!isa<FloatType>(typeOf(*x).getElementType()))
    return fail("normalizes an integer or boolean tensor (only float32)");
  auto a = axis(attrInt("axis", -1), rank);
  if (!a)
    return a.takeError();
  llvm::ArrayRef<int64_t> normalized = typeOf(*x).getShape().drop_front(*a);
  if (llvm::is_contained(normalized, kDyn))
    return fail("normalizes over a dynamic dimension");
  // Scale and bias of the normalized shape (a known one broadcast to it).
  auto param = [&](int i) -> llvm::Expected<Value> {
    const Val *v = in(i);
    if (!v)
      return Value();
    if (v->host && llvm::ArrayRef<int64_t>(v->host->shape) != normalized) {
      Host ones;
      ones.shape.assign(normalized.begin(), normalized.end());
      ones.v.assign(product(normalized), 0.0);
      auto r = broadcastFold(*v->host, ones, Elem::kFloat, [](double p, double) { return p; });
      if (!r)
        return r.takeError();
      if (llvm::ArrayRef<int64_t>(r->shape) != normalized)
        return fail("input " + std::to_string(i) + " does not broadcast to the normalized shape");
      return materialize(Val{Value(), std::move(*r), v->initializer}, node->input(i));
    }
    auto m = materialize(*v, node->input(i));
    if (m && typeOf(*m).getShape() != normalized)
      return fail("input " + std::to_string(i) + " has another shape than the normalized "
                  "dimensions");
    if (m && !isa<FloatType>(typeOf(*m).getElementType()))
      return fail("input " + std::to_string(i) + " must be float32");
    return m;
  };
  auto gamma = param(1);
  if (!gamma)
    return gamma.takeError();
  if (!*gamma)
    return fail("the scale input is missing");
  auto beta = rms ? llvm::Expected<Value>(Value()) : param(2);
  if (!beta)
    return beta.takeError();
  const double eps = attrFloat("epsilon", 1e-5);
  if (!(eps >= 0)) // Also refuses NaN.
    return fail("epsilon must be >= 0, got " + llvm::formatv("{0:e}", eps).str());
  outRt(0, LayerNormOp::create(b, loc, *x, *gamma, *beta, b.getI64IntegerAttr(*a),
                               b.getF64FloatAttr(eps), rms ? b.getUnitAttr() : UnitAttr()));
  // LayerNormalization's optional statistics: Mean and InvStdDev, with the
  // normalized dimensions kept as 1.
  const bool stats = !rms && ((node->output_size() > 1 && !node->output(1).empty()) ||
                              (node->output_size() > 2 && !node->output(2).empty()));
  if (stats) {
    std::vector<int64_t> axes;
    for (int64_t i = *a; i < rank; ++i)
      axes.push_back(i);
    Value mean = ReduceMeanOp::create(b, loc, *x, axes, true);
    Value d = SubOp::create(b, loc, *x, mean);
    Value var = ReduceMeanOp::create(b, loc, MulOp::create(b, loc, d, d), axes, true);
    Value eps1 = GraphBuilder(b, loc).scalar(eps);
    Value inv = DivOp::create(b, loc, GraphBuilder(b, loc).scalar(1.0),
                              SqrtOp::create(b, loc, AddOp::create(b, loc, var, eps1)));
    outRt(1, mean);
    outRt(2, inv);
  }
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Shapes
//===----------------------------------------------------------------------===//

llvm::Error Importer::transpose() {
  if (auto e = onlyAttributes({"perm"}))
    return e;
  auto x = need(0);
  if (!x)
    return x.takeError();
  const int64_t rank = rankOf(**x);
  std::vector<int64_t> perm;
  if (auto p = attrInts("perm"))
    perm = *p;
  else
    for (int64_t i = rank - 1; i >= 0; --i)
      perm.push_back(i);
  std::vector<int64_t> sorted = perm;
  llvm::sort(sorted);
  if (static_cast<int64_t>(perm.size()) != rank)
    return fail("perm is not a permutation of the input's dimensions");
  for (int64_t i = 0; i < static_cast<int64_t>(sorted.size()); ++i)
    if (sorted[i] != i)
      return fail("perm is not a permutation of the input's dimensions");
  if ((*x)->host) {
    const Host &h = *(*x)->host;
    std::vector<int64_t> shape, from;
    for (int64_t p : perm)
      shape.push_back(h.shape[p]);
    std::vector<int64_t> st = stridesOf(h.shape);
    forEachIndex(shape, [&](int64_t, llvm::ArrayRef<int64_t> idx) {
      int64_t f = 0;
      for (int64_t k = 0; k < rank; ++k)
        f += idx[k] * st[perm[k]];
      from.push_back(f);
    });
    Host r = pick(h, shape, from);
    out(0, Val{Value(), std::move(r), ""});
    return llvm::Error::success();
  }
  outRt(0, TransposeOp::create(b, loc, (*x)->rt, perm));
  return llvm::Error::success();
}

std::optional<llvm::Error> Importer::reshapeFolded(const Val &xv, const Host &target) {
  Value x = xv.rt;
  llvm::ArrayRef<int64_t> in = typeOf(x).getShape();
  const int64_t rank = static_cast<int64_t>(in.size()), n = target.numel();
  auto staticAt = [&](int64_t i) { return target.symbolic(i) ? -2 : toInt(target.v[i]); };
  if (!xv.folded) {
    // [-1, D...]: the leading dimensions, among them a dynamic one, merged.
    const int64_t f = rank - (n - 1);
    if (n < 2 || f < 2 || staticAt(0) != -1 ||
        !llvm::is_contained(in.take_front(f), kDyn))
      return std::nullopt;
    for (int64_t i = 1; i < n; ++i)
      if (staticAt(i) != in[f + i - 1] || in[f + i - 1] == kDyn)
        return std::nullopt;
    out(0, Val{x, std::nullopt, "", f});
    return llvm::Error::success();
  }
  // A view's elements are `x`'s in the same order: any reshape of `x` that
  // keeps its dynamic dimensions in order (back to them, typically). A 0
  // would copy a dimension of the view, which `x` does not have.
  for (int64_t i = 0; i < n; ++i)
    if (staticAt(i) == 0)
      return fail("copies a dimension (0) of a view merging dynamic dimensions");
  return reshapeRuntime(Val{x, std::nullopt, "", 0}, target, /*allowZero=*/false);
}

llvm::Error Importer::reshapeRuntime(const Val &xv, const Host &target, bool allowZero) {
  if (auto folded = reshapeFolded(xv, target))
    return std::move(*folded);
  Value x = xv.rt;
  llvm::ArrayRef<int64_t> in = typeOf(x).getShape();
  std::vector<int64_t> shape;
  std::vector<SizeExpr> outDyn, inDyn;
  int64_t inferred = -1, staticOut = 1, staticIn = 1;
  for (int64_t i = 0; i < static_cast<int64_t>(in.size()); ++i) {
    if (in[i] == kDyn)
      inDyn.push_back(sizeOf(x, i));
    else if (__builtin_mul_overflow(staticIn, in[i], &staticIn))
      return fail("the input's static sizes multiply past 2^63");
  }
  for (int64_t i = 0; i < target.numel(); ++i) {
    if (target.symbolic(i)) {
      shape.push_back(kDyn);
      outDyn.push_back(target.sym[i]);
      continue;
    }
    int64_t d = toInt(target.v[i]);
    if (d == 0 && !allowZero) {
      if (i >= static_cast<int64_t>(in.size()))
        return fail("shape element " + std::to_string(i) + " copies a dimension the input "
                    "does not have");
      d = in[i];
      if (d == kDyn) {
        shape.push_back(kDyn);
        outDyn.push_back(sizeOf(x, i));
        continue;
      }
    }
    if (d == -1) {
      if (inferred >= 0)
        return fail("the shape has two -1 elements");
      inferred = i;
      shape.push_back(1);
      continue;
    }
    if (d < 1)
      return fail("shape element " + std::to_string(d) + " is not supported");
    if (__builtin_mul_overflow(staticOut, d, &staticOut))
      return fail("the shape's sizes multiply past 2^63");
    shape.push_back(d);
  }
  if (inDyn != outDyn)
    return fail("the reshape merges, splits or reorders dynamic dimensions, which the "
                "dialect's reshape keeps in order");
  if (inferred >= 0) {
    if (staticOut == 0 || staticIn % staticOut != 0)
      return fail("-1 cannot be inferred: the sizes do not divide");
    shape[inferred] = staticIn / staticOut;
  } else if (staticIn != staticOut) {
    return fail("the shape holds another number of elements than the input");
  }
  auto r = reshapeTo(x, shape);
  if (!r)
    return r.takeError();
  outRt(0, *r);
  return llvm::Error::success();
}

llvm::Error Importer::reshape() {
  if (auto e = onlyAttributes({"allowzero"}))
    return e;
  auto x = need(0);
  if (!x)
    return x.takeError();
  auto t = known(1, "the shape", /*symbols=*/true);
  if (!t)
    return t.takeError();
  const bool allowZero = attrInt("allowzero", 0) != 0;
  if ((*x)->rt)
    return reshapeRuntime(**x, **t, allowZero);
  const Host &h = *(*x)->host;
  std::vector<int64_t> shape;
  int64_t inferred = -1, known = 1;
  for (int64_t i = 0; i < (*t)->numel(); ++i) {
    if ((*t)->symbolic(i))
      return fail("reshapes a known tensor to a run-time size");
    int64_t d = toInt((*t)->v[i]);
    if (d == 0 && !allowZero) {
      if (i >= static_cast<int64_t>(h.shape.size()))
        return fail("shape element " + std::to_string(i) + " copies a missing dimension");
      d = h.shape[i];
    }
    if (d == -1) {
      if (inferred >= 0)
        return fail("the shape has two -1 elements");
      inferred = i;
      shape.push_back(1);
      continue;
    }
    if (d < 0)
      return fail("shape element " + std::to_string(d) + " is not supported");
    if (__builtin_mul_overflow(known, d, &known))
      return fail("the shape's sizes multiply past 2^63");
    shape.push_back(d);
  }
  if (inferred >= 0) {
    if (known == 0 || h.numel() % known != 0)
      return fail("-1 cannot be inferred");
    shape[inferred] = h.numel() / known;
  } else if (known != h.numel()) {
    return fail("the shape holds another number of elements than the input");
  }
  Host r = h;
  r.shape = shape;
  outHost(0, std::move(r));
  return llvm::Error::success();
}

llvm::Error Importer::squeeze(bool unsqueeze) {
  if (auto e = onlyAttributes({"axes"}))
    return e;
  auto x = need(0);
  if (!x)
    return x.takeError();
  if (attr("axes"))
    return fail("attribute 'axes' is an input from opset 13 on");
  std::vector<int64_t> axes;
  if (in(1)) {
    auto k = knownInts(1, "axes");
    if (!k)
      return k.takeError();
    axes = *k;
  } else if (unsqueeze) {
    return fail("Unsqueeze needs its axes");
  }
  llvm::ArrayRef<int64_t> shape = shapeOf(**x);
  const int64_t rank = static_cast<int64_t>(shape.size());
  std::vector<int64_t> result;
  if (unsqueeze) {
    const int64_t outRank = rank + static_cast<int64_t>(axes.size());
    std::vector<bool> inserted(outRank, false);
    for (int64_t a : axes) {
      auto n = axis(a, outRank);
      if (!n)
        return n.takeError();
      if (inserted[*n])
        return fail("axes repeat");
      inserted[*n] = true;
    }
    size_t j = 0;
    for (int64_t i = 0; i < outRank; ++i)
      result.push_back(inserted[i] ? 1 : shape[j++]);
  } else {
    std::vector<bool> removed(rank, false);
    if (axes.empty())
      for (int64_t i = 0; i < rank; ++i)
        removed[i] = shape[i] == 1;
    for (int64_t a : axes) {
      auto n = axis(a, rank);
      if (!n)
        return n.takeError();
      if (shape[*n] != 1)
        return fail("squeezes dimension " + std::to_string(*n) + ", which is not 1");
      removed[*n] = true;
    }
    for (int64_t i = 0; i < rank; ++i)
      if (!removed[i])
        result.push_back(shape[i]);
  }
  if ((*x)->host) {
    Host r = *(*x)->host;
    r.shape = result;
    out(0, Val{Value(), std::move(r), (*x)->initializer});
    return llvm::Error::success();
  }
  auto r = reshapeTo((*x)->rt, result);
  if (!r)
    return r.takeError();
  outRt(0, *r);
  return llvm::Error::success();
}

llvm::Error Importer::flatten() {
  if (auto e = onlyAttributes({"axis"}))
    return e;
  auto x = need(0);
  if (!x)
    return x.takeError();
  llvm::ArrayRef<int64_t> shape = shapeOf(**x);
  const int64_t rank = static_cast<int64_t>(shape.size());
  int64_t a = attrInt("axis", 1);
  if (a < 0)
    a += rank;
  if (a < 0 || a > rank)
    return fail("axis is outside the input's rank");
  if ((*x)->rt && !llvm::is_contained(shape.drop_front(a), kDyn) &&
      llvm::is_contained(shape.take_front(a), kDyn) && a >= 2) {
    const int64_t inner = product(shape.drop_front(a));
    // [B, S, ...] to [B·S, inner]: the view merging dynamic dimensions
    // (Val::folded) of the tensor with its trailing dimensions as one.
    SmallVector<int64_t> kept(shape.take_front(a));
    kept.push_back(inner);
    auto r = reshapeTo((*x)->rt, kept);
    if (!r)
      return r.takeError();
    out(0, Val{*r, std::nullopt, "", a});
    return llvm::Error::success();
  }
  if (llvm::is_contained(shape, kDyn))
    return fail("flattens a dynamic dimension");
  const int64_t outer = product(shape.take_front(a)), inner = product(shape.drop_front(a));
  if ((*x)->host) {
    Host r = *(*x)->host;
    r.shape = {outer, inner};
    outHost(0, std::move(r));
    return llvm::Error::success();
  }
  auto r = reshapeTo((*x)->rt, {outer, inner});
  if (!r)
    return r.takeError();
  outRt(0, *r);
  return llvm::Error::success();
}

llvm::Error Importer::gather() {
  if (auto e = onlyAttributes({"axis"}))
    return e;
  auto x = need(0), ids = need(1);
  if (!x || !ids)
    return llvm::joinErrors(x.takeError(), ids.takeError());
  const Val &data = **x, &idx = **ids;
  llvm::ArrayRef<int64_t> shape = shapeOf(data);
  const int64_t rank = static_cast<int64_t>(shape.size());
  if (rank == 0)
    return fail("gathers from a scalar");
  auto a = axis(attrInt("axis", 0), rank);
  if (!a)
    return a.takeError();
  if (idx.host && idx.host->elem == Elem::kFloat)
    return fail("indices must be integers");
  if (data.host && idx.host) {
    const Host &h = *data.host;
    std::vector<int64_t> outShape(h.shape.begin(), h.shape.begin() + *a);
    outShape.insert(outShape.end(), idx.host->shape.begin(), idx.host->shape.end());
    outShape.insert(outShape.end(), h.shape.begin() + *a + 1, h.shape.end());
    const int64_t n = h.shape[*a], inner = product(llvm::ArrayRef(h.shape).drop_front(*a + 1));
    const int64_t outer = product(llvm::ArrayRef(h.shape).take_front(*a));
    std::vector<int64_t> from;
    for (int64_t o = 0; o < outer; ++o)
      for (double iv : idx.host->v) {
        int64_t i = toInt(iv);
        if (i < -n || i >= n)
          return fail("index " + std::to_string(i) + " is outside [" + std::to_string(-n) +
                      ", " + std::to_string(n) + ")");
        if (i < 0)
          i += n;
        for (int64_t k = 0; k < inner; ++k)
          from.push_back((o * n + i) * inner + k);
      }
    outHost(0, pick(h, outShape, from));
    return llvm::Error::success();
  }
  auto table = materialize(data, node->input(0));
  if (!table)
    return table.takeError();
  if (!isa<FloatType>(typeOf(*table).getElementType()))
    return fail("gathers from an integer or boolean run-time tensor (only float32)");
  // Known indices on a run-time tensor: negative ones normalized.
  Value ids32;
  if (idx.host) {
    Host h = *idx.host;
    const int64_t n = shape[*a];
    if (n == kDyn)
      return fail("gathers known indices along a dynamic dimension");
    for (double &v : h.v) {
      if (v < -n || v >= n)
        return fail("index " + std::to_string(toInt(v)) + " is outside [" +
                    std::to_string(-n) + ", " + std::to_string(n) + ")");
      if (v < 0)
        v += n;
    }
    auto m = materialize(Val{Value(), std::move(h), ""}, node->input(1) + "#normalized");
    if (!m)
      return m.takeError();
    ids32 = *m;
  } else {
    ids32 = idx.rt;
    if (!typeOf(ids32).getElementType().isInteger(32))
      return fail("indices must be integers");
  }
  auto r = gatherAlong(*table, *a, ids32);
  if (!r)
    return r.takeError();
  outRt(0, *r);
  return llvm::Error::success();
}

llvm::Expected<Value> Importer::gatherAlong(Value table, int64_t axis, Value ids32) {
  const int64_t rank = typeOf(table).getRank();
  // The table as [n, rest] with the gathered axis first.
  Value t = table;
  std::vector<int64_t> perm;
  if (axis != 0) {
    perm.push_back(axis);
    for (int64_t i = 0; i < rank; ++i)
      if (i != axis)
        perm.push_back(i);
    t = TransposeOp::create(b, loc, t, perm);
  }
  llvm::ArrayRef<int64_t> ts = typeOf(t).getShape();
  if (llvm::is_contained(ts, kDyn))
    return fail("gathers from a tensor with dynamic dimensions");
  const int64_t rest = product(ts.drop_front());
  auto t2 = reshapeTo(t, {ts[0], rest});
  if (!t2)
    return t2.takeError();
  Value g = GatherOp::create(b, loc, *t2, ids32);
  // [ids..., rest] -> [ids..., table dims but the first] -> the axis in place.
  SmallVector<int64_t> gs(typeOf(ids32).getShape());
  const int64_t idsRank = static_cast<int64_t>(gs.size());
  gs.append(ts.begin() + 1, ts.end());
  auto g2 = reshapeTo(g, gs);
  if (!g2)
    return g2.takeError();
  Value r = *g2;
  if (axis != 0) {
    // Result dims now: ids..., data dims except a (in order). ONNX wants
    // data[:a], ids..., data[a+1:].
    std::vector<int64_t> p;
    for (int64_t i = 0; i < axis; ++i)
      p.push_back(idsRank + i);
    for (int64_t i = 0; i < idsRank; ++i)
      p.push_back(i);
    for (int64_t i = axis; i < rank - 1; ++i)
      p.push_back(idsRank + i);
    r = TransposeOp::create(b, loc, r, p);
  }
  return r;
}

llvm::Expected<Value> Importer::splitHeads(Value x, int64_t heads, const char *attribute) {
  llvm::ArrayRef<int64_t> s = typeOf(x).getShape();
  if (s.size() != 3)
    return fail("the inputs must all be 3-D or all 4-D, got " + shapeStr(s));
  if (heads < 1 || s[2] == kDyn || s[2] % heads)
    return fail(llvm::Twine("a 3-D input needs ") + attribute + " dividing its hidden size");
  auto r = reshapeTo(x, {s[0], s[1], heads, s[2] / heads});
  if (!r)
    return r;
  return TransposeOp::create(b, loc, *r, ArrayRef<int64_t>{0, 2, 1, 3}).getResult();
}

llvm::Expected<Value> Importer::mergeHeads(Value x) {
  Value t = TransposeOp::create(b, loc, x, ArrayRef<int64_t>{0, 2, 1, 3});
  llvm::ArrayRef<int64_t> ts = typeOf(t).getShape();
  return reshapeTo(t, {ts[0], ts[1], ts[2] * ts[3]});
}

llvm::Error Importer::concat() {
  if (auto e = onlyAttributes({"axis"}))
    return e;
  std::vector<const Val *> xs;
  for (int i = 0; i < node->input_size(); ++i) {
    auto v = need(i);
    if (!v)
      return v.takeError();
    xs.push_back(*v);
  }
  if (xs.empty())
    return fail("no inputs");
  const int64_t rank = rankOf(*xs[0]);
  if (rank == 0)
    return fail("concatenates scalars");
  auto a = axis(attrInt("axis", 0), rank);
  if (!a)
    return a.takeError();
  if (llvm::all_of(xs, [](const Val *v) { return v->host.has_value(); })) {
    Host r;
    r.elem = xs[0]->host->elem;
    r.shape = xs[0]->host->shape;
    r.shape[*a] = 0;
    for (const Val *v : xs) {
      if (static_cast<int64_t>(v->host->shape.size()) != rank)
        return fail("inputs of different ranks");
      r.shape[*a] += v->host->shape[*a];
    }
    const int64_t outer = product(llvm::ArrayRef(r.shape).take_front(*a));
    const bool sym = llvm::any_of(xs, [](const Val *v) { return v->host->anySymbolic(); });
    for (int64_t o = 0; o < outer; ++o)
      for (const Val *v : xs) {
        const Host &h = *v->host;
        const int64_t chunk = product(llvm::ArrayRef(h.shape).drop_front(*a));
        for (int64_t k = 0; k < chunk; ++k) {
          r.v.push_back(h.v[o * chunk + k]);
          if (sym)
            r.sym.push_back(h.symbolAt(o * chunk + k));
        }
      }
    outHost(0, std::move(r));
    return llvm::Error::success();
  }
  SmallVector<Value> operands;
  for (int i = 0; i < node->input_size(); ++i) {
    if (rankOf(*xs[i]) != rank)
      return fail("inputs of different ranks");
    if (xs[i]->host && xs[i]->host->numel() == 0)
      continue; // an empty piece adds nothing
    auto m = materialize(*xs[i], node->input(i));
    if (!m)
      return m.takeError();
    operands.push_back(*m);
  }
  if (operands.size() == 1) {
    outRt(0, operands[0]);
    return llvm::Error::success();
  }
  auto joined = concatOf(operands, *a);
  if (!joined)
    return joined.takeError();
  outRt(0, *joined);
  return llvm::Error::success();
}

llvm::Expected<Value> Importer::sliceRuntime(Value x, int64_t a, int64_t start, int64_t end,
                                             const SizeExpr &endSym) {
  const int64_t n = typeOf(x).getDimSize(a);
  if (n == kDyn) {
    const bool toEnd = !endSym.known() && end >= std::numeric_limits<int32_t>::max();
    if (start == 0 && toEnd)
      return x;
    if (start == 0 && endSym.known()) {
      if (endSym == sizeOf(x, a))
        return x;
      return fail("slices a dynamic dimension to another run-time size");
    }
    return fail("slices a dynamic dimension at a fixed position (only [0, a run-time size) "
                "and the whole dimension are supported)");
  }
  if (endSym.known()) {
    if (start != 0)
      return fail("a slice to a run-time size must start at 0");
    auto len = indexOf(endSym);
    if (!len)
      return len.takeError();
    return SliceOp::create(b, loc, x, Value(), *len, a, 0, IntegerAttr()).getResult();
  }
  auto clamp = [&](int64_t v) {
    if (v < 0)
      v += n;
    return std::clamp<int64_t>(v, 0, n);
  };
  const int64_t s = clamp(start), e = clamp(end);
  if (e <= s)
    return fail("the slice is empty");
  if (s == 0 && e == n)
    return x;
  return SliceOp::create(b, loc, x, Value(), Value(), a, s, b.getI64IntegerAttr(e - s))
      .getResult();
}

llvm::Error Importer::slice() {
  auto x = need(0);
  if (!x)
    return x.takeError();
  auto starts = knownInts(1, "starts");
  if (!starts)
    return starts.takeError();
  auto ends = known(2, "ends", /*symbols=*/true);
  if (!ends)
    return ends.takeError();
  const int64_t rank = rankOf(**x);
  std::vector<int64_t> axes, steps;
  if (in(3)) {
    auto k = knownInts(3, "axes");
    if (!k)
      return k.takeError();
    axes = *k;
  } else {
    for (size_t i = 0; i < starts->size(); ++i)
      axes.push_back(static_cast<int64_t>(i));
  }
  if (in(4)) {
    auto k = knownInts(4, "steps");
    if (!k)
      return k.takeError();
    steps = *k;
  } else {
    steps.assign(starts->size(), 1);
  }
  if (axes.size() != starts->size() || (*ends)->numel() != static_cast<int64_t>(axes.size()) ||
      steps.size() != axes.size())
    return fail("starts, ends, axes and steps differ in length");
  if (rank == 0 && !axes.empty())
    return fail("slices a scalar");
  for (int64_t &a : axes) {
    auto n = axis(a, rank);
    if (!n)
      return n.takeError();
    a = *n;
  }
  if ((*x)->host && !(*ends)->anySymbolic()) {
    const Host &h = *(*x)->host;
    // Per axis: the indices taken.
    std::vector<std::vector<int64_t>> take(rank);
    for (int64_t d = 0; d < rank; ++d)
      for (int64_t i = 0; i < h.shape[d]; ++i)
        take[d].push_back(i);
    for (size_t k = 0; k < axes.size(); ++k) {
      const int64_t n = h.shape[axes[k]], step = steps[k];
      if (step == 0)
        return fail("a step of 0");
      int64_t s = (*starts)[k], e = toInt((*ends)->v[k]);
      if (s < 0)
        s += n;
      if (e < 0)
        e += n;
      take[axes[k]].clear();
      if (step > 0) {
        s = std::clamp<int64_t>(s, 0, n);
        e = std::clamp<int64_t>(e, 0, n);
        for (int64_t i = s; i < e; i += step)
          take[axes[k]].push_back(i);
      } else {
        s = std::clamp<int64_t>(s, 0, n - 1);
        e = std::clamp<int64_t>(e, -1, n - 1);
        for (int64_t i = s; i > e; i += step)
          take[axes[k]].push_back(i);
      }
    }
    std::vector<int64_t> shape, from;
    for (auto &t : take)
      shape.push_back(static_cast<int64_t>(t.size()));
    std::vector<int64_t> st = stridesOf(h.shape);
    forEachIndex(shape, [&](int64_t, llvm::ArrayRef<int64_t> idx) {
      int64_t f = 0;
      for (int64_t d = 0; d < rank; ++d)
        f += take[d][idx[d]] * st[d];
      from.push_back(f);
    });
    outHost(0, pick(h, shape, from));
    return llvm::Error::success();
  }
  // A run-time tensor, or a known one (a position table) cut to a run-time size.
  auto xv = materialize(**x, node->input(0));
  if (!xv)
    return xv.takeError();
  Value r = *xv;
  for (size_t k = 0; k < axes.size(); ++k) {
    if (steps[k] != 1) {
      // A strided (or reversed) slice of a static axis: a gather of the
      // indices it takes.
      const int64_t n = typeOf(r).getDimSize(axes[k]), step = steps[k];
      if (n == kDyn || (*ends)->symbolic(static_cast<int64_t>(k)))
        return fail("a step of " + std::to_string(step) + " on a dynamic dimension");
      if (step == 0)
        return fail("a step of 0");
      int64_t s0 = (*starts)[k], e0 = toInt((*ends)->v[k]);
      s0 = s0 < 0 ? s0 + n : s0;
      e0 = e0 < 0 && e0 != std::numeric_limits<int64_t>::min() ? e0 + n : e0;
      Host idx;
      idx.elem = Elem::kInt;
      if (step > 0)
        for (int64_t i = std::clamp<int64_t>(s0, 0, n); i < std::clamp<int64_t>(e0, 0, n); i += step)
          idx.v.push_back(static_cast<double>(i));
      else
        for (int64_t i = std::clamp<int64_t>(s0, 0, n - 1); i > std::clamp<int64_t>(e0, -1, n - 1);
             i += step)
          idx.v.push_back(static_cast<double>(i));
      if (idx.v.empty())
        return fail("the slice is empty");
      idx.shape = {static_cast<int64_t>(idx.v.size())};
      auto ids = materialize(Val{Value(), std::move(idx), ""},
                             node->output(0) + "#indices" + std::to_string(k));
      if (!ids)
        return ids.takeError();
      auto g = gatherAlong(r, axes[k], *ids);
      if (!g)
        return g.takeError();
      r = *g;
      continue;
    }
    auto s = sliceRuntime(r, axes[k], (*starts)[k], toInt((*ends)->v[k]),
                          (*ends)->symbolAt(static_cast<int64_t>(k)));
    if (!s)
      return s.takeError();
    r = *s;
  }
  outRt(0, r);
  return llvm::Error::success();
}

llvm::Error Importer::split() {
  if (auto e = onlyAttributes({"axis", "split", "num_outputs"}))
    return e;
  auto x = need(0);
  if (!x)
    return x.takeError();
  llvm::ArrayRef<int64_t> shape = shapeOf(**x);
  if (shape.empty())
    return fail("splits a scalar");
  auto a = axis(attrInt("axis", 0), static_cast<int64_t>(shape.size()));
  if (!a)
    return a.takeError();
  const int64_t n = shape[*a];
  if (n == kDyn)
    return fail("splits a dynamic dimension");
  std::vector<int64_t> parts;
  if (in(1)) {
    auto k = knownInts(1, "split");
    if (!k)
      return k.takeError();
    parts = *k;
  } else if (auto s = attrInts("split")) {
    if (opset >= 13)
      return fail("attribute 'split' is an input from opset 13 on");
    parts = *s;
  } else {
    const int64_t outputs = attr("num_outputs") ? attrInt("num_outputs", 1) : node->output_size();
    if (outputs < 1)
      return fail("num_outputs must be positive");
    const int64_t chunk = (n + outputs - 1) / outputs;
    for (int64_t i = 0, left = n; i < outputs; ++i, left -= chunk)
      parts.push_back(std::min(chunk, left));
  }
  if (static_cast<int64_t>(parts.size()) != node->output_size())
    return fail("the split has " + std::to_string(parts.size()) + " parts for " +
                std::to_string(node->output_size()) + " outputs");
  if (std::accumulate(parts.begin(), parts.end(), int64_t{0}) != n ||
      llvm::any_of(parts, [](int64_t p) { return p < 0; }))
    return fail("the parts do not cover the dimension of size " + std::to_string(n));
  // An empty part (a rotary embedding's pass-through of a fully rotated
  // head) is a known tensor of no elements, which Concat skips.
  if ((*x)->rt && llvm::is_contained(parts, 0)) {
    std::vector<int64_t> nonEmpty;
    for (int64_t p : parts)
      if (p)
        nonEmpty.push_back(p);
    SmallVector<Value> pieces;
    if (nonEmpty.size() == 1)
      pieces.push_back((*x)->rt);
    else
      pieces = SmallVector<Value>(SplitOp::create(b, loc, (*x)->rt, *a, nonEmpty).getResults());
    size_t next = 0;
    for (auto [i, p] : llvm::enumerate(parts)) {
      if (p) {
        outRt(static_cast<int>(i), pieces[next++]);
        continue;
      }
      Host empty;
      empty.shape.assign(shape.begin(), shape.end());
      empty.shape[*a] = 0;
      outHost(static_cast<int>(i), std::move(empty));
    }
    return llvm::Error::success();
  }
  if ((*x)->host) {
    const Host &h = *(*x)->host;
    int64_t begin = 0;
    for (auto [i, p] : llvm::enumerate(parts)) {
      std::vector<int64_t> os(h.shape), from;
      os[*a] = p;
      std::vector<int64_t> st = stridesOf(h.shape);
      forEachIndex(os, [&](int64_t, llvm::ArrayRef<int64_t> idx) {
        int64_t f = 0;
        for (size_t d = 0; d < os.size(); ++d)
          f += (static_cast<int64_t>(d) == *a ? idx[d] + begin : idx[d]) * st[d];
        from.push_back(f);
      });
      outHost(static_cast<int>(i), pick(h, os, from));
      begin += p;
    }
    return llvm::Error::success();
  }
  auto op = SplitOp::create(b, loc, (*x)->rt, *a, parts);
  for (auto [i, r] : llvm::enumerate(op.getResults()))
    outRt(static_cast<int>(i), r);
  return llvm::Error::success();
}

llvm::Expected<Value> Importer::likeOfSizes(llvm::ArrayRef<int64_t> shape,
                                            llvm::ArrayRef<SizeExpr> syms) {
  // The dynamic sizes are dimensions of one input, in its order: that input
  // sliced to one element along its other dimensions, as float32 and in
  // `shape`'s rank, is a tensor of the shape that broadcasting grows to it.
  const unsigned arg = syms.front().arg();
  SmallVector<int64_t> dims;
  for (const SizeExpr &s : syms) {
    if (s.kind() != SizeExpr::Kind::kArgument || s.arg() != arg ||
        (!dims.empty() && s.dim() <= dims.back()))
      return fail("expands to run-time sizes that are not one input's dimensions in order");
    dims.push_back(s.dim());
  }
  Value v = func.getArgument(arg);
  for (int64_t d = 0; d < typeOf(v).getRank(); ++d)
    if (!llvm::is_contained(dims, d) && typeOf(v).getDimSize(d) != 1)
      v = SliceOp::create(b, loc, v, Value(), Value(), d, 0, b.getI64IntegerAttr(1)).getResult();
  if (!isa<FloatType>(typeOf(v).getElementType()))
    v = CastOp::create(b, loc, RankedTensorType::get(typeOf(v).getShape(), b.getF32Type()), v);
  SmallVector<int64_t> ones(shape.size(), 1);
  for (auto [i, d] : llvm::enumerate(shape))
    if (d == kDyn)
      ones[i] = kDyn;
  return reshapeTo(v, ones);
}

llvm::Error Importer::expand() {
  auto x = need(0);
  if (!x)
    return x.takeError();
  auto t = known(1, "the shape", /*symbols=*/true);
  if (!t)
    return t.takeError();
  llvm::ArrayRef<int64_t> shape = shapeOf(**x);
  // The target's elements: 1 keeps the input's size.
  std::vector<int64_t> target;
  for (int64_t i = 0; i < (*t)->numel(); ++i)
    target.push_back((*t)->symbolic(i) ? kDyn : toInt((*t)->v[i]));
  const size_t rank = std::max(shape.size(), target.size());
  std::vector<int64_t> result(rank);
  std::vector<SizeExpr> grownSyms; // of the dimensions 1 grows to a run-time size
  std::vector<int64_t> grownStatic(rank, 1); // the static sizes 1 grows to, else 1
  for (size_t i = 0; i < rank; ++i) {
    int64_t a = i < rank - shape.size() ? 1 : shape[i - (rank - shape.size())];
    size_t ti = i - (rank - target.size());
    int64_t c = i < rank - target.size() ? 1 : target[ti];
    if (c == kDyn) {
      // A run-time size: the input's own, or an input's dimension that a
      // dimension of 1 grows to (a class token expanded to the batch).
      const bool own = a == kDyn && (*x)->rt &&
                       sizeOf((*x)->rt, static_cast<int64_t>(i - (rank - shape.size()))) ==
                           (*t)->sym[ti];
      if (!own && a != 1)
        return fail("expands to a run-time size the input does not have");
      result[i] = kDyn;
      if (!own)
        grownSyms.push_back((*t)->sym[ti]);
      continue;
    }
    if (a != c && a != 1 && c != 1)
      return fail("the input does not broadcast to the shape");
    result[i] = a == 1 ? c : a;
    if (a == 1)
      grownStatic[i] = c;
  }
  if ((*x)->host && !llvm::is_contained(result, kDyn)) {
    if (llvm::any_of(result, [](int64_t d) { return d > kMaxFolded; }) ||
        product(result) > kMaxFolded)
      return fail("the expanded tensor holds more than 2^26 elements");
    Host zeros;
    zeros.elem = (*x)->host->elem;
    zeros.shape = result;
    zeros.v.assign(product(result), 0.0);
    auto r = broadcastFold(*(*x)->host, zeros, (*x)->host->elem,
                           [](double p, double) { return p; });
    if (!r)
      return r.takeError();
    outHost(0, std::move(*r));
    return llvm::Error::success();
  }
  auto xv = rtIn(0);
  if (!xv)
    return xv.takeError();
  Value v = *xv;
  if (llvm::ArrayRef<int64_t>(result) == typeOf(v).getShape()) {
    outRt(0, v);
    return llvm::Error::success();
  }
  if (!isa<FloatType>(typeOf(v).getElementType()))
    return fail("expands an integer or boolean run-time tensor (only float32)");
  // transfuse.expand's result is the broadcast of its input and `like`: a
  // constant grows the static dimensions, an input's slice the run-time ones.
  auto grow = [&](Value like) {
    std::vector<int64_t> shape(rank);
    auto vs = typeOf(v).getShape(), ls = typeOf(like).getShape();
    for (size_t i = 0; i < rank; ++i) {
      int64_t a = i < rank - vs.size() ? 1 : vs[i - (rank - vs.size())];
      shape[i] = a == 1 ? ls[i] : a;
    }
    v = ExpandOp::create(b, loc, RankedTensorType::get(shape, b.getF32Type()), v, like);
  };
  if (llvm::any_of(grownStatic, [](int64_t d) { return d != 1; }))
    grow(ConstantOp::create(
        b, loc, DenseElementsAttr::get(RankedTensorType::get(grownStatic, b.getF32Type()), 0.0f)));
  if (!grownSyms.empty()) {
    std::vector<int64_t> dynamicOnly(rank, 1);
    for (size_t i = 0; i < rank; ++i)
      if (result[i] == kDyn && (i < rank - shape.size() || shape[i - (rank - shape.size())] == 1))
        dynamicOnly[i] = kDyn;
    auto like = likeOfSizes(dynamicOnly, grownSyms);
    if (!like)
      return like.takeError();
    grow(*like);
  }
  outRt(0, v);
  return llvm::Error::success();
}

llvm::Error Importer::where() {
  auto c = need(0), x = need(1), y = need(2);
  if (!c || !x || !y)
    return llvm::joinErrors(llvm::joinErrors(c.takeError(), x.takeError()), y.takeError());
  if ((*c)->host && (*x)->host && (*y)->host) {
    const Host &ch = *(*c)->host, &xh = *(*x)->host, &yh = *(*y)->host;
    auto s = broadcastShape(ch.shape, xh.shape);
    if (!s)
      return s.takeError();
    auto shape = broadcastShape(*s, yh.shape);
    if (!shape)
      return shape.takeError();
    Host r;
    r.elem = xh.elem;
    r.shape = *shape;
    const bool sym = xh.anySymbolic() || yh.anySymbolic();
    forEachIndex(*shape, [&](int64_t, llvm::ArrayRef<int64_t> idx) {
      const bool take = ch.v[broadcastIndex(ch.shape, idx)] != 0;
      const Host &h = take ? xh : yh;
      const int64_t i = broadcastIndex(h.shape, idx);
      r.v.push_back(h.v[i]);
      if (sym)
        r.sym.push_back(h.symbolAt(i));
    });
    outHost(0, std::move(r));
    return llvm::Error::success();
  }
  auto cond = materialize(**c, node->input(0));
  if (!cond)
    return cond.takeError();
  auto a = materialize(**x, node->input(1));
  if (!a)
    return a.takeError();
  auto d = materialize(**y, node->input(2));
  if (!d)
    return d.takeError();
  if (!typeOf(*cond).getElementType().isInteger(1))
    return fail("the condition must be boolean");
  if (!isa<FloatType>(typeOf(*a).getElementType()) || !isa<FloatType>(typeOf(*d).getElementType()))
    return fail("selects between integer run-time tensors (only float32)");
  if (auto e = broadcasts({*cond, *a, *d}))
    return e;
  outRt(0, SelectOp::create(b, loc, *cond, *a, *d).getResult());
  return llvm::Error::success();
}

std::optional<Elem> elemOfType(int64_t t) {
  switch (t) {
  case onnx::TensorProto::FLOAT:
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16:
  case onnx::TensorProto::DOUBLE:
    return Elem::kFloat;
  case onnx::TensorProto::INT64:
  case onnx::TensorProto::INT32:
  case onnx::TensorProto::INT8:
  case onnx::TensorProto::UINT8:
  case onnx::TensorProto::INT16:
  case onnx::TensorProto::UINT16:
  case onnx::TensorProto::UINT32:
    return Elem::kInt;
  case onnx::TensorProto::BOOL:
    return Elem::kBool;
  default:
    return std::nullopt;
  }
}


llvm::Error Importer::castNode() {
  if (auto e = onlyAttributes({"to", "saturate", "round_mode"}))
    return e;
  auto x = need(0);
  if (!x)
    return x.takeError();
  const int64_t to = attrInt("to", 0);
  std::optional<Elem> elem = elemOfType(to);
  if (!elem)
    return fail("casts to " + typeName(to) + " (float32, int64, int32 and bool are supported)");
  if ((*x)->host) {
    Host r = *(*x)->host;
    for (double &v : r.v) {
      if (*elem == Elem::kBool)
        v = v != 0 ? 1 : 0;
      else if (*elem == Elem::kInt)
        v = r.elem == Elem::kFloat ? std::trunc(v) : v;
      else if (to == onnx::TensorProto::FLOAT)
        v = static_cast<double>(static_cast<float>(v));
    }
    if (*elem == Elem::kFloat && to != onnx::TensorProto::FLOAT)
      return fail("casts to " + typeName(to) + " (float32, int64, int32 and bool are supported)");
    r.elem = *elem;
    outHost(0, std::move(r));
    return llvm::Error::success();
  }
  Type from = typeOf((*x)->rt).getElementType();
  if (isa<IntegerType>(from) && to == onnx::TensorProto::FLOAT) {
    // Ids or a 0/1 mask as floats (a mask made arithmetic: (1 - m) · -1e4).
    auto type = RankedTensorType::get(typeOf((*x)->rt).getShape(), b.getF32Type());
    outRt(0, CastOp::create(b, loc, type, (*x)->rt).getResult());
    return llvm::Error::success();
  }
  if (from.isInteger(32) && *elem == Elem::kBool) {
    // x != 0: the key-padding mask with padding id 0 (a 0/1 mask made bool).
    outRt(0, KeyPaddingMaskOp::create(b, loc, (*x)->rt, 0).getResult());
    return llvm::Error::success();
  }
  const bool same = (*elem == Elem::kFloat && to == onnx::TensorProto::FLOAT && isa<FloatType>(from)) ||
                    (*elem == Elem::kInt && from.isInteger(32) &&
                     (to == onnx::TensorProto::INT64 || to == onnx::TensorProto::INT32)) ||
                    (*elem == Elem::kBool && from.isInteger(1));
  if (!same)
    return fail("casts a run-time tensor to " + typeName(to) +
                " from another type (run-time casts keep the type, or make integers or "
                "booleans float32)");
  outRt(0, (*x)->rt);
  return llvm::Error::success();
}

llvm::Error Importer::shape() {
  if (auto e = onlyAttributes({"start", "end"}))
    return e;
  auto x = need(0);
  if (!x)
    return x.takeError();
  llvm::ArrayRef<int64_t> shape = shapeOf(**x);
  const int64_t rank = static_cast<int64_t>(shape.size());
  int64_t s = attrInt("start", 0), e = attrInt("end", rank);
  if (s < 0)
    s += rank;
  if (e < 0)
    e += rank;
  s = std::clamp<int64_t>(s, 0, rank);
  e = std::clamp<int64_t>(e, 0, rank);
  Host r;
  r.elem = Elem::kInt;
  for (int64_t i = s; i < e; ++i) {
    if (shape[i] == kDyn) {
      r.sym.resize(r.v.size());
      r.sym.push_back(sizeOf((*x)->rt, i));
      r.v.push_back(-1);
    } else {
      r.v.push_back(static_cast<double>(shape[i]));
      if (!r.sym.empty())
        r.sym.emplace_back();
    }
  }
  if (!r.sym.empty())
    r.sym.resize(r.v.size());
  r.shape = {static_cast<int64_t>(r.v.size())};
  outHost(0, std::move(r));
  return llvm::Error::success();
}

llvm::Error Importer::size() {
  auto x = need(0);
  if (!x)
    return x.takeError();
  llvm::ArrayRef<int64_t> shape = shapeOf(**x);
  if (llvm::is_contained(shape, kDyn))
    return fail("the size of a tensor with dynamic dimensions is a product of run-time sizes");
  Host r;
  r.elem = Elem::kInt;
  r.v = {static_cast<double>(product(shape))};
  outHost(0, std::move(r));
  return llvm::Error::success();
}

llvm::Error tensorAttr(const onnx::AttributeProto &a, llvm::StringRef where, Host &h) {
  auto t = readTensor(a.t(), where);
  if (!t)
    return t.takeError();
  h = hostOf(*t);
  return llvm::Error::success();
}

llvm::Error Importer::constantOfShape() {
  if (auto e = onlyAttributes({"value"}))
    return e;
  auto s = knownInts(0, "the shape");
  if (!s)
    return s.takeError();
  Host value;
  value.v = {0.0};
  value.shape = {1};
  if (const auto *a = attr("value"))
    if (auto e = tensorAttr(*a, path, value))
      return e;
  if (value.numel() != 1)
    return fail("the value must hold one element");
  Host r;
  r.elem = value.elem;
  r.shape = *s;
  if (llvm::any_of(r.shape, [](int64_t d) { return d < 0 || d > kMaxFolded; }) ||
      product(r.shape) > kMaxFolded)
    return fail("the shape is negative or holds more than 2^26 elements");
  r.v.assign(product(r.shape), value.v[0]);
  outHost(0, std::move(r));
  return llvm::Error::success();
}

llvm::Error Importer::range() {
  if (auto e = onlyAttributes({}))
    return e;
  auto s = known(0, "start", false, false), l = known(1, "limit", true, false),
       d = known(2, "delta", false, false);
  if (!s || !l || !d)
    return llvm::joinErrors(llvm::joinErrors(s.takeError(), l.takeError()), d.takeError());
  if ((*s)->numel() != 1 || (*l)->numel() != 1 || (*d)->numel() != 1)
    return fail("start, limit and delta must be scalars");
  const double start = (*s)->v[0], limit = (*l)->v[0], delta = (*d)->v[0];
  if (delta == 0)
    return fail("a delta of 0");
  if ((*l)->symbolic(0))
    return rangeToSize((*s)->elem, start, delta, (*l)->sym[0]);
  const double count = std::max(0.0, std::ceil((limit - start) / delta));
  if (count > static_cast<double>(kMaxFolded))
    return fail("the range holds more than 2^26 elements");
  Host r;
  r.elem = (*s)->elem;
  r.shape = {static_cast<int64_t>(count)};
  for (int64_t i = 0; i < r.shape[0]; ++i) {
    double v = start + static_cast<double>(i) * delta;
    r.v.push_back(r.elem == Elem::kFloat ? static_cast<double>(static_cast<float>(v)) : v);
  }
  outHost(0, std::move(r));
  return llvm::Error::success();
}

llvm::Error Importer::rangeToSize(Elem elem, double start, double delta, const SizeExpr &limit) {
  // 0, 1, ..., limit - 1 for the run-time size `limit`: the first `limit`
  // elements of a constant as long as the size's compiled maximum. Gathers
  // of its rows become slices (GatherOp's canonicalization).
  if (start != 0 || delta != 1)
    return fail("a range to a run-time size must start at 0 with step 1");
  const int64_t n = limit.maximum(maxBatch, maxSeqLen);
  if (n < 1 || n > kMaxFolded)
    return fail("the range's run-time limit " + limit.str() + " has no usable maximum");
  auto len = indexOf(limit);
  if (!len)
    return len.takeError();
  Value iota;
  if (elem == Elem::kFloat) {
    auto type = RankedTensorType::get({n}, b.getF32Type());
    std::vector<float> v(n);
    std::iota(v.begin(), v.end(), 0.0f);
    iota = ConstantOp::create(b, loc, DenseElementsAttr::get(type, llvm::ArrayRef<float>(v)));
  } else {
    auto type = RankedTensorType::get({n}, b.getI32Type());
    std::vector<int32_t> v(n);
    std::iota(v.begin(), v.end(), 0);
    iota = ConstantOp::create(b, loc, DenseElementsAttr::get(type, llvm::ArrayRef<int32_t>(v)));
  }
  outRt(0, SliceOp::create(b, loc, iota, Value(), *len, 0, 0, IntegerAttr()).getResult());
  return llvm::Error::success();
}

llvm::Error Importer::trilu() {
  if (auto e = onlyAttributes({"upper"}))
    return e;
  auto x = need(0);
  if (!x)
    return x.takeError();
  int64_t k = 0;
  if (in(1)) {
    auto kv = knownInts(1, "k");
    if (!kv)
      return kv.takeError();
    if (kv->size() != 1)
      return fail("k must be a scalar");
    k = (*kv)[0];
  }
  if (!(*x)->host)
    return fail("Trilu of a run-time tensor is not supported (it folds when its input is "
                "known when compiling)");
  Host r = *(*x)->host;
  if (r.shape.size() < 2)
    return fail("Trilu takes a matrix or a batch of them");
  const bool upper = attrInt("upper", 1) != 0;
  const int64_t rows = r.shape[r.shape.size() - 2], cols = r.shape.back();
  for (int64_t i = 0; i < r.numel(); ++i) {
    const int64_t c = i % cols, row = (i / cols) % rows;
    const bool keep = upper ? c - row >= k : c - row <= k;
    if (!keep)
      r.v[i] = 0;
  }
  outHost(0, std::move(r));
  return llvm::Error::success();
}

llvm::Error Importer::constant() {
  if (node->attribute_size() != 1)
    return fail("a Constant has one attribute");
  const auto &a = node->attribute(0);
  Host h;
  if (a.name() == "value") {
    if (auto e = tensorAttr(a, path, h))
      return e;
  } else if (a.name() == "value_float") {
    h.v = {a.f()};
  } else if (a.name() == "value_floats") {
    h.v.assign(a.floats().begin(), a.floats().end());
    h.shape = {static_cast<int64_t>(h.v.size())};
  } else if (a.name() == "value_int") {
    h.elem = Elem::kInt;
    h.v = {static_cast<double>(a.i())};
  } else if (a.name() == "value_ints") {
    h.elem = Elem::kInt;
    for (int64_t i : a.ints())
      h.v.push_back(static_cast<double>(i));
    h.shape = {static_cast<int64_t>(h.v.size())};
  } else {
    return fail("attribute '" + a.name() + "' is not supported");
  }
  outHost(0, std::move(h));
  return llvm::Error::success();
}

llvm::Error Importer::conv() {
  if (auto e = onlyAttributes({"kernel_shape", "strides", "pads", "dilations", "group", "auto_pad"}))
    return e;
  auto x = rtIn(0);
  if (!x)
    return x.takeError();
  auto w = need(1);
  if (!w)
    return w.takeError();
  if (typeOf(*x).getRank() != 4 || rankOf(**w) != 4)
    return fail("only the two-dimensional convolution is supported");
  llvm::ArrayRef<int64_t> ws = shapeOf(**w), xs = typeOf(*x).getShape();
  std::vector<int64_t> kernel(ws.begin() + 2, ws.end());
  if (kernel[0] < 1 || kernel[1] < 1)
    return fail("the kernel of " + shapeStr(kernel) + " is empty or dynamic");
  auto strides = attrInts("strides").value_or(std::vector<int64_t>{1, 1});
  auto pads = attrInts("pads").value_or(std::vector<int64_t>{0, 0, 0, 0});
  auto dil = attrInts("dilations").value_or(std::vector<int64_t>{1, 1});
  const auto *autoPad = attr("auto_pad");
  if (attrInt("group", 1) != 1 || strides != kernel ||
      llvm::any_of(pads, [](int64_t p) { return p != 0; }) ||
      llvm::any_of(dil, [](int64_t d) { return d != 1; }) ||
      (autoPad && autoPad->s() != "NOTSET" && autoPad->s() != "VALID") ||
      (attrInts("kernel_shape") && *attrInts("kernel_shape") != kernel))
    return fail("only the patch-embedding convolution is supported: stride = kernel, no "
                "padding, no dilation, one group");
  if (xs[1] != ws[1] || xs[2] == kDyn || xs[3] == kDyn || xs[2] % kernel[0] ||
      xs[3] % kernel[1])
    return fail("the image's channels or size do not fit the kernel (the height and width "
                "must be static multiples of the patch)");
  auto wv = materialize(**w, node->input(1));
  if (!wv)
    return wv.takeError();
  if (!isa<FloatType>(typeOf(*x).getElementType()) || !isa<FloatType>(typeOf(*wv).getElementType()))
    return fail("Conv of integer tensors is not supported");
  GraphBuilder g(b, loc);
  Value patches = g.unfold(*x, kernel[0], kernel[1]);            // [B, N, C·ph·pw]
  auto w2 = reshapeTo(*wv, {ws[0], ws[1] * kernel[0] * kernel[1]}); // [D, C·ph·pw]
  if (!w2)
    return w2.takeError();
  Value bias;
  if (in(2)) {
    auto bv = rtIn(2);
    if (!bv)
      return bv.takeError();
    if (typeOf(*bv).getShape() != llvm::ArrayRef<int64_t>{ws[0]})
      return fail("the bias must hold one value per output channel");
    if (!isa<FloatType>(typeOf(*bv).getElementType()))
      return fail("the bias must be float32");
    bias = *bv;
  }
  Value y = g.linear(patches, *w2, bias);                        // [B, N, D]
  Value t = TransposeOp::create(b, loc, y, ArrayRef<int64_t>{0, 2, 1});
  auto r = reshapeTo(t, {xs[0], ws[0], xs[2] / kernel[0], xs[3] / kernel[1]});
  if (!r)
    return r.takeError();
  outRt(0, *r);
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Opset 23: Attention, RotaryEmbedding
//===----------------------------------------------------------------------===//

llvm::Error Importer::attention() {
  if (auto e = onlyAttributes({"is_causal", "kv_num_heads", "q_num_heads", "scale", "softcap",
                               "qk_matmul_output_mode", "softmax_precision",
                               "left_window_size", "right_window_size"}))
    return e;
  const int64_t qkMode = attrInt("qk_matmul_output_mode", 0);
  if (qkMode < 0 || qkMode > 3)
    return fail("qk_matmul_output_mode " + std::to_string(qkMode) + " is not 0 to 3");
  if (in(6))
    return fail("nonpad_kv_seqlen (an external cache's lengths) is not supported");
  if (!in(4) != !in(5))
    return fail("past_key and past_value come together");
  const bool past = in(4) != nullptr;
  // The softmax runs in float32 (fp64 on the reference backend): what
  // float32 asks, and within a rounding of what double asks.
  if (const int64_t sp = attrInt("softmax_precision", onnx::TensorProto::FLOAT);
      sp != onnx::TensorProto::FLOAT && sp != onnx::TensorProto::DOUBLE)
    return fail("softmax_precision " + typeName(sp) + " is not supported (float32 or double)");
  auto q = rtIn(0);
  if (!q)
    return q.takeError();
  auto k = rtIn(1);
  if (!k)
    return k.takeError();
  auto v = rtIn(2);
  if (!v)
    return v.takeError();
  if (!isa<FloatType>(typeOf(*q).getElementType()) ||
      !isa<FloatType>(typeOf(*k).getElementType()) || !isa<FloatType>(typeOf(*v).getElementType()))
    return fail("Q, K and V must be float32");
  GraphBuilder g(b, loc);
  // 3-D inputs [B, S, H·dh] as heads [B, H, S, dh].
  const bool flat = typeOf(*q).getRank() == 3;
  auto heads = [&](Value x, const char *attribute) -> llvm::Expected<Value> {
    return flat ? splitHeads(x, attrInt(attribute, 0), attribute) : x;
  };
  auto qh = heads(*q, "q_num_heads");
  if (!qh)
    return qh.takeError();
  auto kh = heads(*k, "kv_num_heads");
  if (!kh)
    return kh.takeError();
  auto vh = heads(*v, "kv_num_heads");
  if (!vh)
    return vh.takeError();
  if (typeOf(*qh).getRank() != 4 || typeOf(*kh).getRank() != 4 || typeOf(*vh).getRank() != 4)
    return fail("Q, K and V must be 3-D or 4-D");
  const int64_t hq = typeOf(*qh).getDimSize(1), hk = typeOf(*kh).getDimSize(1);
  const int64_t dh = typeOf(*qh).getDimSize(3);
  if (hq == kDyn || hk == kDyn || dh == kDyn || hq < 1 || hk < 1 || hq % hk)
    return fail("the query heads must be a multiple of the key heads");
  // A past cache [B, Hk, P, dh] goes before the new keys and values; the
  // causal mask then lets query i see keys up to P + i.
  const Value newKeys = *kh;
  int64_t pastLen = 0; // P, static or kDyn
  if (past) {
    llvm::ArrayRef<int64_t> ps = shapeOf(*in(4));
    pastLen = ps.size() == 4 ? ps[2] : kDyn;
    for (auto [i, heads] : {std::pair{4, &*kh}, std::pair{5, &*vh}}) {
      auto p = rtIn(i);
      if (!p)
        return p.takeError();
      auto joined = concatOf({*p, *heads}, 2);
      if (!joined)
        return joined.takeError();
      *heads = *joined;
    }
  }
  Value kk = *kh, vv = *vh;
  if (hq != hk) {
    kk = g.repeatHeads(kk, hq / hk);
    vv = g.repeatHeads(vv, hq / hk);
  }
  const double scale = attrFloat("scale", 1.0 / std::sqrt(static_cast<double>(dh)));
  auto scores = matmulOf(*qh, kk, false, true); // [B, H, Sq, Sk]
  if (!scores)
    return scores.takeError();
  Value s = g.scale(*scores, scale);
  if (const double cap = attrFloat("softcap", 0); cap != 0)
    s = g.scale(g.tanh(g.scale(s, 1.0 / cap)), cap);
  // Outputs 1 and 2 (present_key, present_value) are K and V as heads (no
  // past cache); output 3 is the scores at the stage qk_matmul_output_mode
  // names: 0 and 1 scaled (and soft-capped), 2 masked, 3 the softmax.
  outRt(1, *kh);
  outRt(2, *vh);
  if (qkMode <= 1)
    outRt(3, s);
  if (const Val *m = in(3)) {
    auto mv = materialize(*m, node->input(3));
    if (!mv)
      return mv.takeError();
    if (!typeOf(*mv).getElementType().isInteger(1) && !isa<FloatType>(typeOf(*mv).getElementType()))
      return fail("the mask must be boolean or float32");
    if (auto e = broadcasts({s, *mv}))
      return e;
    if (typeOf(*mv).getElementType().isInteger(1)) {
      s = g.select(*mv, s, g.scalar(-std::numeric_limits<double>::infinity()));
    } else {
      s = AddOp::create(b, loc, s, *mv);
    }
  }
  if (attrInt("is_causal", 0)) {
    llvm::ArrayRef<int64_t> ss = typeOf(s).getShape();
    // ONNX's causal mask lets query i see keys j <= i + P (P the past
    // cache's length, else 0). transfuse.causal_mask is bottom-right aligned
    // (j <= i + Sk - Sq): the same when the new keys are as many as the
    // queries (Sk = P + Sq), and what the attention fusion takes. Other
    // static lengths get the mask as a constant.
    Value mask;
    if (sizeOf(*qh, 2) == sizeOf(newKeys, 2)) {
      // The lengths of Q and K, not the scores' (a use of them would keep
      // attention fusion from taking the chain).
      mask = g.causalMask(g.dim(*qh, 2), g.dim(kk, 2));
    } else if (ss[2] != kDyn && ss[3] != kDyn && pastLen != kDyn) {
      Host tri;
      tri.elem = Elem::kBool;
      tri.shape = {ss[2], ss[3]};
      for (int64_t i = 0; i < ss[2]; ++i)
        for (int64_t j = 0; j < ss[3]; ++j)
          tri.v.push_back(j <= i + pastLen ? 1 : 0);
      auto m = materialize(Val{Value(), std::move(tri), ""}, node->output(0) + "#causal");
      if (!m)
        return m.takeError();
      mask = *m;
    } else {
      return fail("is_causal with dynamic query and key lengths that may differ");
    }
    s = g.select(mask, s, g.scalar(-std::numeric_limits<double>::infinity()));
  }
  // Opset 25's sliding window: query i (at P + i) sees keys j with
  // P + i - left <= j <= P + i + right (-1: that side unbounded).
  const int64_t left = attrInt("left_window_size", -1), right = attrInt("right_window_size", -1);
  if (left >= 0 || right >= 0) {
    llvm::ArrayRef<int64_t> ss = typeOf(s).getShape();
    if (ss[2] == kDyn || ss[3] == kDyn || pastLen == kDyn)
      return fail("a sliding window with dynamic lengths is not supported");
    Host window;
    window.elem = Elem::kBool;
    window.shape = {ss[2], ss[3]};
    for (int64_t i = 0; i < ss[2]; ++i)
      for (int64_t j = 0; j < ss[3]; ++j) {
        const int64_t d = i + pastLen - j;
        window.v.push_back((left < 0 || d <= left) && (right < 0 || -d <= right) ? 1 : 0);
      }
    auto m = materialize(Val{Value(), std::move(window), ""}, node->output(0) + "#window");
    if (!m)
      return m.takeError();
    s = g.select(*m, s, g.scalar(-std::numeric_limits<double>::infinity()));
  }
  if (qkMode == 2)
    outRt(3, s);
  Value p = g.softmax(s, 3);
  if (qkMode == 3)
    outRt(3, p);
  auto pv = matmulOf(p, vv, false, false); // [B, H, Sq, dv]
  if (!pv)
    return pv.takeError();
  Value y = *pv;
  if (flat) {
    auto r = mergeHeads(y);
    if (!r)
      return r.takeError();
    y = *r;
  }
  outRt(0, y);
  return llvm::Error::success();
}

llvm::Error Importer::rotary() {
  if (auto e = onlyAttributes({"interleaved", "num_heads", "rotary_embedding_dim"}))
    return e;
  auto x = rtIn(0);
  if (!x)
    return x.takeError();
  auto c = rtIn(1);
  if (!c)
    return c.takeError();
  auto sn = rtIn(2);
  if (!sn)
    return sn.takeError();
  if (!isa<FloatType>(typeOf(*x).getElementType()) ||
      !isa<FloatType>(typeOf(*c).getElementType()) || !isa<FloatType>(typeOf(*sn).getElementType()))
    return fail("the input and the cos and sin caches must be float32");
  GraphBuilder g(b, loc);
  // X as heads [B, H, S, dh].
  llvm::ArrayRef<int64_t> xs = typeOf(*x).getShape();
  const bool flat = xs.size() == 3;
  Value x4 = *x;
  if (flat) {
    auto r = splitHeads(*x, attrInt("num_heads", 0), "num_heads");
    if (!r)
      return r.takeError();
    x4 = *r;
  } else if (xs.size() != 4) {
    return fail("the input must be 3-D or 4-D");
  }
  llvm::ArrayRef<int64_t> s4 = typeOf(x4).getShape();
  const int64_t dh = s4[3];
  const int64_t rdim = attrInt("rotary_embedding_dim", 0) ? attrInt("rotary_embedding_dim", 0) : dh;
  if (rdim % 2 || rdim > dh)
    return fail("rotary_embedding_dim must be even and at most the head size");
  const int64_t half = rdim / 2;
  // cos and sin [B, S, R]: gathered at the positions, or given per position.
  auto table = [&](Value t) -> llvm::Expected<Value> {
    if (typeOf(t).getRank() == 0 || typeOf(t).getShape().back() != half)
      return fail("the cos and sin caches must have rotary_embedding_dim / 2 columns");
    if (in(3)) {
      auto pos = rtIn(3);
      if (!pos)
        return pos;
      if (!typeOf(*pos).getElementType().isInteger(32) || typeOf(t).getRank() != 2)
        return fail("position_ids must be integers and the caches [positions, R]");
      t = g.gather(t, *pos);
    }
    llvm::ArrayRef<int64_t> ts = typeOf(t).getShape();
    if (ts.size() != 3)
      return fail("the cos and sin caches must be [positions, R] with position_ids, else [B, S, R]");
    return reshapeTo(t, {ts[0], 1, ts[1], ts[2]});
  };
  auto cosv = table(*c);
  if (!cosv)
    return cosv.takeError();
  auto sinv = table(*sn);
  if (!sinv)
    return sinv.takeError();
  Value rot = rdim == dh ? x4 : g.slice(x4, 3, 0, rdim);
  Value cs = *cosv, sv = *sinv, x1, x2;
  const bool interleaved = attrInt("interleaved", 0) != 0;
  if (interleaved) {
    auto r = reshapeTo(rot, {s4[0], s4[1], s4[2], half, 2});
    if (!r)
      return r.takeError();
    llvm::ArrayRef<int64_t> cs4 = typeOf(cs).getShape();
    auto c5 = reshapeTo(cs, {cs4[0], 1, cs4[2], half, 1});
    auto s5 = reshapeTo(sv, {cs4[0], 1, cs4[2], half, 1});
    if (!c5 || !s5)
      return llvm::joinErrors(c5.takeError(), s5.takeError());
    cs = *c5;
    sv = *s5;
    x1 = g.slice(*r, 4, 0, 1);
    x2 = g.slice(*r, 4, 1, 1);
  } else {
    x1 = g.slice(rot, 3, 0, half);
    x2 = g.slice(rot, 3, half, half);
  }
  for (Value t : {cs, sv}) {
    SmallVector<int64_t> shape;
    std::string error;
    if (failed(broadcastShapes(typeOf(x1).getShape(), typeOf(t).getShape(), shape, error)) ||
        llvm::ArrayRef<int64_t>(shape) != typeOf(x1).getShape())
      return fail("the cos and sin caches do not match the input's batch and positions");
  }
  Value o1 = SubOp::create(b, loc, g.mul(x1, cs), g.mul(x2, sv));
  Value o2 = g.add(g.mul(x2, cs), g.mul(x1, sv));
  auto joined = concatOf({o1, o2}, interleaved ? 4 : 3);
  if (!joined)
    return joined.takeError();
  Value y = *joined;
  if (interleaved) {
    auto r = reshapeTo(y, {s4[0], s4[1], s4[2], rdim});
    if (!r)
      return r.takeError();
    y = *r;
  }
  if (rdim != dh)
    y = g.concat({y, g.slice(x4, 3, rdim, dh - rdim)}, 3);
  if (flat) {
    auto r = mergeHeads(y);
    if (!r)
      return r.takeError();
    y = *r;
  }
  outRt(0, y);
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// The graph
//===----------------------------------------------------------------------===//

llvm::ArrayRef<Importer::OpEntry> Importer::table() {
  using I = Importer;
  using S = llvm::StringRef;
  static const OpEntry ops[] = {
      {"Add", [](I &i, S op) { return i.binary(op); }},
      {"Sub", [](I &i, S op) { return i.binary(op); }},
      {"Mul", [](I &i, S op) { return i.binary(op); }},
      {"Div", [](I &i, S op) { return i.binary(op); }},
      {"Pow", [](I &i, S) { return i.pow(); }},
      {"Sqrt", [](I &i, S op) { return i.unary(op); }},
      {"Neg", [](I &i, S op) { return i.unary(op); }},
      {"Reciprocal", [](I &i, S op) { return i.unary(op); }},
      {"Erf", [](I &i, S op) { return i.unary(op); }},
      {"Tanh", [](I &i, S op) { return i.unary(op); }},
      {"Sigmoid", [](I &i, S op) { return i.unary(op); }},
      {"Relu", [](I &i, S op) { return i.unary(op); }},
      {"Gelu", [](I &i, S) { return i.gelu(); }},
      {"Exp", [](I &i, S op) { return i.unary(op); }},
      {"Identity", [](I &i, S op) { return i.unary(op); }},
      {"Not", [](I &i, S op) { return i.unary(op); }},
      {"Equal", [](I &i, S op) { return i.compare(op); }},
      {"Less", [](I &i, S op) { return i.compare(op); }},
      {"Greater", [](I &i, S op) { return i.compare(op); }},
      {"And", [](I &i, S op) { return i.compare(op); }},
      {"Or", [](I &i, S op) { return i.compare(op); }},
      {"MatMul", [](I &i, S) { return i.matmul(); }},
      {"Gemm", [](I &i, S) { return i.gemm(); }},
      {"Softmax", [](I &i, S) { return i.softmax(); }},
      {"ReduceMean", [](I &i, S op) { return i.reduce(op); }},
      {"ReduceSum", [](I &i, S op) { return i.reduce(op); }},
      {"ReduceMax", [](I &i, S op) { return i.reduce(op); }},
      {"LayerNormalization", [](I &i, S) { return i.layerNorm(false); }},
      {"RMSNormalization", [](I &i, S) { return i.layerNorm(true); }},
      {"Transpose", [](I &i, S) { return i.transpose(); }},
      {"Reshape", [](I &i, S) { return i.reshape(); }},
      {"Squeeze", [](I &i, S) { return i.squeeze(false); }},
      {"Unsqueeze", [](I &i, S) { return i.squeeze(true); }},
      {"Flatten", [](I &i, S) { return i.flatten(); }},
      {"Gather", [](I &i, S) { return i.gather(); }},
      {"Concat", [](I &i, S) { return i.concat(); }},
      {"Slice", [](I &i, S) { return i.slice(); }},
      {"Split", [](I &i, S) { return i.split(); }},
      {"Expand", [](I &i, S) { return i.expand(); }},
      {"Where", [](I &i, S) { return i.where(); }},
      {"Cast", [](I &i, S) { return i.castNode(); }},
      {"Shape", [](I &i, S) { return i.shape(); }},
      {"Size", [](I &i, S) { return i.size(); }},
      {"ConstantOfShape", [](I &i, S) { return i.constantOfShape(); }},
      {"Range", [](I &i, S) { return i.range(); }},
      {"Trilu", [](I &i, S) { return i.trilu(); }},
      {"Constant", [](I &i, S) { return i.constant(); }},
      {"Conv", [](I &i, S) { return i.conv(); }},
      {"Attention", [](I &i, S) { return i.attention(); }},
      {"RotaryEmbedding", [](I &i, S) { return i.rotary(); }},
  };
  return ops;
}

llvm::Error Importer::importNode(const onnx::NodeProto &n) {
  node = &n;
  loc = NameLoc::get(b.getStringAttr(n.name().empty() ? n.op_type() : n.name() + " (" + n.op_type() + ")"));
  if (n.domain() == "com.microsoft")
    return fail("ONNX Runtime's contrib op com.microsoft." + n.op_type() +
                " is not supported; export the model without ONNX Runtime's fusions");
  if (!n.domain().empty() && n.domain() != "ai.onnx")
    return fail("the domain '" + n.domain() + "' is not supported");
  for (int i = 0; i < n.input_size(); ++i)
    if (!n.input(i).empty() && !values.count(n.input(i)))
      return fail("input '" + n.input(i) + "' is not defined before the node (an unknown "
                  "name, or a cycle)");
  for (int i = 0; i < n.input_size(); ++i)
    if (!n.input(i).empty() && values.at(n.input(i)).folded &&
        !(i == 0 && llvm::is_contained({"Reshape", "Gemm", "MatMul"}, n.op_type())))
      return fail(foldedUse(n.input(i)));
  for (const OpEntry &e : table())
    if (e.name == n.op_type())
      return e.handler(*this, n.op_type());
  return fail("the op is not supported (docs/onnx.md lists those that are)");
}

llvm::Expected<ImportedModel> Importer::run() {
  context.loadDialect<TransfuseDialect, func::FuncDialect>();
  ImportedModel result;
  result.module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(result.module->getBody());
  if (!model.has_graph())
    return fail("the model has no graph");
  if (auto e = setup())
    return std::move(e);
  for (const auto &n : model.graph().node())
    if (auto e = importNode(n))
      return std::move(e);
  node = nullptr;
  loc = UnknownLoc::get(&context);
  SmallVector<Value> outputs;
  for (const auto &o : model.graph().output()) {
    auto it = values.find(o.name());
    if (it == values.end())
      return fail("output '" + o.name() + "' is not computed by the graph");
    auto v = materialize(it->second, o.name());
    if (!v)
      return v.takeError();
    outputs.push_back(*v);
  }
  if (outputs.empty())
    return fail("the graph has no outputs");
  func::ReturnOp::create(b, loc, outputs);
  func.setType(b.getFunctionType(func.getArgumentTypes(), ValueRange(outputs).getTypes()));
  for (auto [i, o] : llvm::enumerate(model.graph().output()))
    func.setResultAttr(i, kNameAttr, b.getStringAttr(o.name()));
  std::string diagnostics;
  {
    ScopedDiagnosticHandler handler(&context, [&](Diagnostic &d) {
      llvm::raw_string_ostream(diagnostics) << d.getLocation() << ": " << d.str();
      return success();
    });
    if (failed(mlir::verify(*result.module)))
      return fail("the imported graph does not verify: " + diagnostics);
  }
  result.weights = std::move(weights);
  return result;
}

} // namespace

llvm::Expected<ImportedModel> onnx_import::importModel(MLIRContext &context,
                                                       const onnx::ModelProto &model,
                                                       llvm::StringRef path,
                                                       const ImportOptions &options) {
  return Importer(context, model, path, options).run();
}

std::vector<std::string> onnx_import::supportedOps() {
  std::vector<std::string> names;
  for (const auto &e : Importer::table())
    names.push_back(e.name.str());
  return names;
}

llvm::Expected<ImportedModel> onnx_import::importOnnxFile(MLIRContext &context, llvm::StringRef path,
                                                          const ImportOptions &options) {
  auto model = readOnnxModel(path);
  if (!model)
    return model.takeError();
  return importModel(context, *model, path, options);
}
