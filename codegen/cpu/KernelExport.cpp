//===- KernelExport.cpp - one kernel as a source pair an app embeds --------===//
//
// See KernelExport.h. The files are assembled from three kinds of text:
//   - the kernel library's sources (KernelSources.h, embedded at build time),
//     inlined by amalgamate() and renamed into the export's namespace;
//   - the templates of export-templates/ (ExportTemplates.h, embedded the
//     same way, see EmbedSources.cmake): the header, source and test program
//     every kind shares, the ThreadPool adapter, and per kind the C
//     declaration (KIND_decl.h.in), the header's description (KIND_doc.h.in),
//     the entry point (KIND_entry.cc.in) and the test's body (KIND_test.cc.in);
//     each file's first lines ('##') say what it is and which variables it
//     takes;
//   - the spec's sizes and options, substituted as ${NAME}-style variables.
//
//===----------------------------------------------------------------------===//

#include "codegen/cpu/KernelExport.h"

#include "codegen/Interface.h"
#include "codegen/cpu/ExportTemplates.h"
#include "codegen/cpu/KernelSources.h"
#include "runtime/kernels/Activation.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <map>
#include <regex>
#include <set>

namespace mlir::transfuse {
namespace {

using Vars = std::map<std::string, std::string>;

llvm::Error fail(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), "export-kernel: " + message);
}

/// `text` with each ${KEY} of `vars` replaced by its value. A ${...} that
/// `vars` lacks is a bug of this file: it is left in place and trips the
/// C++ compiler of the lit test.
std::string substitute(llvm::StringRef text, const Vars &vars) {
  std::string out;
  while (!text.empty()) {
    size_t at = text.find("${");
    size_t end = at == llvm::StringRef::npos ? at : text.find('}', at);
    if (end == llvm::StringRef::npos) {
      out += text;
      break;
    }
    auto it = vars.find(text.substr(at + 2, end - at - 2).str());
    out += text.substr(0, at);
    out += it == vars.end() ? text.substr(at, end - at + 1).str() : it->second;
    text = text.substr(end + 1);
  }
  return out;
}

std::string str(int64_t v) { return std::to_string(v); }

/// `v` rounded to float, printed so that it reads back exactly (no suffix).
std::string floatText(double v) {
  std::string s;
  llvm::raw_string_ostream(s) << llvm::format("%.9g", static_cast<float>(v));
  if (s.find_first_of(".e") == std::string::npos)
    s += ".0";
  return s;
}

/// The float literal of `v` (floatText with an f).
std::string floatLiteral(double v) { return floatText(v) + "f"; }

//===----------------------------------------------------------------------===//
// The embedded text
//===----------------------------------------------------------------------===//

/// The text of `path` in `sources`; a missing one is a bug of the build.
llvm::StringRef embedded(llvm::ArrayRef<EmbeddedSource> sources, llvm::StringRef path,
                         llvm::StringRef list) {
  for (const EmbeddedSource &source : sources)
    if (path == source.path)
      return source.text;
  llvm::report_fatal_error("export-kernel: " + path + " is not embedded (" + list +
                           " in codegen/CMakeLists.txt)");
}

llvm::StringRef librarySource(llvm::StringRef path) {
  return embedded(kKernelLibrarySources, path, "EXPORTED_KERNEL_SOURCES");
}

/// The template codegen/cpu/export-templates/`name`, its '##' lines left out.
llvm::StringRef exportTemplate(llvm::StringRef name) {
  return embedded(kExportTemplates, name, "EXPORT_TEMPLATES");
}

/// A template that fills part of a line (a declaration, a description):
/// its file's final newline left out.
llvm::StringRef fragment(llvm::StringRef name) {
  llvm::StringRef text = exportTemplate(name);
  text.consume_back("\n");
  return text;
}

