// gpu::gemm on cuBLASLt, and the strided-batched products attention uses on cuBLAS.
//
// cuBLAS(Lt) is column-major; meshtp's matrices are row-major. A row-major r×c matrix with
// leading dim ld is, read column-major, its transpose (c×r, same ld). So
//     C = op(A)·op(B)   (row-major)   ⇔   Cᵀ = op(B)ᵀ·op(A)ᵀ   (column-major)
// and cuBLASLt is called with the operands swapped: first B's storage with B's transpose
// flag, then A's with A's, for an n×m column-major result. The bias of the epilogue runs
// along the rows of that result, i.e. along the columns of C: one value per column of C.
#include <map>
#include <mutex>
#include <tuple>

#include "device/cuda_check.hpp"
#include "device/gpu_internal.hpp"
#include "device/gpu_ops.hpp"

namespace meshtp::gpu {

cudaDataType_t cuda_type(Element type) { return type == Element::kF32 ? CUDA_R_32F : CUDA_R_16BF; }

namespace {

struct LtKey {
  const void* handle;
  std::int64_t m, n, k, lda, ldb, ldc;
  int trans_a, trans_b, ab_type, c_type, epilogue;
  bool beta_zero;
  auto tie() const {
    return std::tie(handle, m, n, k, lda, ldb, ldc, trans_a, trans_b, ab_type, c_type, epilogue,
                    beta_zero);
  }
  bool operator<(const LtKey& o) const { return tie() < o.tie(); }
};

// The heuristic's first choice per shape: asking costs tens of microseconds, a training step
// multiplies the same shapes every step.
std::mutex algo_mutex;
std::map<LtKey, cublasLtMatmulAlgo_t> algo_cache;

cublasLtEpilogue_t lt_epilogue(Epilogue e) {
  switch (e) {
    case Epilogue::kNone:
      return CUBLASLT_EPILOGUE_DEFAULT;
    case Epilogue::kBias:
      return CUBLASLT_EPILOGUE_BIAS;
    case Epilogue::kBiasGelu:
      return CUBLASLT_EPILOGUE_GELU_BIAS;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

// RAII for the cuBLASLt descriptors of one call.
struct LtDescriptors {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  ~LtDescriptors() {
    if (preference != nullptr) cublasLtMatmulPreferenceDestroy(preference);
    if (c != nullptr) cublasLtMatrixLayoutDestroy(c);
    if (b != nullptr) cublasLtMatrixLayoutDestroy(b);
    if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
    if (op != nullptr) cublasLtMatmulDescDestroy(op);
  }
};

const char* name(Trans t) { return t == Trans::kNo ? "N" : "T"; }

}  // namespace

void gemm(Context& ctx, const View& a, Trans trans_a, const View& b, Trans trans_b,
          const View& c, float alpha, float beta, Epilogue epilogue, const void* bias) {
  const std::int64_t m = trans_a == Trans::kNo ? a.rows : a.cols;
  const std::int64_t k = trans_a == Trans::kNo ? a.cols : a.rows;
  const std::int64_t kb = trans_b == Trans::kNo ? b.rows : b.cols;
  const std::int64_t n = trans_b == Trans::kNo ? b.cols : b.rows;
  MESHTP_CHECK(k == kb && c.rows == m && c.cols == n,
               "gpu::gemm: op(A) {}x{} ({}) times op(B) {}x{} ({}) does not give C {}x{}", m, k,
               name(trans_a), kb, n, name(trans_b), c.rows, c.cols);
  MESHTP_CHECK(a.type == b.type, "gpu::gemm: A is {} but B is {}", to_string(a.type),
               to_string(b.type));
  MESHTP_CHECK(a.ld >= a.cols && b.ld >= b.cols && c.ld >= c.cols,
               "gpu::gemm: a leading dim is below its matrix's columns (lda {} cols {}, ldb {} "
               "cols {}, ldc {} cols {})",
               a.ld, a.cols, b.ld, b.cols, c.ld, c.cols);
  MESHTP_CHECK((epilogue == Epilogue::kNone) == (bias == nullptr),
               "gpu::gemm: an epilogue with a bias needs the bias, and only it");
  if (m == 0 || n == 0) return;

  auto* lt = static_cast<cublasLtHandle_t>(ctx.blaslt_handle());
  LtDescriptors d;
  MESHTP_CUBLAS(cublasLtMatmulDescCreate(&d.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  // Swapped operands (see the top of this file): first B, then A.
  const cublasOperation_t op_first = trans_b == Trans::kNo ? CUBLAS_OP_N : CUBLAS_OP_T;
  const cublasOperation_t op_second = trans_a == Trans::kNo ? CUBLAS_OP_N : CUBLAS_OP_T;
  MESHTP_CUBLAS(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSA, &op_first,
                                               sizeof(op_first)));
  MESHTP_CUBLAS(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSB, &op_second,
                                               sizeof(op_second)));
  const cublasLtEpilogue_t ep = lt_epilogue(epilogue);
  MESHTP_CUBLAS(
      cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof(ep)));
  if (bias != nullptr) {
    MESHTP_CUBLAS(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                                 sizeof(bias)));
    const cudaDataType_t bias_type = cuda_type(c.type);
    MESHTP_CUBLAS(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                                 &bias_type, sizeof(bias_type)));
  }
  // Stored matrices, column-major: a row-major r×c with ld is c×r with ld.
  MESHTP_CUBLAS(cublasLtMatrixLayoutCreate(&d.a, cuda_type(b.type), b.cols, b.rows, b.ld));
  MESHTP_CUBLAS(cublasLtMatrixLayoutCreate(&d.b, cuda_type(a.type), a.cols, a.rows, a.ld));
  MESHTP_CUBLAS(cublasLtMatrixLayoutCreate(&d.c, cuda_type(c.type), n, m, c.ld));

