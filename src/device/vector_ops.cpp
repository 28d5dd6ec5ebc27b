// gpu_ops.hpp's vector reductions and scaling on cuBLAS level 1, on the compute stream.
#include <algorithm>
#include <climits>

#include "core/error.hpp"
#include "device/cuda_check.hpp"
#include "device/gpu_ops.hpp"

namespace meshtp::gpu {

namespace {

constexpr std::int64_t kMaxCall = INT_MAX;  // cuBLAS counts in int

cublasHandle_t blas(Context& ctx) { return static_cast<cublasHandle_t>(ctx.blas_handle()); }

}  // namespace

double sum_of_squares(Context& ctx, const float* x, std::int64_t n) {
  MESHTP_CHECK(n >= 0, "gpu sum_of_squares: n={} must be non-negative", n);
  double sum = 0;
  for (std::int64_t start = 0; start < n; start += kMaxCall) {
    const int count = static_cast<int>(std::min(kMaxCall, n - start));
    float norm = 0;  // host pointer mode (the handle's default): the call waits for the result
    MESHTP_CUBLAS(cublasSnrm2(blas(ctx), count, x + start, 1, &norm));
    sum += static_cast<double>(norm) * norm;
  }
  return sum;
}

void scale(Context& ctx, float* x, float alpha, std::int64_t n) {
  MESHTP_CHECK(n >= 0, "gpu scale: n={} must be non-negative", n);
  for (std::int64_t start = 0; start < n; start += kMaxCall) {
    const int count = static_cast<int>(std::min(kMaxCall, n - start));
    MESHTP_CUBLAS(cublasSscal(blas(ctx), count, &alpha, x + start, 1));
  }
}

}  // namespace meshtp::gpu
