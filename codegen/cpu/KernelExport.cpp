//===- KernelExport.cpp - one kernel as a source pair an app embeds --------===//
//
// See KernelExport.h. The files are assembled from three kinds of text:
//   - the kernel library's sources (KernelSources.h, embedded at build time),
//     inlined by amalgamate() and renamed into the export's namespace;
//   - the templates below: the header's shared types, the ThreadPool adapter,
//     per kind the C declaration, its entry point and its test program;
//   - the spec's sizes and options, substituted as ${NAME}-style variables.
//
//===----------------------------------------------------------------------===//

#include "codegen/cpu/KernelExport.h"

#include "codegen/Interface.h"
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
// The kernel library's text
//===----------------------------------------------------------------------===//

// What the kernels see of runtime/ThreadPool.h in an export: numThreads and
// the two schedules of the runtime's pool, over the caller's parallel_for.
// The static schedule's part t gets thread index t (parts run at once, so
// the indices are distinct); the chunked schedule's chunks all get 0: the
// kernels use the index of neither (their scratch is thread_local).
constexpr llvm::StringLiteral kThreadPoolAdapter = R"tf(// ---- runtime/ThreadPool.h, the export's adapter: the caller's transfuse_parallel ----
#ifndef TRANSFUSE_RUNTIME_THREADPOOL_H
#define TRANSFUSE_RUNTIME_THREADPOOL_H
#include <algorithm>
#include <cstdint>
namespace transfuse::rt {
class ThreadPool {
public:
  // parallel may be null (or have no parallel_for): one thread, the caller.
  explicit ThreadPool(const transfuse_parallel* parallel) {
    if (parallel && parallel->parallel_for && parallel->num_threads > 1) p_ = *parallel;
  }
  int numThreads() const { return p_.parallel_for ? p_.num_threads : 1; }
  // fn(begin, end, part) for part t of numThreads() equal ranges of [0, n).
  template <class Fn>
  void parallelFor(int64_t n, Fn&& fn) {
    if (n <= 0) return;
    const int64_t T = numThreads();
    auto part = [&](size_t t) {
      const int64_t b = n * int64_t(t) / T, e = n * (int64_t(t) + 1) / T;
      if (b < e) fn(b, e, int(t));
    };
    run(size_t(T), part);
  }
  // fn(begin, end, 0) for each chunk of `chunk` indices of [0, n).
  template <class Fn>
  void parallelForChunked(int64_t n, int64_t chunk, Fn&& fn) {
    if (n <= 0) return;
    chunk = std::max<int64_t>(1, chunk);
    auto part = [&](size_t i) {
      const int64_t b = int64_t(i) * chunk;
      fn(b, std::min(n, b + chunk), 0);
    };
    run(size_t((n + chunk - 1) / chunk), part);
  }

private:
  template <class F>
  void run(size_t count, F& f) {
    if (count == 1 || !p_.parallel_for) {
      for (size_t i = 0; i < count; ++i) f(i);
      return;
    }
    p_.parallel_for(p_.pool, count, [](void* context, size_t i) { (*static_cast<F*>(context))(i); }, &f);
  }
  transfuse_parallel p_{nullptr, nullptr, 1};
};
}  // namespace transfuse::rt
#endif  // TRANSFUSE_RUNTIME_THREADPOOL_H
// ---- end of runtime/ThreadPool.h ----
)tf";

llvm::StringRef librarySource(llvm::StringRef path) {
  for (const EmbeddedSource &source : kKernelLibrarySources)
    if (path == source.path)
      return source.text;
  llvm::report_fatal_error("export-kernel: " + path + " is not embedded (codegen/CMakeLists.txt)");
}

/// Appends `path` to `out` with every project include ("runtime/...")
/// inlined in place, recursively, each file once (`done`): the order of a
/// normal compile, so header guards and Highway's toggle guards behave as
/// in the library. runtime/ThreadPool.h becomes kThreadPoolAdapter.
void amalgamate(llvm::StringRef path, std::set<std::string> &done, std::string &out) {
  if (!done.insert(path.str()).second)
    return;
  if (path == "runtime/ThreadPool.h") {
    out += kThreadPoolAdapter;
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
// Templates shared by every kind
//===----------------------------------------------------------------------===//

constexpr llvm::StringLiteral kHeader = R"tf(/* ${NAME}.h: ${TITLE}.
 * Exported by Transfuse ${VERSION}:
 *   ${COMMAND}
 *
${DOC}
 *
 * Build: ${NAME}.cc needs only Highway (Debian: libhwy-dev) and C++17:
 *   c++ -O2 -std=c++17 -I<this directory> -c ${NAME}.cc   (link with -lhwy)
 * It runs the best Highway target of the CPU it lands on (dynamic dispatch).
 * Threading: with `parallel` NULL the call runs on the calling thread;
 * otherwise parallel->parallel_for runs its tasks (transfuse_parallel).
 * Results are bitwise the same on any thread count. Calls may run
 * concurrently when their outputs do not overlap each other or the inputs.
 * Returns TRANSFUSE_OK, or TRANSFUSE_ERROR_ARGUMENT (a required pointer is
 * NULL, a stride or size is out of range) before anything is written.
 */
#ifndef ${GUARD}
#define ${GUARD}

#ifndef TRANSFUSE_EXPORTED_KERNEL_COMMON_
#define TRANSFUSE_EXPORTED_KERNEL_COMMON_
/* Shared by every kernel that `transfuse export-kernel` writes. */
#include <stddef.h>
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif
enum { TRANSFUSE_OK = 0, TRANSFUSE_ERROR_ARGUMENT = 1 };

/* Element strides of a [B, H, S, D] tensor whose last dimension is
 * contiguous: element (b, h, s, d) at data[b*batch + h*head + s*row + d].
 * Where a kernel takes strides, NULL means dense. */
typedef struct transfuse_strides {
  size_t batch, head, row;
} transfuse_strides;

/* The caller's parallel-for (its own thread pool): parallel_for(pool, count,
 * task, context) must call task(context, i) exactly once for every i in
 * [0, count), on at most num_threads threads at once, in any order, and
 * return when every call has returned. */
typedef void (*transfuse_task_fn)(void *context, size_t index);
typedef struct transfuse_parallel {
  void (*parallel_for)(void *pool, size_t count, transfuse_task_fn task, void *context);
  void *pool;
  int num_threads;
} transfuse_parallel;
#ifdef __cplusplus
}
#endif
#endif /* TRANSFUSE_EXPORTED_KERNEL_COMMON_ */

#ifdef __cplusplus
extern "C" {
#endif

${DECL}

#ifdef __cplusplus
}
#endif
#endif /* ${GUARD} */
)tf";

