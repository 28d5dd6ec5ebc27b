// gpu_ops.hpp's vector reductions and scaling on cuBLAS level 1, on the compute stream.
#include <algorithm>
#include <climits>
#include <span>
#include <vector>

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

std::vector<double> sums_of_squares(Context& ctx, std::span<const std::span<const float>> vectors) {
  std::vector<std::int64_t> calls_of;  // per vector: its nrm2 calls (2³¹−1 values each)
  std::int64_t calls = 0;
  for (const auto& v : vectors) {
    const auto n = static_cast<std::int64_t>(v.size());
    calls_of.push_back((n + kMaxCall - 1) / kMaxCall);
    calls += calls_of.back();
  }
  std::vector<double> out(vectors.size(), 0.0);
  if (calls == 0) return out;
  Buffer norms(ctx, static_cast<std::size_t>(calls) * sizeof(float));
  auto* results = static_cast<float*>(norms.data());
  cublasPointerMode_t before;
  MESHTP_CUBLAS(cublasGetPointerMode(blas(ctx), &before));
  MESHTP_CUBLAS(cublasSetPointerMode(blas(ctx), CUBLAS_POINTER_MODE_DEVICE));
  std::int64_t at = 0;
  for (const auto& v : vectors) {
    const auto n = static_cast<std::int64_t>(v.size());
    for (std::int64_t start = 0; start < n; start += kMaxCall) {
      const int count = static_cast<int>(std::min(kMaxCall, n - start));
      const cublasStatus_t status =
          cublasSnrm2(blas(ctx), count, v.data() + start, 1, results + at++);
      if (status != CUBLAS_STATUS_SUCCESS) cublasSetPointerMode(blas(ctx), before);
      MESHTP_CUBLAS(status);
    }
  }
  MESHTP_CUBLAS(cublasSetPointerMode(blas(ctx), before));
  std::vector<float> host(static_cast<std::size_t>(calls));
  ctx.download(host.data(), norms.data(), host.size() * sizeof(float));
  ctx.synchronize();
  at = 0;
  for (std::size_t i = 0; i < vectors.size(); ++i) {
    for (std::int64_t c = 0; c < calls_of[i]; ++c, ++at) {
      out[i] += static_cast<double>(host[static_cast<std::size_t>(at)]) *
                host[static_cast<std::size_t>(at)];
    }
  }
  return out;
}

void scale(Context& ctx, float* x, float alpha, std::int64_t n) {
  MESHTP_CHECK(n >= 0, "gpu scale: n={} must be non-negative", n);
  for (std::int64_t start = 0; start < n; start += kMaxCall) {
    const int count = static_cast<int>(std::min(kMaxCall, n - start));
    MESHTP_CUBLAS(cublasSscal(blas(ctx), count, &alpha, x + start, 1));
  }
}

}  // namespace meshtp::gpu
