// cuBLASLt loaded at run time (CublasLt.cuh). Only its types come from the
// toolkit's header; every function is resolved by dlsym.

#include "runtime/kernels/cuda/CublasLt.cuh"

#include <cublasLt.h>
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

namespace transfuse::cuda {
namespace {

struct Api {
  decltype(&cublasLtCreate) create = nullptr;
  decltype(&cublasLtMatmulDescCreate) descCreate = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) descSet = nullptr;
  decltype(&cublasLtMatrixLayoutCreate) layoutCreate = nullptr;
  decltype(&cublasLtMatrixLayoutSetAttribute) layoutSet = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) prefCreate = nullptr;
  decltype(&cublasLtMatmulPreferenceDestroy) prefDestroy = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) prefSet = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic = nullptr;
  decltype(&cublasLtMatmul) matmul = nullptr;
};

template <class F>
bool resolve(void* lib, const char* name, F* f) {
  *f = reinterpret_cast<F>(dlsym(lib, name));
  return *f != nullptr;
}

// The library's functions, or null when it is absent (tried once).
const Api* api() {
  static const Api* loaded = [] () -> const Api* {
    // $TRANSFUSE_CUBLASLT alone when set; else the loader's path.
    const char* env = std::getenv("TRANSFUSE_CUBLASLT");
    void* lib = nullptr;
    if (env && *env) {
      lib = dlopen(env, RTLD_NOW | RTLD_LOCAL);
    } else {
      for (const char* name : {"libcublasLt.so.13", "libcublasLt.so.12"})
        if (!lib) lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    }
    if (!lib) return nullptr;
    static Api a;
    bool ok = resolve(lib, "cublasLtCreate", &a.create) &&
              resolve(lib, "cublasLtMatmulDescCreate", &a.descCreate) &&
              resolve(lib, "cublasLtMatmulDescSetAttribute", &a.descSet) &&
              resolve(lib, "cublasLtMatrixLayoutCreate", &a.layoutCreate) &&
              resolve(lib, "cublasLtMatrixLayoutSetAttribute", &a.layoutSet) &&
              resolve(lib, "cublasLtMatmulPreferenceCreate", &a.prefCreate) &&
              resolve(lib, "cublasLtMatmulPreferenceDestroy", &a.prefDestroy) &&
              resolve(lib, "cublasLtMatmulPreferenceSetAttribute", &a.prefSet) &&
              resolve(lib, "cublasLtMatmulAlgoGetHeuristic", &a.heuristic) &&
              resolve(lib, "cublasLtMatmul", &a.matmul);
    return ok ? &a : nullptr;
  }();
  return loaded;
}