constexpr llvm::StringLiteral kSource = R"tf(// ${NAME}.cc: ${TITLE}.
// Exported by Transfuse ${VERSION}:
//   ${COMMAND}
// See ${NAME}.h for the contract. After the includes below comes the
// Transfuse kernel library's own source (runtime/...), its includes inlined
// in place and its namespace renamed to ${NS}, then the entry point; the
// file is generated: regenerate it rather than edit it. Highway compiles it
// once per target: foreach_target.h includes this file again per target
// (HWY_TARGET_INCLUDE), so its directory must be on the include path (-I).
#include "${NAME}.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "${NAME}.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

${LIBRARY}
#if HWY_ONCE
// ---- the entry point ----
${ENTRY}
#endif  // HWY_ONCE
)tf";

// What the attention kinds' entry points share.
constexpr llvm::StringLiteral kStridesHelper = R"tf(namespace ${NS}::kernels {
namespace {
// t over `data` with the caller's strides (NULL: dense, S rows of D per
// head); false when rows would overlap (row stride < D).
bool resolveTensor(const float* data, const transfuse_strides* s, size_t H, size_t S, size_t D,
                   AttentionTensor* t) {
  t->data = data;
  if (!s) {
    t->rowStride = D;
    t->headStride = S * D;
    t->batchStride = H * S * D;
    return true;
  }
  t->batchStride = s->batch;
  t->headStride = s->head;
  t->rowStride = s->row;
  return s->row >= D;
}
// Sets the output of `a` (AttentionArgs or DecodeAttentionArgs): [B, H, Sq, D].
template <class Args>
bool resolveOutput(float* out, const transfuse_strides* s, Args* a) {
  AttentionTensor o;
  if (!out || !resolveTensor(out, s, a->heads, a->seqQ, a->headDim, &o)) return false;
  a->out = out;
  a->outBatchStride = o.batchStride;
  a->outHeadStride = o.headStride;
  a->outRowStride = o.rowStride;
  return true;
}
}  // namespace
}  // namespace ${NS}::kernels
)tf";

constexpr llvm::StringLiteral kTestPrelude = R"tf(// ${NAME}_test.cc: checks ${NAME} (${NAME}.h) against a scalar reference
// in double on random data in [-1, 1): on the calling thread, then on 3
// threads of a std::thread parallel-for (bitwise equal to the first), with
// misaligned pointers. Exported by Transfuse ${VERSION}:
//   ${COMMAND}
// Build and run:
//   c++ -O2 -std=c++17 -I. ${NAME}.cc ${NAME}_test.cc -lhwy -pthread -o ${NAME}_test && ./${NAME}_test
// Options: --bench N times N calls on one thread (median and best);
// --isa TARGET (or TRANSFUSE_ISA=TARGET) dispatches to a lower Highway
// target of this CPU, such as AVX2 on an AVX-512 machine.
#include "${NAME}.h"

#include <hwy/highway.h>

#include <strings.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <thread>
#include <vector>

namespace {

// An app's thread pool, reduced to what transfuse_parallel asks.
void threadsFor(void* pool, size_t count, transfuse_task_fn task, void* context) {
  const int threads = *static_cast<int*>(pool);
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < count;) task(context, i);
  };
  std::vector<std::thread> workers;
  for (int t = 1; t < threads; ++t) workers.emplace_back(work);
  work();
  for (std::thread& w : workers) w.join();
}
int kThreads = 3;
const transfuse_parallel kParallel = {threadsFor, &kThreads, 3};

// n floats at a misaligned address (one float past an aligned one).
struct Floats {
  explicit Floats(size_t n, float fill = 0.0f) : storage(n + 1, fill), p(storage.data() + 1) {}
  std::vector<float> storage;
  float* p;
};

uint64_t gSeed = 42;
float uniform() {  // [-1, 1)
  gSeed = gSeed * 6364136223846793005ull + 1442695040888963407ull;
  return static_cast<float>((gSeed >> 40) * (1.0 / 8388608.0) - 1.0);
}
Floats randomFloats(size_t n) {
  Floats f(n);
  for (size_t i = 0; i < n; ++i) f.p[i] = uniform();
  return f;
}

int gFailures = 0;
// got[i] against want[i] within atol + rtol·|want| (tol[i] when given).
void expectNear(const char* what, const float* got, const std::vector<double>& want, double atol,
                double rtol, const std::vector<double>* tol = nullptr) {
  double worst = 0.0;
  size_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double err = std::fabs(double(got[i]) - want[i]);
    const double limit = tol ? (*tol)[i] : atol + rtol * std::fabs(want[i]);
    if (!(err <= limit) && bad++ < 5)
      std::printf("  %s[%zu] = %.9g, reference %.9g (tolerance %.3g)\n", what, i, got[i], want[i], limit);
    if (err > worst || std::isnan(err)) worst = err;
  }
  std::printf("%s: max |error| %.3g over %zu values%s\n", what, worst, want.size(),
              bad ? ": FAILED" : "");
  if (bad) ++gFailures;
}
[[maybe_unused]] void expectSameBits(const char* what, const float* a, const float* b, size_t n) {
  if (std::memcmp(a, b, n * sizeof(float)) != 0) {
    std::printf("%s: threaded result differs from the single-threaded one: FAILED\n", what);
    ++gFailures;
  }
}
void expectOk(int status, const char* what) {
  if (status != TRANSFUSE_OK) {
    std::printf("%s returned %d: FAILED\n", what, status);
    std::exit(1);
  }
}