/// Appends `path` to `out` with every project include ("runtime/...")
/// inlined in place, recursively, each file once (`done`): the order of a
/// normal compile, so header guards and Highway's toggle guards behave as
/// in the library. runtime/ThreadPool.h becomes thread_pool_adapter.h.in.
void amalgamate(llvm::StringRef path, std::set<std::string> &done, std::string &out) {
  if (!done.insert(path.str()).second)
    return;
  if (path == "runtime/ThreadPool.h") {
    out += exportTemplate("thread_pool_adapter.h.in");
    return;
  }
  out += "// ---- " + path.str() + " (the Transfuse kernel library's source) ----\n";
  llvm::SmallVector<llvm::StringRef> lines;
  librarySource(path).split(lines, '\n');
  if (!lines.empty() && lines.back().empty())
    lines.pop_back();
  for (llvm::StringRef line : lines) {
    llvm::StringRef t = line.ltrim();
    if (t.consume_front("#include \"")) {
      amalgamate(t.take_until([](char c) { return c == '"'; }), done, out);
      continue;
    }
    out += line;
    out += '\n';
  }
  out += "// ---- end of " + path.str() + " ----\n";
}

/// The library's namespace `transfuse` renamed to `ns`, so that exported
/// kernels never collide with each other or with a linked Transfuse.
std::string renameNamespace(const std::string &text, const std::string &ns) {
  static const std::regex declaration("\\bnamespace transfuse\\b");
  static const std::regex qualified("\\btransfuse::");
  return std::regex_replace(std::regex_replace(text, declaration, "namespace " + ns), qualified,
                            ns + "::");
}

//===----------------------------------------------------------------------===//
// The kinds
//===----------------------------------------------------------------------===//

/// What one kind contributes: the library files its code starts from, and
/// the templates NAME_doc.h.in, NAME_decl.h.in, NAME_entry.cc.in and
/// TEST_test.cc.in of its description, declaration, entry point and test.
struct Kind {
  llvm::StringRef name;
  llvm::StringRef title;
  std::vector<llvm::StringRef> flags;  // the spec's fields it reads, as flags
  std::vector<llvm::StringRef> roots;
  llvm::StringRef test;  // the kind whose test body it shares (TEST)
};

const std::vector<llvm::StringRef> kAttentionFlags = {
    "--batch", "--heads", "--seq-q", "--seq-k", "--head-dim", "--causal", "--mask"};
const std::vector<llvm::StringRef> kRowFlags = {"--rows", "--cols"};
const std::vector<llvm::StringRef> kMatrixFlags = {"--rows", "--k", "--n", "--epilogue"};

const std::vector<Kind> &kinds() {
  static const std::vector<Kind> all = {
      {"attention", "fused scaled dot-product attention (flash attention, fp32)", kAttentionFlags,
       {"runtime/kernels/attention-inl.h"}, "attention"},
      {"decode_attention", "attention of a decode step over a KV cache (fp32)", kAttentionFlags,
       {"runtime/kernels/decode_attention-inl.h"}, "decode_attention"},
      {"add_layer_norm", "residual add fused with layer normalization (fp32)",
       {"--rows", "--cols", "--epsilon"}, {"runtime/kernels/norm-inl.h"}, "add_layer_norm"},
      {"linear", "a linear layer with a fused epilogue, weights packed once (fp32)", kMatrixFlags,
       {"runtime/kernels/gemm-inl.h"}, "gemm"},
      {"gemm", "matrix product with a fused epilogue (fp32)", kMatrixFlags,
       {"runtime/kernels/gemm-inl.h"}, "gemm"},
      {"softmax", "row softmax (fp32)", kRowFlags, {"runtime/kernels/norm-inl.h"}, "softmax"},
  };
  return all;
}

//===----------------------------------------------------------------------===//
// Checks and variables
//===----------------------------------------------------------------------===//

llvm::Error positive(int64_t value, llvm::StringRef flag) {
  if (value < 1)
    return fail("--" + flag + " must be at least 1, got " + llvm::Twine(value));
  return llvm::Error::success();
}