// One product's descriptors and the algorithm the heuristic chose, built
// once per shape, device, epilogue and alignment (they are never destroyed:
// a model has a few dozen shapes). `usable` false: cuBLASLt found no
// algorithm, remembered so that the CUDA cores take the shape at once.
struct Plan {
  bool usable = false;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

using PlanKey = std::tuple<int, size_t, size_t, size_t, size_t, size_t, size_t, size_t, bool, bool,
                           int, bool, size_t, size_t, size_t, size_t, size_t, uint32_t, int>;

// cuBLASLt's name of a storage type.
template <class T>
constexpr cudaDataType_t dataType() {
  return sizeof(T) == sizeof(float) ? CUDA_R_32F : CUDA_R_16BF;
}

// The largest power of two up to 256 that divides every address the
// operand's matrices start at: its pointer plus k times its batch stride
// (bytes), with its leading dimension's bytes.
uint32_t alignmentOf(const void* p, size_t ld, size_t stride, size_t elemSize) {
  uint64_t bits = reinterpret_cast<uintptr_t>(p) | (ld * elemSize) | (stride * elemSize) | 256;
  return static_cast<uint32_t>(bits & (~bits + 1));  // the lowest set bit
}

// The four operands' alignments in one key (8 bits each, log2).
uint32_t alignmentKey(const uint32_t (&align)[4]) {
  uint32_t key = 0;
  for (uint32_t a : align) key = key << 8 | static_cast<uint32_t>(__builtin_ctz(a));
  return key;
}

std::mutex gMutex;
std::map<int, cublasLtHandle_t> gHandles;  // per device
std::map<PlanKey, Plan> gPlans;

bool check(cublasStatus_t s) { return s == CUBLAS_STATUS_SUCCESS; }

// Row-major C[M,N] = A[M,K]·B is column-major Cᵀ[N,M] = Bᵀ·Aᵀ: cuBLASLt's
// "A" is our B (op T for a [N,K] weight) and its "B" is our A; the bias is
// per row of its D, our columns.
template <class T>
const Plan& plan(const Api& lt, cublasLtHandle_t handle, int device, const GemmArgsOf<T>& g,
                 cublasLtEpilogue_t epilogue) {
  const size_t ldr = g.ldr ? g.ldr : g.n, size = sizeof(T);
  const cudaDataType_t type = dataType<T>();
  // cuBLASLt's A, B, C, D: our B, our A, the residual (or C), C.
  const uint32_t align[4] = {alignmentOf(g.b, g.ldb, g.strideB, size),
                             alignmentOf(g.a, g.lda, g.strideA, size),
                             g.residual ? alignmentOf(g.residual, ldr, g.strideResidual, size)
                                        : alignmentOf(g.c, g.ldc, g.strideC, size),
                             alignmentOf(g.c, g.ldc, g.strideC, size)};
  PlanKey key{device,   g.m,       g.n,           g.k,       g.lda,
              g.ldb,    g.ldc,     g.residual ? ldr : 0,     g.transA,
              g.transB, int(epilogue), g.bias != nullptr, g.batch,
              g.strideA, g.strideB, g.strideC, g.strideResidual, alignmentKey(align), int(type)};
  auto it = gPlans.find(key);
  if (it != gPlans.end()) return it->second;
  Plan p;
  const cublasOperation_t opA = g.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t opB = g.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  bool ok = check(lt.descCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F)) &&
            check(lt.descSet(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof opA)) &&
            check(lt.descSet(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &opB, sizeof opB)) &&
            check(lt.descSet(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
  // Column-major shapes, each operand as stored: our B ([N,K] rows are
  // columns of K, or [K,N] rows are columns of N), our A ([M,K] rows are
  // columns of K, or, transposed, [K,M] rows are columns of M), C and D as
  // N×M.
  ok = ok && check(g.transB ? lt.layoutCreate(&p.a, type, g.k, g.n, g.ldb)
                            : lt.layoutCreate(&p.a, type, g.n, g.k, g.ldb)) &&
       check(g.transA ? lt.layoutCreate(&p.b, type, g.m, g.k, g.lda)
                      : lt.layoutCreate(&p.b, type, g.k, g.m, g.lda)) &&
       check(lt.layoutCreate(&p.c, type, g.n, g.m, g.residual ? ldr : g.ldc)) &&
       check(lt.layoutCreate(&p.d, type, g.n, g.m, g.ldc));
  if (ok && g.batch > 1) {
    const int32_t count = static_cast<int32_t>(g.batch);
    const int64_t strides[4] = {int64_t(g.strideB), int64_t(g.strideA),
                                int64_t(g.residual ? g.strideResidual : g.strideC),
                                int64_t(g.strideC)};
    cublasLtMatrixLayout_t layouts[4] = {p.a, p.b, p.c, p.d};
    for (int i = 0; ok && i < 4; ++i)
      ok = check(lt.layoutSet(layouts[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count)) &&
           check(lt.layoutSet(layouts[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &strides[i],
                              sizeof strides[i]));
  }
  // No workspace (a plan is shared by threads); the operands' real
  // alignments, so that the algorithm chosen runs on these pointers.
  cublasLtMatmulPreference_t pref = nullptr;
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  ok = ok && check(lt.prefCreate(&pref));
  const cublasLtMatmulPreferenceAttributes_t alignments[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; ok && i < 4; ++i)
    ok = check(lt.prefSet(pref, alignments[i], &align[i], sizeof align[i]));
  ok = ok && check(lt.heuristic(handle, p.desc, p.a, p.b, p.c, p.d, pref, 1, &result, &found)) &&
       found > 0 && check(result.state);
  if (pref) lt.prefDestroy(pref);
  p.usable = ok;  // (a failed plan's descriptors leak, once per shape)
  p.algo = result.algo;
  return gPlans.emplace(key, p).first->second;
}

template <class T>
cudaError_t runCublasLt(const GemmArgsOf<T>& g, cudaStream_t stream) {
  const Api* lt = api();
  if (!lt) return cudaErrorNotSupported;
  if (g.m == 0 || g.n == 0 || g.batch == 0) return cudaSuccess;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  switch (g.activation) {
    case Activation::kNone: epilogue = g.bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT; break;
    case Activation::kRelu: epilogue = g.bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU; break;
    case Activation::kGeluTanh: epilogue = g.bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU; break;
    case Activation::kGelu: return cudaErrorNotSupported;  // cuBLASLt has the tanh form only
    case Activation::kSilu: return cudaErrorNotSupported;  // no SiLU epilogue in cuBLASLt
  }
  // D = act(A·B + bias + residual) would apply the activation to the
  // residual too: with an activation, a residual is not expressible.
  if (g.residual && g.activation != Activation::kNone) return cudaErrorNotSupported;
  if (g.k == 0) return cudaErrorNotSupported;
  // Not expressed here yet: the backward's epilogue runs on the CUDA cores.
  if (g.derivative != Activation::kNone) return cudaErrorNotSupported;
  if (g.pairs.kind != kernels::GemmPairs::Kind::kNone) return cudaErrorNotSupported;
  if (g.bias && reinterpret_cast<uintptr_t>(g.bias) % 16 != 0) return cudaErrorNotSupported;
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  std::lock_guard<std::mutex> lock(gMutex);
  cublasLtHandle_t& handle = gHandles[device];
  if (!handle && !check(lt->create(&handle))) {
    handle = nullptr;
    return cudaErrorNotSupported;
  }
  const Plan& p = plan(*lt, handle, device, g, epilogue);
  if (!p.usable) return cudaErrorNotSupported;
  // A call cuBLASLt refuses is one the CUDA cores run (it has launched
  // nothing then).
  if (g.bias && !check(lt->descSet(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias,
                                   sizeof g.bias)))
    return cudaErrorNotSupported;
  const float alpha = 1.0f, beta = g.residual ? 1.0f : 0.0f;
  const void* c = g.residual ? static_cast<const void*>(g.residual) : g.c;
  if (!check(lt->matmul(handle, p.desc, &alpha, g.b, p.a, g.a, p.b, &beta, c, p.c, g.c, p.d,
                        &p.algo, nullptr, 0, stream)))
    return cudaErrorNotSupported;
  return cudaGetLastError();
}

}  // namespace

bool cublasLtAvailable() { return api() != nullptr; }

cudaError_t gemmCublasLt(const GemmArgsOf<float>& g, cudaStream_t stream) {
  return runCublasLt(g, stream);
}
cudaError_t gemmCublasLt(const GemmArgsOf<bf16>& g, cudaStream_t stream) {
  return runCublasLt(g, stream);
}

}  // namespace transfuse::cuda