int gBenchIters = 0;
// Times gBenchIters calls of f on one thread after a warm-up call.
void bench(const std::function<void()>& f, double flops) {
  if (gBenchIters <= 0) return;
  f();
  std::vector<double> us;
  for (int i = 0; i < gBenchIters; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(us.begin(), us.end());
  const double median = us[us.size() / 2], best = us.front();
  std::printf("bench: median %.1f us, best %.1f us", median, best);
  if (flops > 0) std::printf(", %.1f GFLOP/s at the median, %.1f at best", flops / median * 1e-3, flops / best * 1e-3);
  std::printf(" (1 thread, %d calls)\n", gBenchIters);
}

std::string targetName() {
  const std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
  return targets.empty() ? "none" : hwy::TargetName(targets.front());
}

bool forceTarget(const char* name) {
  for (int64_t t : hwy::SupportedAndGeneratedTargets())
    if (strcasecmp(name, hwy::TargetName(t)) == 0) {
      hwy::SetSupportedTargetsForTest(hwy::SupportedTargets() & ~(t - 1));
      return true;
    }
  std::fprintf(stderr, "%s: Highway target '%s' is not available on this CPU\n", "${NAME}_test", name);
  return false;
}

bool parseArgs(int argc, char** argv) {
  if (const char* isa = std::getenv("TRANSFUSE_ISA"); isa && *isa && !forceTarget(isa)) return false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--bench" && i + 1 < argc) {
      gBenchIters = std::atoi(argv[++i]);
    } else if (arg == "--isa" && i + 1 < argc) {
      if (!forceTarget(argv[++i])) return false;
    } else {
      std::fprintf(stderr, "usage: %s [--bench N] [--isa TARGET]\n", argv[0]);
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (!parseArgs(argc, argv)) return 2;
  std::printf("${NAME} (%s), target %s\n", "${SHAPE}", targetName().c_str());
${BODY}
  std::printf("%s\n", gFailures ? "FAIL" : "PASS");
  return gFailures ? 1 : 0;
}
)tf";

//===----------------------------------------------------------------------===//
// The kinds
//===----------------------------------------------------------------------===//

/// What one kind contributes: the library files its code starts from and
/// the templates of its declaration, documentation, entry point and test.
struct Kind {
  llvm::StringRef name;
  llvm::StringRef title;
  std::vector<llvm::StringRef> flags;  // the spec's fields it reads, as flags
  std::vector<llvm::StringRef> roots;
  llvm::StringRef doc, decl, entry, test;
};

const std::vector<llvm::StringRef> kAttentionFlags = {
    "--batch", "--heads", "--seq-q", "--seq-k", "--head-dim", "--causal", "--mask"};
const std::vector<llvm::StringRef> kRowFlags = {"--rows", "--cols"};
const std::vector<llvm::StringRef> kMatrixFlags = {"--rows", "--k", "--n", "--epilogue"};

// ---- attention ----

constexpr llvm::StringLiteral kAttentionDoc =
    R"tf( *   out[b,h,i,:] = sum_j softmax_j(scale * q[b,h,i,:].k[b,h,j,:] + mask(b,h,i,j)) * v[b,h,j,:]
 *
 * Specialized to B = ${B}, H = ${H}, Sq = ${SQ}, Sk = ${SK}, D = ${D},
 * scale = ${SCALE_TEXT}; ${CAUSAL_TEXT}; mask: ${MASK_TEXT}.
 * q and out are [B, H, Sq, D], k and v [B, H, Sk, D], each with its own
 * strides (transfuse_strides; NULL: dense), so the [B, S, H, D] layout of a
 * fused QKV projection needs no transpose. fp32; pointers need no alignment;
 * out must not overlap the inputs. A query whose keys are all masked gets 0.
 * The kernel streams K and V in tiles with an online softmax (flash
 * attention): the Sq x Sk scores are never stored. Tasks: (b, h, a tile of
 * 2 vectors of queries). Accuracy against a double-precision reference:
 * |out - ref| <= 2e-5 * (1 + |ref|) for inputs in [-1, 1].)tf";

constexpr llvm::StringLiteral kAttentionDecl =
    R"tf(int ${NAME}(const float *q, const transfuse_strides *q_strides,
    const float *k, const transfuse_strides *k_strides,
    const float *v, const transfuse_strides *v_strides,
    float *out, const transfuse_strides *out_strides,${MASK_DECL}
    const transfuse_parallel *parallel);)tf";

constexpr llvm::StringLiteral kAttentionEntry = R"tf(${STRIDES_HELPER}
namespace ${NS}::kernels {
HWY_EXPORT(AttentionRun);
}  // namespace ${NS}::kernels

extern "C" int ${NAME}(const float* q, const transfuse_strides* q_strides,
    const float* k, const transfuse_strides* k_strides,
    const float* v, const transfuse_strides* v_strides,
    float* out, const transfuse_strides* out_strides,${MASK_PARAMS}
    const transfuse_parallel* parallel) {
  using namespace ${NS}::kernels;
  AttentionArgs a;
  a.batch = ${B};
  a.heads = ${H};
  a.seqQ = ${SQ};
  a.seqK = ${SK};
  a.headDim = ${D};
  a.scale = ${SCALE};
  a.causal = ${CAUSAL};
  if (!q || !k || !v || !resolveTensor(q, q_strides, a.heads, a.seqQ, a.headDim, &a.q) ||
      !resolveTensor(k, k_strides, a.heads, a.seqK, a.headDim, &a.k) ||
      !resolveTensor(v, v_strides, a.heads, a.seqK, a.headDim, &a.v) ||
      !resolveOutput(out, out_strides, &a))
    return TRANSFUSE_ERROR_ARGUMENT;
${MASK_SET}
  ${NS}::rt::ThreadPool pool(parallel);
  HWY_DYNAMIC_DISPATCH(AttentionRun)(a, &pool);
  return TRANSFUSE_OK;
}
)tf";