  const LtKey key{lt,
                  m,
                  n,
                  k,
                  a.ld,
                  b.ld,
                  c.ld,
                  static_cast<int>(trans_a),
                  static_cast<int>(trans_b),
                  static_cast<int>(a.type),
                  static_cast<int>(c.type),
                  static_cast<int>(epilogue),
                  beta == 0.0f};
  cublasLtMatmulAlgo_t algo;
  {
    std::lock_guard lock(algo_mutex);
    auto it = algo_cache.find(key);
    if (it == algo_cache.end()) {
      MESHTP_CUBLAS(cublasLtMatmulPreferenceCreate(&d.preference));
      const std::size_t workspace = ctx.workspace_bytes();
      MESHTP_CUBLAS(cublasLtMatmulPreferenceSetAttribute(
          d.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace)));
      cublasLtMatmulHeuristicResult_t result{};
      int found = 0;
      MESHTP_CUBLAS(cublasLtMatmulAlgoGetHeuristic(lt, d.op, d.a, d.b, d.c, d.c, d.preference, 1,
                                                   &result, &found));
      MESHTP_CHECK(found > 0,
                   "gpu::gemm: cuBLASLt has no kernel for {}x{}x{} ({}{}, {} → {}, epilogue {})", m,
                   n, k, name(trans_a), name(trans_b), to_string(a.type), to_string(c.type),
                   static_cast<int>(epilogue));
      it = algo_cache.emplace(key, result.algo).first;
    }
    algo = it->second;
  }
  MESHTP_CUBLAS(cublasLtMatmul(lt, d.op, &alpha, b.data, d.a, a.data, d.b, &beta, c.data, d.c,
                               c.data, d.c, &algo, ctx.workspace(), ctx.workspace_bytes(),
                               static_cast<cudaStream_t>(ctx.stream())));
}

void gemm_strided_batched(Context& ctx, Element type, Trans trans_a, Trans trans_b, std::int64_t m,
                          std::int64_t n, std::int64_t k, float alpha, const void* a,
                          std::int64_t lda, std::int64_t stride_a, const void* b, std::int64_t ldb,
                          std::int64_t stride_b, float beta, void* c, std::int64_t ldc,
                          std::int64_t stride_c, std::int64_t batch) {
  auto* blas = static_cast<cublasHandle_t>(ctx.blas_handle());
  const cublasOperation_t op_first = trans_b == Trans::kNo ? CUBLAS_OP_N : CUBLAS_OP_T;
  const cublasOperation_t op_second = trans_a == Trans::kNo ? CUBLAS_OP_N : CUBLAS_OP_T;
  const cudaDataType_t t = cuda_type(type);
  MESHTP_CUBLAS(cublasGemmStridedBatchedEx(
      blas, op_first, op_second, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k),
      &alpha, b, t, static_cast<int>(ldb), stride_b, a, t, static_cast<int>(lda), stride_a, &beta,
      c, t, static_cast<int>(ldc), stride_c, static_cast<int>(batch), CUBLAS_COMPUTE_32F,
      CUBLAS_GEMM_DEFAULT));
}

}  // namespace meshtp::gpu