/// Sizes whose tensors would not fit in memory make no kernel (and would
/// overflow the generated size arithmetic).
llvm::Error fitsMemory(double elements, llvm::StringRef flags) {
  if (elements > double(int64_t{1} << 40))
    return fail("a tensor of " + flags + " would hold " + llvm::formatv("{0:e}", elements) +
                " elements, more than 2^40");
  return llvm::Error::success();
}

/// A C identifier that names nothing the exported files or Highway define
/// at global scope.
bool isFreeIdentifier(llvm::StringRef s) {
  if (s.empty() || llvm::isDigit(s[0]) ||
      !llvm::all_of(s, [](char c) { return llvm::isAlnum(c) || c == '_'; }))
    return false;
  std::string lower = s.lower();
  return s != "main" && s != "std" && s != "hwy" && !s.starts_with("_") &&
         !llvm::StringRef(lower).starts_with("transfuse") && !llvm::StringRef(lower).starts_with("hwy_");
}

/// Variables of the attention kinds.
llvm::Error attentionVars(const KernelExportSpec &s, bool decode, bool bf16, Vars &v) {
  for (auto [value, flag] : std::initializer_list<std::pair<int64_t, const char *>>{
           {s.batch, "batch"}, {s.heads, "heads"}, {s.seqQ, "seq-q"}, {s.seqK, "seq-k"},
           {s.headDim, "head-dim"}})
    if (llvm::Error e = positive(value, flag))
      return e;
  const double B = s.batch, H = s.heads;
  if (llvm::Error e = fitsMemory(B * H * std::max(s.seqQ, s.seqK) * s.headDim,
                                 "--batch x --heads x --seq-q|--seq-k x --head-dim"))
    return e;
  if (s.mask == "additive")
    if (llvm::Error e = fitsMemory(B * H * s.seqQ * s.seqK, "--batch x --heads x --seq-q x --seq-k"))
      return e;
  if (s.headDim > 256)
    return fail("--head-dim must be at most 256, got " + llvm::Twine(s.headDim));
  if (s.causal && s.seqQ > s.seqK)
    return fail("--causal needs --seq-q <= --seq-k (query i sees keys up to i + Sk - Sq), got " +
                llvm::Twine(s.seqQ) + " > " + llvm::Twine(s.seqK));
  if (s.mask != "none" && s.mask != "key_padding" && (decode || s.mask != "additive"))
    return fail(llvm::Twine("--mask must be ") +
                (decode ? "none or key_padding" : "none, key_padding or additive") + " for " +
                s.kind + ", got '" + s.mask + "'");
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.headDim));
  v["B"] = str(s.batch);
  v["H"] = str(s.heads);
  v["SQ"] = str(s.seqQ);
  v["SK"] = str(s.seqK);
  v["D"] = str(s.headDim);
  v["SCALE"] = floatLiteral(scale);
  v["SCALE_TEXT"] = "1/sqrt(D) = " + floatText(scale);
  v["CAUSAL"] = s.causal ? "true" : "false";
  v["CAUSAL_TEXT"] = s.causal ? "causal (query i sees keys j <= i + Sk - Sq)" : "not causal";
  v["KEY_PADDING"] = s.mask == "key_padding" ? "true" : "false";
  v["ADDITIVE"] = s.mask == "additive" ? "true" : "false";
  // FLOPs as `transfuse bench attention` counts them: 4·B·H·Sq·Sk·D, halved when causal.
  const double flops = 4.0 * s.batch * s.heads * s.seqQ * s.seqK * s.headDim / (s.causal ? 2 : 1);
  v["FLOPS"] = std::to_string(static_cast<long long>(flops)) + ".0";
  v["REFERENCE"] = exportTemplate("attention_reference.cc.in").str();
  // The test's bound against the double reference, as the header states it:
  // bf16 operands carry 8-bit mantissas (2^-8 of (1 + |ref|)).
  v["TOLERANCE"] = bf16 ? "0.00390625, 0.00390625" : "2e-5, 2e-5";
  if (s.mask == "key_padding") {
    v["MASK_TEXT"] = "key padding (keys j >= key_lengths[b] are masked; key_lengths [B], each in "
                     "[0, Sk])";
    v["MASK_DECL"] = "\n    const int32_t *key_lengths,";
    v["MASK_PARAMS"] = "\n    const int32_t* key_lengths,";
    v["MASK_SET"] = "  if (!key_lengths) return TRANSFUSE_ERROR_ARGUMENT;\n"
                    "  for (size_t b = 0; b < a.batch; ++b)\n"
                    "    if (key_lengths[b] < 0 || size_t(key_lengths[b]) > a.seqK) return "
                    "TRANSFUSE_ERROR_ARGUMENT;\n"
                    "  a.keyLengths = key_lengths;";
    v["MASK_ARGS"] = " lengths.data(),";
  } else if (s.mask == "additive") {
    v["MASK_TEXT"] = "additive (added to the scaled scores: mask(b,h,i,j) = additive[b*batch + "
                     "h*head + i*row + j], additive_strides NULL: dense [B, H, Sq, Sk]; zero "
                     "strides broadcast, {0, 0, Sk} is one [Sq, Sk] mask; -inf masks)";
    v["MASK_DECL"] = "\n    const float *additive, const transfuse_strides *additive_strides,";
    v["MASK_PARAMS"] = "\n    const float* additive, const transfuse_strides* additive_strides,";
    v["MASK_SET"] = "  if (!additive) return TRANSFUSE_ERROR_ARGUMENT;\n"
                    "  a.additive = additive;\n"
                    "  a.additiveBatchStride = additive_strides ? additive_strides->batch : "
                    "a.heads * a.seqQ * a.seqK;\n"
                    "  a.additiveHeadStride = additive_strides ? additive_strides->head : "
                    "a.seqQ * a.seqK;\n"
                    "  a.additiveRowStride = additive_strides ? additive_strides->row : a.seqK;";
    v["MASK_ARGS"] = " additive.p, nullptr,";
  } else {
    v["MASK_TEXT"] = "none";
    v["MASK_DECL"] = v["MASK_PARAMS"] = v["MASK_SET"] = v["MASK_ARGS"] = "";
  }
  v["STRIDES_HELPER"] = substitute(exportTemplate("strides_helper.cc.in"), v);
  v["SHAPE"] = "B=" + v["B"] + " H=" + v["H"] + " Sq=" + v["SQ"] + " Sk=" + v["SK"] + " D=" + v["D"] +
               (s.causal ? " causal" : "") + (s.mask != "none" ? " mask " + s.mask : "");
  return llvm::Error::success();
}

