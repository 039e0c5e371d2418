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
    const char* env = std::getenv("TRANSFUSE_CUBLASLT");
    const char* names[] = {env && *env ? env : "libcublasLt.so.13", "libcublasLt.so.12"};
    void* lib = nullptr;
    for (const char* name : names)
      if (!lib) lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!lib) return nullptr;
    static Api a;
    bool ok = resolve(lib, "cublasLtCreate", &a.create) &&
              resolve(lib, "cublasLtMatmulDescCreate", &a.descCreate) &&
              resolve(lib, "cublasLtMatmulDescSetAttribute", &a.descSet) &&
              resolve(lib, "cublasLtMatrixLayoutCreate", &a.layoutCreate) &&
              resolve(lib, "cublasLtMatrixLayoutSetAttribute", &a.layoutSet) &&
              resolve(lib, "cublasLtMatmulPreferenceCreate", &a.prefCreate) &&
              resolve(lib, "cublasLtMatmulPreferenceDestroy", &a.prefDestroy) &&
              resolve(lib, "cublasLtMatmulAlgoGetHeuristic", &a.heuristic) &&
              resolve(lib, "cublasLtMatmul", &a.matmul);
    return ok ? &a : nullptr;
  }();
  return loaded;
}

// One product's descriptors and the algorithm the heuristic chose, built
// once per shape, device and epilogue (they are never destroyed: a model
// has a few dozen shapes).
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

using PlanKey = std::tuple<int, size_t, size_t, size_t, size_t, size_t, size_t, size_t, bool, int,
                           bool, size_t, size_t, size_t, size_t, size_t>;

std::mutex gMutex;
std::map<int, cublasLtHandle_t> gHandles;  // per device
std::map<PlanKey, Plan> gPlans;

bool check(cublasStatus_t s) { return s == CUBLAS_STATUS_SUCCESS; }

// Row-major C[M,N] = A[M,K]·B is column-major Cᵀ[N,M] = Bᵀ·Aᵀ: cuBLASLt's
// "A" is our B (op T for a [N,K] weight) and its "B" is our A; the bias is
// per row of its D, our columns.
const Plan* plan(const Api& lt, cublasLtHandle_t handle, int device, const GemmArgs& g,
                 cublasLtEpilogue_t epilogue) {
  const size_t ldr = g.ldr ? g.ldr : g.n;
  PlanKey key{device, g.m,          g.n,          g.k,         g.lda,        g.ldb,
              g.ldc,  g.residual ? ldr : 0, g.transB, int(epilogue), g.bias != nullptr,
              g.batch, g.strideA,    g.strideB,    g.strideC,   g.strideResidual};
  auto it = gPlans.find(key);
  if (it != gPlans.end()) return &it->second;
  Plan p;
  const cublasOperation_t opA = g.transB ? CUBLAS_OP_T : CUBLAS_OP_N, opB = CUBLAS_OP_N;
  bool ok = check(lt.descCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F)) &&
            check(lt.descSet(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof opA)) &&
            check(lt.descSet(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &opB, sizeof opB)) &&
            check(lt.descSet(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
  // Column-major shapes: our B as stored ([N,K] rows are columns of K, or
  // [K,N] rows are columns of N), our A as K×M, C and D as N×M.
  ok = ok && check(g.transB ? lt.layoutCreate(&p.a, CUDA_R_32F, g.k, g.n, g.ldb)
                            : lt.layoutCreate(&p.a, CUDA_R_32F, g.n, g.k, g.ldb)) &&
       check(lt.layoutCreate(&p.b, CUDA_R_32F, g.k, g.m, g.lda)) &&
       check(lt.layoutCreate(&p.c, CUDA_R_32F, g.n, g.m, g.residual ? ldr : g.ldc)) &&
       check(lt.layoutCreate(&p.d, CUDA_R_32F, g.n, g.m, g.ldc));
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
  cublasLtMatmulPreference_t pref = nullptr;
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  ok = ok && check(lt.prefCreate(&pref));  // no workspace: a plan is shared by threads
  ok = ok && check(lt.heuristic(handle, p.desc, p.a, p.b, p.c, p.d, pref, 1, &result, &found)) &&
       found > 0;
  if (pref) lt.prefDestroy(pref);
  if (!ok) return nullptr;  // what leaked is a few descriptors, once per shape
  p.algo = result.algo;
  return &gPlans.emplace(key, p).first->second;
}

}  // namespace

bool cublasLtAvailable() { return api() != nullptr; }

cudaError_t gemmCublasLt(const GemmArgs& g, cudaStream_t stream) {
  const Api* lt = api();
  if (!lt) return cudaErrorNotSupported;
  if (g.m == 0 || g.n == 0 || g.batch == 0) return cudaSuccess;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  switch (g.activation) {
    case Activation::kNone: epilogue = g.bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT; break;
    case Activation::kRelu: epilogue = g.bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU; break;
    case Activation::kGeluTanh: epilogue = g.bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU; break;
    case Activation::kGelu: return cudaErrorNotSupported;  // cuBLASLt has the tanh form only
  }
  // D = act(A·B + bias + residual) would apply the activation to the
  // residual too: with an activation, a residual is not expressible.
  if (g.residual && g.activation != Activation::kNone) return cudaErrorNotSupported;
  if (g.k == 0) return cudaErrorNotSupported;
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  std::lock_guard<std::mutex> lock(gMutex);
  cublasLtHandle_t& handle = gHandles[device];
  if (!handle && !check(lt->create(&handle))) {
    handle = nullptr;
    return cudaErrorUnknown;
  }
  const Plan* p = plan(*lt, handle, device, g, epilogue);
  if (!p) return cudaErrorNotSupported;
  if (g.bias && !check(lt->descSet(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias,
                                   sizeof g.bias)))
    return cudaErrorUnknown;
  const float alpha = 1.0f, beta = g.residual ? 1.0f : 0.0f;
  const void* c = g.residual ? static_cast<const void*>(g.residual) : g.c;
  if (!check(lt->matmul(handle, p->desc, &alpha, g.b, p->a, g.a, p->b, &beta, c, p->c, g.c, p->d,
                        &p->algo, nullptr, 0, stream)))
    return cudaErrorUnknown;
  return cudaGetLastError();
}

}  // namespace transfuse::cuda