// The reference of both attention kinds: scores over the visible keys,
// softmax, P·V, all in double.
constexpr llvm::StringLiteral kAttentionReference = R"tf(  // (b, h, i, d) of a [B, H, S, D] tensor with strides s.
  auto at = [&](const float* p, const transfuse_strides& s, size_t b, size_t h, size_t i, size_t d) {
    return double(p[b * s.batch + h * s.head + i * s.row + d]);
  };
  auto reference = [&](const float* q, const transfuse_strides& qs, const float* k,
                       const transfuse_strides& ks, bool kTransposed, const float* v,
                       const transfuse_strides& vs, size_t Sk, const int32_t* lengths,
                       const float* additive) {
    std::vector<double> out(B * H * Sq * D, 0.0);
    std::vector<double> s(Sk);
    for (size_t b = 0; b < B; ++b)
      for (size_t h = 0; h < H; ++h)
        for (size_t i = 0; i < Sq; ++i) {
          double mx = -std::numeric_limits<double>::infinity();
          for (size_t j = 0; j < Sk; ++j) {
            bool visible = !causal || j + Sq <= i + Sk;
            if (lengths && int64_t(j) >= lengths[b]) visible = false;
            if (!visible) {
              s[j] = -std::numeric_limits<double>::infinity();
              continue;
            }
            double dot = 0.0;
            for (size_t d = 0; d < D; ++d)
              dot += at(q, qs, b, h, i, d) * (kTransposed ? at(k, ks, b, h, d, j) : at(k, ks, b, h, j, d));
            s[j] = scale * dot + (additive ? additive[((b * H + h) * Sq + i) * Sk + j] : 0.0);
            mx = std::max(mx, s[j]);
          }
          if (mx == -std::numeric_limits<double>::infinity()) continue;  // all masked: 0
          double sum = 0.0;
          for (size_t j = 0; j < Sk; ++j) sum += s[j] = std::exp(s[j] - mx);
          for (size_t j = 0; j < Sk; ++j)
            for (size_t d = 0; d < D; ++d)
              out[((b * H + h) * Sq + i) * D + d] += s[j] / sum * at(v, vs, b, h, j, d);
        }
    return out;
  };
  // Key lengths: all keys for row 0, random (0 included) for the others.
  auto randomLengths = [&](size_t Sk) {
    std::vector<int32_t> lengths(B);
    for (size_t b = 0; b < B; ++b)
      lengths[b] = b == 0 ? int32_t(Sk) : int32_t(std::min<double>(Sk, (uniform() + 1) / 2 * (Sk + 1)));
    return lengths;
  };
)tf";

constexpr llvm::StringLiteral kAttentionTest = R"tf(  const size_t B = ${B}, H = ${H}, Sq = ${SQ}, Sk = ${SK}, D = ${D};
  const double scale = ${SCALE};
  const bool causal = ${CAUSAL};
${REFERENCE}
  // q and out in the [B, S, H, D] layout of a QKV projection, k and v dense.
  const transfuse_strides projected = {Sq * H * D, D, H * D};
  const transfuse_strides dense = {H * Sk * D, Sk * D, D};
  Floats q = randomFloats(B * Sq * H * D), k = randomFloats(B * H * Sk * D), v = randomFloats(B * H * Sk * D);
  std::vector<int32_t> lengths = randomLengths(Sk);
  Floats additive = randomFloats(B * H * Sq * Sk);
  const bool useLengths = ${KEY_PADDING}, useAdditive = ${ADDITIVE};
  Floats out(B * Sq * H * D, NAN), threaded(B * Sq * H * D, NAN);
  auto call = [&](float* o, const transfuse_parallel* parallel) {
    return ::${NAME}(q.p, &projected, k.p, nullptr, v.p, &dense, o, &projected,${MASK_ARGS} parallel);
  };
  expectOk(call(out.p, nullptr), "${NAME}");
  expectOk(call(threaded.p, &kParallel), "${NAME} (3 threads)");
  const std::vector<double> want = reference(q.p, projected, k.p, dense, false, v.p, dense, Sk,
                                             useLengths ? lengths.data() : nullptr,
                                             useAdditive ? additive.p : nullptr);
  // The reference is [B, H, Sq, D]; out is [B, Sq, H, D].
  std::vector<float> got(want.size());
  for (size_t b = 0; b < B; ++b)
    for (size_t h = 0; h < H; ++h)
      for (size_t i = 0; i < Sq; ++i)
        for (size_t d = 0; d < D; ++d)
          got[((b * H + h) * Sq + i) * D + d] = out.p[b * projected.batch + h * projected.head + i * projected.row + d];
  expectNear("out", got.data(), want, 2e-5, 2e-5);
  expectSameBits("out", out.p, threaded.p, B * Sq * H * D);
  if (::${NAME}(nullptr, nullptr, k.p, nullptr, v.p, nullptr, out.p, nullptr,${MASK_ARGS} nullptr) != TRANSFUSE_ERROR_ARGUMENT) {
    std::printf("a NULL q was not refused: FAILED\n");
    ++gFailures;
  }
  bench([&] { call(out.p, nullptr); }, ${FLOPS});
)tf";

// ---- decode_attention ----

constexpr llvm::StringLiteral kDecodeDoc =
    R"tf( *   out[b,h,i,:] = sum_j softmax_j(scale * q[b,h,i,:].k[b,h,:,j] + mask(b,i,j)) * v[b,h,j,:]
 *
 * One step of decoding over a KV cache: Sq = ${SQ} queries per sequence
 * against the seq_k keys cached so far (0 <= seq_k <= T = ${SK}, the
 * cache's capacity). Specialized to B = ${B}, H = ${H}, D = ${D},
 * scale = ${SCALE_TEXT}; ${CAUSAL_TEXT}; mask: ${MASK_TEXT}.
 * The key cache is transposed, keys contiguous: element (b, h, d, j) at
 * k_cache[b*batch + h*head + d*row + j] (k_strides; NULL: dense
 * [B, H, D, T]), so the scores of several keys fill vector lanes. The value
 * cache is [B, H, T, D] rows (NULL: dense), q and out [B, H, Sq, D]. fp32;
 * out must not overlap the inputs; a query whose keys are all masked
 * gets 0. Tasks: (b, h), K and V read once for all Sq queries (Sq <= 8).
 * Accuracy: |out - ref| <= 2e-5 * (1 + |ref|) for inputs in [-1, 1].)tf";