/// Variables of the row kinds.
llvm::Error rowVars(const KernelExportSpec &s, Vars &v) {
  if (llvm::Error e = positive(s.rows, "rows"))
    return e;
  if (llvm::Error e = positive(s.cols, "cols"))
    return e;
  if (llvm::Error e = fitsMemory(double(s.rows) * s.cols, "--rows x --cols"))
    return e;
  if (s.kind == "add_layer_norm" && !(s.epsilon > 0 && std::isfinite(s.epsilon)))
    return fail("--epsilon must be a positive number, got " + llvm::formatv("{0}", s.epsilon));
  v["ROWS"] = str(s.rows);
  v["COLS"] = str(s.cols);
  v["EPS"] = floatLiteral(s.epsilon);
  v["EPS_TEXT"] = floatText(s.epsilon);
  v["SHAPE"] = "rows=" + v["ROWS"] + " cols=" + v["COLS"];
  return llvm::Error::success();
}

/// Variables of gemm and linear, with their epilogue.
llvm::Error matrixVars(const KernelExportSpec &s, Vars &v) {
  for (auto [value, flag] :
       std::initializer_list<std::pair<int64_t, const char *>>{{s.rows, "rows"}, {s.k, "k"}, {s.n, "n"}})
    if (llvm::Error e = positive(value, flag))
      return e;
  const double M = s.rows, K = s.k, N = s.n;
  if (llvm::Error e = fitsMemory(std::max({M * K, K * N, M * N}), "--rows, --k and --n"))
    return e;
  bool bias = false, residual = false;
  std::string activation = "none";
  // Each activation's double-precision reference for the exported test and
  // its formula for the header; the names are the kernels' (Activation.h).
  struct Reference {
    const char *code, *text;
  };
  static const std::map<std::string, Reference> references = {
      {"none", {"x", ""}},
      {"relu", {"std::max(x, 0.0)", ""}},
      {"gelu", {"0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)))",
                " (gelu exact: x/2 (1 + erf(x/sqrt 2)))"}},
      {"gelu_tanh",
       {"0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / 3.141592653589793) * (x + 0.044715 * x * x * x)))",
        " (gelu_tanh: x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))))"}},
      {"silu", {"x / (1.0 + std::exp(-x))", " (silu: x / (1 + exp(-x)))"}}};
  std::string activations;
  for (int i = 1; i < ::transfuse::kernels::kNumActivations; ++i)
    activations += std::string(activations.empty() ? "" : "|") +
                   ::transfuse::kernels::activationName(static_cast<::transfuse::kernels::Activation>(i));
  for (const std::string &item : s.epilogue) {
    std::optional<::transfuse::kernels::Activation> parsed = ::transfuse::kernels::parseActivation(item);
    bool isActivation = parsed && *parsed != ::transfuse::kernels::Activation::kNone;
    if (item != "bias" && item != "residual" && !isActivation)
      return fail("--epilogue: unknown '" + item + "' (a comma-separated list of bias, " +
                  activations + ", residual)");
    if ((item == "bias" && bias) || (item == "residual" && residual) ||
        (isActivation && activation != "none"))
      return fail("--epilogue: '" + item + "' repeats " +
                  (isActivation ? "an activation (at most one)" : "an item"));
    bias |= item == "bias";
    residual |= item == "residual";
    if (isActivation)
      activation = item;
  }
  const bool linear = s.kind == "linear";
  v["ROWS"] = str(s.rows);
  v["K"] = str(s.k);
  v["N"] = str(s.n);
  v["HAS_BIAS"] = bias ? "true" : "false";
  v["HAS_RESIDUAL"] = residual ? "true" : "false";
  std::string x = bias ? "x[i,j] + bias[j]" : "x[i,j]";
  std::string formula = activation == "none" ? x : activation + "(" + x + ")";
  if (residual)
    formula += " + residual[i,j]";
  v["FORMULA"] = formula;
  std::string text;
  for (const std::string &item : s.epilogue)
    text += (text.empty() ? "" : ", ") + item;
  v["EPILOGUE_TEXT"] = text.empty() ? "none" : text;
  v["EPILOGUE_TEXT"] += references.at(activation).text;
  v["RESIDUAL_SHAPE"] = residual ? ", residual [M, N]" : "";
  v["LDR_RULE"] = residual ? ", ldr >= N" : "";
  v["BIAS_SHAPE"] = bias ? "; bias is [N]" : "";
  std::string decl, params, checks, set, args;
  if (bias) {
    decl += " const float *bias,";
    params += " const float* bias,";
    checks += " || !bias";
    set += "  epilogue.bias = bias;\n";
    args += " bias.p,";
  }
  if (residual) {
    decl += " const float *residual, size_t ldr,";
    params += " const float* residual, size_t ldr,";
    checks += " || !residual || ldr < N";
    set += "  epilogue.residual = residual;\n  epilogue.ldr = ldr;\n";
    args += " res.p, ldr,";
  }
  set += "  epilogue.activation = Activation::" +
         std::string(::transfuse::kernels::activationInfo(*::transfuse::kernels::parseActivation(activation)).enumerator) +
         ";";
  v["ACTIVATION"] = references.at(activation).code;
  v["EPI_DECL"] = decl.empty() ? "" : "\n   " + decl;
  v["EPI_PARAMS"] = params.empty() ? "" : "\n   " + params;
  v["EPI_CHECKS"] = checks;
  v["EPI_SET"] = set;
  // The test: linear's weight is w [N, K], gemm's b [K, N], both with a
  // leading dimension ldb wider than the matrix.
  v["LDB"] = linear ? "K + 5" : "N + 5";
  v["W_SIZE"] = linear ? "N * ldb" : "K * ldb";
  v["W_AT"] = linear ? "w.p[j * ldb + k]" : "w.p[k * ldb + j]";
  if (linear) {
    v["SETUP"] = "  " + s.name + "_weights* packed = ::" + s.name + "_pack(w.p, ldb);\n" +
                 "  if (!packed) {\n    std::printf(\"" + s.name +
                 "_pack failed: FAILED\\n\");\n    return 1;\n  }";
    v["CALL_SINGLE"] = "::" + s.name + "(a.p, lda, packed," + args + " c.p, ldc, nullptr)";
    v["CALL_THREADED"] = "::" + s.name + "(a.p, lda, packed," + args + " threaded.p, ldc, &kParallel)";
    v["TEARDOWN"] = "  ::" + s.name + "_free(packed);";
  } else {
    v["SETUP"] = v["TEARDOWN"] = "";
    v["CALL_SINGLE"] = "::" + s.name + "(a.p, lda, w.p, ldb," + args + " c.p, ldc, nullptr)";
    v["CALL_THREADED"] = "::" + s.name + "(a.p, lda, w.p, ldb," + args + " threaded.p, ldc, &kParallel)";
  }
  v["SHAPE"] = "M=" + v["ROWS"] + " K=" + v["K"] + " N=" + v["N"] + " epilogue " + v["EPILOGUE_TEXT"];
  return llvm::Error::success();
}