constexpr llvm::StringLiteral kDecodeDecl =
    R"tf(int ${NAME}(const float *q, const transfuse_strides *q_strides,
    const float *k_cache, const transfuse_strides *k_strides,
    const float *v_cache, const transfuse_strides *v_strides, size_t seq_k,
    float *out, const transfuse_strides *out_strides,${MASK_DECL}
    const transfuse_parallel *parallel);)tf";

constexpr llvm::StringLiteral kDecodeEntry = R"tf(${STRIDES_HELPER}
namespace ${NS}::kernels {
HWY_EXPORT(DecodeAttentionRun);
}  // namespace ${NS}::kernels

extern "C" int ${NAME}(const float* q, const transfuse_strides* q_strides,
    const float* k_cache, const transfuse_strides* k_strides,
    const float* v_cache, const transfuse_strides* v_strides, size_t seq_k,
    float* out, const transfuse_strides* out_strides,${MASK_PARAMS}
    const transfuse_parallel* parallel) {
  using namespace ${NS}::kernels;
  const size_t T = ${SK};
  DecodeAttentionArgs a;
  a.batch = ${B};
  a.heads = ${H};
  a.seqQ = ${SQ};
  a.seqK = seq_k;
  a.headDim = ${D};
  a.scale = ${SCALE};
  a.causal = ${CAUSAL};
  if (!q || !k_cache || !v_cache || seq_k > T || (a.causal && seq_k < a.seqQ) ||
      !resolveTensor(q, q_strides, a.heads, a.seqQ, a.headDim, &a.q) ||
      !resolveTensor(v_cache, v_strides, a.heads, T, a.headDim, &a.v) ||
      !resolveOutput(out, out_strides, &a))
    return TRANSFUSE_ERROR_ARGUMENT;
  a.k.data = k_cache;
  if (k_strides) {
    if (k_strides->row < T) return TRANSFUSE_ERROR_ARGUMENT;
    a.k.batchStride = k_strides->batch;
    a.k.headStride = k_strides->head;
    a.k.dimStride = k_strides->row;
  } else {
    a.k.dimStride = T;
    a.k.headStride = a.headDim * T;
    a.k.batchStride = a.heads * a.headDim * T;
  }
${MASK_SET}
  ${NS}::rt::ThreadPool pool(parallel);
  HWY_DYNAMIC_DISPATCH(DecodeAttentionRun)(a, &pool);
  return TRANSFUSE_OK;
}
)tf";

constexpr llvm::StringLiteral kDecodeTest = R"tf(  const size_t B = ${B}, H = ${H}, Sq = ${SQ}, T = ${SK}, D = ${D};
  const double scale = ${SCALE};
  const bool causal = ${CAUSAL};
${REFERENCE}
  const transfuse_strides qDense = {H * Sq * D, Sq * D, D};
  const transfuse_strides kDense = {H * D * T, D * T, T};  // [B, H, D, T]
  const transfuse_strides vDense = {H * T * D, T * D, D};
  Floats q = randomFloats(B * H * Sq * D), k = randomFloats(B * H * D * T), v = randomFloats(B * H * T * D);
  const bool useLengths = ${KEY_PADDING};
  // A full cache, and one filled to about half (at least Sq keys).
  for (size_t Sk : {T, std::max<size_t>(Sq, T / 2 + 1)}) {
    if (Sk > T) continue;
    std::vector<int32_t> lengths = randomLengths(Sk);
    Floats out(B * H * Sq * D, NAN), threaded(B * H * Sq * D, NAN);
    auto call = [&](float* o, const transfuse_parallel* parallel) {
      return ::${NAME}(q.p, nullptr, k.p, nullptr, v.p, nullptr, Sk, o, nullptr,${MASK_ARGS} parallel);
    };
    expectOk(call(out.p, nullptr), "${NAME}");
    expectOk(call(threaded.p, &kParallel), "${NAME} (3 threads)");
    const std::vector<double> want = reference(q.p, qDense, k.p, kDense, true, v.p, vDense, Sk,
                                               useLengths ? lengths.data() : nullptr, nullptr);
    const std::string what = "out (seq_k " + std::to_string(Sk) + ")";
    expectNear(what.c_str(), out.p, want, 2e-5, 2e-5);
    expectSameBits(what.c_str(), out.p, threaded.p, B * H * Sq * D);
    if (Sk == T) bench([&] { call(out.p, nullptr); }, ${FLOPS});
  }
  {
    Floats out(B * H * Sq * D);
    std::vector<int32_t> lengths(B, 0);
    if (::${NAME}(q.p, nullptr, k.p, nullptr, v.p, nullptr, T + 1, out.p, nullptr,${MASK_ARGS} nullptr) !=
        TRANSFUSE_ERROR_ARGUMENT) {
      std::printf("seq_k above the capacity was not refused: FAILED\n");
      ++gFailures;
    }
  }
)tf";

// ---- add_layer_norm ----

constexpr llvm::StringLiteral kAddLayerNormDoc =
    R"tf( *   s = x + residual;  y[r,:] = (s[r,:] - mean_r) / sqrt(var_r + eps) * gamma + beta
 *
 * over rows r of width C (mean_r and the biased variance var_r of row r of
 * s). Specialized to R = ${ROWS} rows of C = ${COLS}, eps = ${EPS_TEXT}.
 * x, residual, y and sum are [R, C] row-major and contiguous, gamma and
 * beta [C] (NULL: 1 and 0); sum, when not NULL, receives s (the residual
 * stream of a pre-LN block). y and sum may alias x element for element.
 * fp32, two-pass variance; rows are split into tasks of about 32 KiB.
 * Accuracy: |y - ref| <= 1e-5 * (1 + |ref|).)tf";

constexpr llvm::StringLiteral kAddLayerNormDecl =
    R"tf(int ${NAME}(const float *x, const float *residual, const float *gamma,
    const float *beta, float *y, float *sum, const transfuse_parallel *parallel);)tf";

constexpr llvm::StringLiteral kAddLayerNormEntry = R"tf(namespace ${NS}::kernels {
HWY_EXPORT(AddLayerNormRun);
}  // namespace ${NS}::kernels

extern "C" int ${NAME}(const float* x, const float* residual, const float* gamma,
    const float* beta, float* y, float* sum, const transfuse_parallel* parallel) {
  using namespace ${NS}::kernels;
  if (!x || !residual || !y) return TRANSFUSE_ERROR_ARGUMENT;
  ${NS}::rt::ThreadPool pool(parallel);
  HWY_DYNAMIC_DISPATCH(AddLayerNormRun)(x, residual, gamma, beta, y, sum, ${ROWS}, ${COLS},
                                        ${EPS}, &pool);
  return TRANSFUSE_OK;
}
)tf";

constexpr llvm::StringLiteral kAddLayerNormTest = R"tf(  const size_t R = ${ROWS}, C = ${COLS};
  const double eps = ${EPS};
  Floats x = randomFloats(R * C), res = randomFloats(R * C), gamma = randomFloats(C), beta = randomFloats(C);
  Floats y(R * C, NAN), sum(R * C, NAN), y2(R * C, NAN), sum2(R * C, NAN);
  expectOk(::${NAME}(x.p, res.p, gamma.p, beta.p, y.p, sum.p, nullptr), "${NAME}");
  expectOk(::${NAME}(x.p, res.p, gamma.p, beta.p, y2.p, sum2.p, &kParallel), "${NAME} (3 threads)");
  std::vector<double> want(R * C), wantSum(R * C);
  for (size_t r = 0; r < R; ++r) {
    double mean = 0.0, var = 0.0;
    for (size_t c = 0; c < C; ++c) mean += wantSum[r * C + c] = double(x.p[r * C + c] + res.p[r * C + c]);
    mean /= C;
    for (size_t c = 0; c < C; ++c) var += (wantSum[r * C + c] - mean) * (wantSum[r * C + c] - mean);
    const double rstd = 1.0 / std::sqrt(var / C + eps);
    for (size_t c = 0; c < C; ++c)
      want[r * C + c] = (wantSum[r * C + c] - mean) * rstd * gamma.p[c] + beta.p[c];
  }
  expectNear("y", y.p, want, 1e-5, 1e-5);
  expectNear("sum", sum.p, wantSum, 0.0, 0.0);
  expectSameBits("y", y.p, y2.p, R * C);
  expectSameBits("sum", sum.p, sum2.p, R * C);
  if (::${NAME}(x.p, nullptr, gamma.p, beta.p, y.p, nullptr, nullptr) != TRANSFUSE_ERROR_ARGUMENT) {
    std::printf("a NULL residual was not refused: FAILED\n");
    ++gFailures;
  }
  bench([&] { ::${NAME}(x.p, res.p, gamma.p, beta.p, y.p, nullptr, nullptr); }, 0);
)tf";

// ---- softmax ----

constexpr llvm::StringLiteral kSoftmaxDoc =
    R"tf( *   y[r,j] = exp(x[r,j] - max_r) / sum_k exp(x[r,k] - max_r)
 *
 * Specialized to R = ${ROWS} rows of C = ${COLS}. x and y are [R, C]
 * row-major and contiguous; y may alias x. A row whose entries are all
 * -inf (fully masked) yields zeros, never NaN. fp32; exp is a 2^x
 * polynomial of about 2 ulp; rows are split into tasks of about 32 KiB.
 * Accuracy: |y - ref| <= 2e-6 * |ref| + 1e-9.)tf";

constexpr llvm::StringLiteral kSoftmaxDecl =
    R"tf(int ${NAME}(const float *x, float *y, const transfuse_parallel *parallel);)tf";

constexpr llvm::StringLiteral kSoftmaxEntry = R"tf(namespace ${NS}::kernels {
HWY_EXPORT(SoftmaxRun);
}  // namespace ${NS}::kernels

extern "C" int ${NAME}(const float* x, float* y, const transfuse_parallel* parallel) {
  using namespace ${NS}::kernels;
  if (!x || !y) return TRANSFUSE_ERROR_ARGUMENT;
  ${NS}::rt::ThreadPool pool(parallel);
  HWY_DYNAMIC_DISPATCH(SoftmaxRun)(x, y, ${ROWS}, ${COLS}, &pool);
  return TRANSFUSE_OK;
}
)tf";

constexpr llvm::StringLiteral kSoftmaxTest = R"tf(  const size_t R = ${ROWS}, C = ${COLS};
  Floats x = randomFloats(R * C);
  for (size_t i = 0; i < R * C; ++i) x.p[i] *= 8.0f;
  if (R > 1) std::fill_n(x.p, C, -std::numeric_limits<float>::infinity());  // a fully masked row
  Floats y(R * C, NAN), y2(R * C, NAN);
  expectOk(::${NAME}(x.p, y.p, nullptr), "${NAME}");
  expectOk(::${NAME}(x.p, y2.p, &kParallel), "${NAME} (3 threads)");
  std::vector<double> want(R * C, 0.0);
  for (size_t r = 0; r < R; ++r) {
    double mx = -std::numeric_limits<double>::infinity(), sum = 0.0;
    for (size_t c = 0; c < C; ++c) mx = std::max(mx, double(x.p[r * C + c]));
    if (mx == -std::numeric_limits<double>::infinity()) continue;
    for (size_t c = 0; c < C; ++c) sum += want[r * C + c] = std::exp(x.p[r * C + c] - mx);
    for (size_t c = 0; c < C; ++c) want[r * C + c] /= sum;
  }
  expectNear("y", y.p, want, 1e-9, 2e-6);
  expectSameBits("y", y.p, y2.p, R * C);
  bench([&] { ::${NAME}(x.p, y.p, nullptr); }, 0);
)tf";