/// `text` as the body of a C comment's lines: " * " before each.
std::string commentSafe(llvm::StringRef text) {
  std::string out = text.str();
  for (size_t at; (at = out.find("*/")) != std::string::npos;)
    out.replace(at, 2, "* /");
  return out;
}

} // namespace

llvm::ArrayRef<llvm::StringRef> exportableKernels() {
  static const std::vector<llvm::StringRef> names = [] {
    std::vector<llvm::StringRef> n;
    for (const Kind &k : kinds())
      n.push_back(k.name);
    return n;
  }();
  return names;
}

llvm::ArrayRef<llvm::StringRef> exportKernelFlags(llvm::StringRef kind) {
  auto k = llvm::find_if(kinds(), [&](const Kind &x) { return x.name == kind; });
  if (k == kinds().end())
    return {};
  return k->flags;
}

llvm::Expected<std::vector<ExportedFile>> exportKernel(const KernelExportSpec &specIn,
                                                       llvm::StringRef command) {
  KernelExportSpec spec = specIn;
  auto kind = llvm::find_if(kinds(), [&](const Kind &k) { return k.name == spec.kind; });
  if (kind == kinds().end())
    return fail("unknown kernel '" + spec.kind + "' (one of " +
                llvm::join(exportableKernels(), ", ") + ")");
  // int8: the linear layer on int8 weights (kernels::gemmInt8); bf16: gemm
  // and linear on bf16 operands (kernels::gemmBf16); each with its own
  // templates (linear_int8_*, gemm_bf16_*, linear_bf16_*) and its GEMM's
  // source beside Highway's.
  const bool int8 = spec.dtype == "int8", bf16 = spec.dtype == "bf16", low = int8 || bf16;
  const bool matrix = spec.kind == "linear" || spec.kind == "gemm";
  if (spec.dtype != "f32" && !(int8 && spec.kind == "linear") &&
      !(bf16 && (matrix || spec.kind == "attention")))
    return fail("--dtype must be f32, int8 for linear, or bf16 for gemm, linear and attention, "
                "got '" + spec.dtype + "'" + (low ? " for " + spec.kind : std::string()));
  if (spec.name.empty())
    spec.name = "tf_" + spec.kind;
  if (!isFreeIdentifier(spec.name))
    return fail("--name must be a C identifier that is not main, std, hwy or reserved "
                "(_..., transfuse..., hwy_...), got '" + spec.name + "'");

  Vars v;
  v["NAME"] = spec.name;
  v["NS"] = spec.name + "_transfuse";
  v["GUARD"] = llvm::StringRef(spec.name).upper() + "_H_";
  v["VERSION"] = compilerVersion().str();
  v["COMMAND"] = commentSafe(command);
  v["TITLE"] = int8   ? "a linear layer on int8 weights with a fused epilogue, weights quantized "
                         "and packed once"
               : bf16 && spec.kind == "linear"
                   ? "a linear layer on bf16 operands with fp32 sums and a fused epilogue, "
                     "weights rounded and packed once"
               : bf16 && spec.kind == "attention"
                   ? "scaled dot-product attention with its two products on bf16 operands "
                     "(fp32 sums, fp32 softmax)"
               : bf16 ? "matrix product on bf16 operands with fp32 sums and a fused epilogue"
                      : kind->title.str();
  auto kindVars = [&]() -> llvm::Error {
    if (spec.kind == "attention" || spec.kind == "decode_attention")
      return attentionVars(spec, spec.kind == "decode_attention", bf16, v);
    if (matrix)
      return matrixVars(spec, v);
    return rowVars(spec, v);
  };
  if (llvm::Error error = kindVars())
    return std::move(error);

  std::set<std::string> done;
  std::string library;
  if (low) {
    // Per target: the activations of the epilogue (and attention's masks
    // and softmax); once (in the entry): the GEMM, its kernels built per
    // function for their instructions.
    amalgamate("runtime/kernels/elementwise-inl.h", done, library);
    if (spec.kind == "attention")
      for (llvm::StringRef path : {"runtime/kernels/attention-inl.h", "runtime/kernels/norm-inl.h"})
        amalgamate(path, done, library);
    std::string once;
    const std::vector<llvm::StringRef> sources =
        int8 ? std::vector<llvm::StringRef>{"runtime/kernels/Int8Gemm.cpp",
                                            "runtime/kernels/int8/Avx2.cpp",
                                            "runtime/kernels/int8/Vnni.cpp",
                                            "runtime/kernels/int8/Amx.cpp"}
             : std::vector<llvm::StringRef>{"runtime/kernels/Bf16Gemm.cpp",
                                            "runtime/kernels/bf16/Avx2.cpp",
                                            "runtime/kernels/bf16/Avx512.cpp",
                                            "runtime/kernels/bf16/Amx.cpp"};
    for (llvm::StringRef path : sources)
      amalgamate(path, done, once);
    v["LOW_LIBRARY"] = renameNamespace(once, v["NS"]);
    if (bf16)
      v["BF16_LIBRARY"] = substitute(exportTemplate("bf16_library.cc.in"), v);
  } else {
    for (llvm::StringRef root : kind->roots)
      amalgamate(root, done, library);
  }
  v["LIBRARY"] = renameNamespace(library, v["NS"]);
  const std::string name = kind->name.str(), own = low ? name + "_" + spec.dtype : name;
  v["DOC"] = substitute(fragment(own + "_doc.h.in"), v);
  v["DECL"] = substitute(fragment(name + "_decl.h.in"), v);
  v["ENTRY"] = substitute(exportTemplate(own + "_entry.cc.in"), v);
  // (gemm and linear share the bf16 test, with w's layout as W_AT says;
  // attention's test takes its bound as TOLERANCE.)
  const std::string test = int8 ? own : bf16 && matrix ? kind->test.str() + "_bf16" : kind->test.str();
  v["BODY"] = substitute(exportTemplate(test + "_test.cc.in"), v);

  std::vector<ExportedFile> files;
  files.push_back({spec.name + ".h", substitute(exportTemplate("header.h.in"), v)});
  files.push_back({spec.name + ".cc", substitute(exportTemplate("source.cc.in"), v)});
  files.push_back({spec.name + "_test.cc", substitute(exportTemplate("test.cc.in"), v)});
  return files;
}

} // namespace mlir::transfuse