// ---- gemm and linear ----

constexpr llvm::StringLiteral kGemmDoc =
    R"tf( *   c[i,j] = ${FORMULA}
 *   with x[i,j] = sum_k a[i,k] * b[k,j]
 *
 * Specialized to M = ${ROWS}, K = ${K}, N = ${N}; epilogue: ${EPILOGUE_TEXT}.
 * a is [M, K], b [K, N], c [M, N]${RESIDUAL_SHAPE}, row-major with leading
 * dimensions (lda >= K, ldb >= N, ldc >= N${LDR_RULE})${BIAS_SHAPE}. fp32;
 * pointers need no alignment; c must not overlap the inputs. b is packed
 * into panels on each call, into a per-thread buffer kept for the next call
 * (no allocation in steady state). The register-blocked micro-kernel
 * (Goto/BLIS style) runs over blocks of the rows and panels of b; the
 * epilogue is applied as c is stored. Sums run in k order: the same bits on
 * any thread count. Threads split c by rows or panels.)tf";

constexpr llvm::StringLiteral kLinearDoc =
    R"tf( *   y[i,j] = ${FORMULA}
 *   with x[i,j] = sum_k in[i,k] * w[j,k]      (y = in . w^T, as torch.nn.Linear)
 *
 * Specialized to M = ${ROWS} rows, K = ${K} inputs, N = ${N} outputs;
 * epilogue: ${EPILOGUE_TEXT}. The weight w is [N, K] row-major (torch's
 * layout), packed once into panels by ${NAME}_pack (on the CPU target that
 * runs; free it with ${NAME}_free); in is [M, K], y [M, N]${RESIDUAL_SHAPE},
 * row-major with leading dimensions (ldin >= K, ldy >= N${LDR_RULE})${BIAS_SHAPE}.
 * fp32; pointers need no alignment; y must not overlap the inputs. The
 * register-blocked micro-kernel (Goto/BLIS style) runs over blocks of the
 * rows and the weight's panels; the epilogue is applied as y is stored.
 * Sums run in k order: the same bits on any thread count.)tf";

constexpr llvm::StringLiteral kGemmDecl =
    R"tf(int ${NAME}(const float *a, size_t lda, const float *b, size_t ldb,${EPI_DECL}
    float *c, size_t ldc, const transfuse_parallel *parallel);)tf";

constexpr llvm::StringLiteral kLinearDecl = R"tf(typedef struct ${NAME}_weights ${NAME}_weights;

/* The weight w [N, K] (ldw >= K) packed for ${NAME}; NULL when w is NULL,
 * ldw < K or memory runs out. */
${NAME}_weights *${NAME}_pack(const float *w, size_t ldw);
void ${NAME}_free(${NAME}_weights *weights);

int ${NAME}(const float *in, size_t ldin, const ${NAME}_weights *weights,${EPI_DECL}
    float *y, size_t ldy, const transfuse_parallel *parallel);)tf";

constexpr llvm::StringLiteral kGemmEntry = R"tf(namespace ${NS}::kernels {
HWY_EXPORT(PackBRun);
HWY_EXPORT(GemmPacked);
}  // namespace ${NS}::kernels

extern "C" int ${NAME}(const float* a, size_t lda, const float* b, size_t ldb,${EPI_PARAMS}
    float* c, size_t ldc, const transfuse_parallel* parallel) {
  using namespace ${NS}::kernels;
  const size_t M = ${ROWS}, K = ${K}, N = ${N};
  if (!a || !b || !c || lda < K || ldb < N || ldc < N${EPI_CHECKS}) return TRANSFUSE_ERROR_ARGUMENT;
  GemmEpilogue epilogue;
${EPI_SET}
  thread_local PackedB packed;  // b's panels; the buffer is kept for the next call
  ${NS}::rt::ThreadPool pool(parallel);
  HWY_DYNAMIC_DISPATCH(PackBRun)(b, K, N, ldb, /*transB=*/false, &packed, &pool);
  HWY_DYNAMIC_DISPATCH(GemmPacked)(M, N, K, a, lda, /*transA=*/false, &packed, c, ldc, &epilogue, &pool);
  return TRANSFUSE_OK;
}
)tf";

constexpr llvm::StringLiteral kLinearEntry = R"tf(#include <new>

namespace ${NS}::kernels {
HWY_EXPORT(PackBRun);
HWY_EXPORT(GemmPacked);
HWY_EXPORT(GemmKernelShape);
}  // namespace ${NS}::kernels

struct ${NAME}_weights {
  ${NS}::kernels::PackedB packed;
};

extern "C" ${NAME}_weights* ${NAME}_pack(const float* w, size_t ldw) {
  using namespace ${NS}::kernels;
  if (!w || ldw < ${K}) return nullptr;
  auto* weights = new (std::nothrow) ${NAME}_weights;
  if (!weights) return nullptr;
  // B(k, j) = w[j·ldw + k]: the weight is B transposed.
  HWY_DYNAMIC_DISPATCH(PackBRun)(w, ${K}, ${N}, ldw, /*transB=*/true, &weights->packed, nullptr);
  return weights;
}

extern "C" void ${NAME}_free(${NAME}_weights* weights) { delete weights; }

extern "C" int ${NAME}(const float* in, size_t ldin, const ${NAME}_weights* weights,${EPI_PARAMS}
    float* y, size_t ldy, const transfuse_parallel* parallel) {
  using namespace ${NS}::kernels;
  const size_t M = ${ROWS}, K = ${K}, N = ${N};
  if (!in || !weights || !y || ldin < K || ldy < N${EPI_CHECKS}) return TRANSFUSE_ERROR_ARGUMENT;
  size_t mr, nr, kc, mc;
  int64_t target;
  HWY_DYNAMIC_DISPATCH(GemmKernelShape)(&mr, &nr, &kc, &mc, &target);
  if (weights->packed.nr != nr) return TRANSFUSE_ERROR_ARGUMENT;  // packed for another target
  GemmEpilogue epilogue;
${EPI_SET}
  ${NS}::rt::ThreadPool pool(parallel);
  HWY_DYNAMIC_DISPATCH(GemmPacked)(M, N, K, in, ldin, /*transA=*/false, &weights->packed, y, ldy, &epilogue, &pool);
  return TRANSFUSE_OK;
}
)tf";

// Both matrix kinds' test: lda, ldb, ldc wider than the matrices.
constexpr llvm::StringLiteral kGemmTest = R"tf(  const size_t M = ${ROWS}, K = ${K}, N = ${N};
  const size_t lda = K + 3, ldb = ${LDB}, ldc = N + 2, ldr = N + 1;
  const bool useBias = ${HAS_BIAS}, useResidual = ${HAS_RESIDUAL};
  Floats a = randomFloats(M * lda), w = randomFloats(${W_SIZE}), bias = randomFloats(N), res = randomFloats(M * ldr);
  auto b = [&](size_t k, size_t j) { return double(${W_AT}); };
${SETUP}
  Floats c(M * ldc, NAN), threaded(M * ldc, NAN);
  expectOk(${CALL_SINGLE}, "${NAME}");
  expectOk(${CALL_THREADED}, "${NAME} (3 threads)");
  const double u = 1.0 / (1 << 24);
  std::vector<double> want(M * N), tol(M * N);
  std::vector<float> got(M * N);
  for (size_t i = 0; i < M; ++i)
    for (size_t j = 0; j < N; ++j) {
      double x = 0.0, s = 0.0;
      for (size_t k = 0; k < K; ++k) {
        x += a.p[i * lda + k] * b(k, j);
        s += std::fabs(a.p[i * lda + k] * b(k, j));
      }
      if (useBias) {
        x += bias.p[j];
        s += std::fabs(bias.p[j]);
      }
      const double r = useResidual ? res.p[i * ldr + j] : 0.0;
      want[i * N + j] = ${ACTIVATION} + r;
      // Any order of K products (with the activation's slope <= 1.2), the
      // activation's own error and the last additions.
      tol[i * N + j] = 1.2 * (K + 2) * u * s + 8 * u * (std::fabs(x) + std::fabs(r)) + 1e-30;
      got[i * N + j] = c.p[i * ldc + j];
    }
  expectNear("c", got.data(), want, 0, 0, &tol);
  bool same = true, padding = true;
  for (size_t i = 0; i < M; ++i) {
    same &= std::memcmp(c.p + i * ldc, threaded.p + i * ldc, N * sizeof(float)) == 0;
    for (size_t j = N; j < ldc; ++j) padding &= std::isnan(c.p[i * ldc + j]);
  }
  if (!same) std::printf("c: threaded result differs from the single-threaded one: FAILED\n");
  if (!padding) std::printf("c: columns past N were written: FAILED\n");
  gFailures += !same + !padding;
  bench([&] { ${CALL_SINGLE}; }, 2.0 * M * N * K);
${TEARDOWN}
)tf";

const std::vector<Kind> &kinds() {
  static const std::vector<Kind> all = {
      {"attention", "fused scaled dot-product attention (flash attention, fp32)", kAttentionFlags,
       {"runtime/kernels/attention-inl.h"}, kAttentionDoc, kAttentionDecl, kAttentionEntry,
       kAttentionTest},
      {"decode_attention", "attention of a decode step over a KV cache (fp32)", kAttentionFlags,
       {"runtime/kernels/decode_attention-inl.h"}, kDecodeDoc, kDecodeDecl, kDecodeEntry,
       kDecodeTest},
      {"add_layer_norm", "residual add fused with layer normalization (fp32)",
       {"--rows", "--cols", "--epsilon"}, {"runtime/kernels/norm-inl.h"}, kAddLayerNormDoc,
       kAddLayerNormDecl, kAddLayerNormEntry, kAddLayerNormTest},
      {"linear", "a linear layer with a fused epilogue, weights packed once (fp32)", kMatrixFlags,
       {"runtime/kernels/gemm-inl.h"}, kLinearDoc, kLinearDecl, kLinearEntry, kGemmTest},
      {"gemm", "matrix product with a fused epilogue (fp32)", kMatrixFlags,
       {"runtime/kernels/gemm-inl.h"}, kGemmDoc, kGemmDecl, kGemmEntry, kGemmTest},
      {"softmax", "row softmax (fp32)", kRowFlags, {"runtime/kernels/norm-inl.h"}, kSoftmaxDoc,
       kSoftmaxDecl, kSoftmaxEntry, kSoftmaxTest},
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
llvm::Error attentionVars(const KernelExportSpec &s, bool decode, Vars &v) {
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
  v["REFERENCE"] = kAttentionReference.str();
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
  v["STRIDES_HELPER"] = substitute(kStridesHelper, v);
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
  if (spec.dtype != "f32")
    return fail("--dtype must be f32 (the kernel library's type so far), got '" + spec.dtype + "'");
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
  v["TITLE"] = kind->title.str();
  auto kindVars = [&]() -> llvm::Error {
    if (spec.kind == "attention" || spec.kind == "decode_attention")
      return attentionVars(spec, spec.kind == "decode_attention", v);
    if (spec.kind == "gemm" || spec.kind == "linear")
      return matrixVars(spec, v);
    return rowVars(spec, v);
  };
  if (llvm::Error error = kindVars())
    return std::move(error);

  std::set<std::string> done;
  std::string library;
  for (llvm::StringRef root : kind->roots)
    amalgamate(root, done, library);
  v["LIBRARY"] = renameNamespace(library, v["NS"]);
  v["DOC"] = substitute(kind->doc, v);
  v["DECL"] = substitute(kind->decl, v);
  v["ENTRY"] = substitute(kind->entry, v);
  v["BODY"] = substitute(kind->test, v);

  std::vector<ExportedFile> files;
  files.push_back({spec.name + ".h", substitute(kHeader, v)});
  files.push_back({spec.name + ".cc", substitute(kSource, v)});
  files.push_back({spec.name + "_test.cc", substitute(kTestPrelude, v)});
  return files;
}

} // namespace mlir::transfuse
