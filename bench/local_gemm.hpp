// Local GeMM benchmark: meshtp::gemm (views, shape checks, FLOP ledger) against
// cblas_sgemm called directly on the same buffers, in the same process, interleaved
// (ABAB…) so machine noise hits both alike. The framework path should cost < 5% on large
// shapes.
#pragma once

#include <cstdint>
#include <vector>

namespace meshtp::bench {

struct GemmShape {
  std::int64_t m = 0, n = 0, k = 0;
};

struct LocalGemmSample {
  GemmShape shape;
  int iterations = 0;
  double meshtp_seconds = 0.0;  // medians
  double blas_seconds = 0.0;
  double meshtp_gflops = 0.0;
  double blas_gflops = 0.0;
  double ratio = 0.0;  // meshtp GFLOP/s / direct BLAS GFLOP/s
};

std::vector<GemmShape> default_gemm_shapes();
// Validates meshtp::gemm against the direct call once (must be bitwise equal: same BLAS
// call), then times both.
LocalGemmSample time_local_gemm(const GemmShape& shape, double target_seconds = 0.5);

}  // namespace meshtp::bench
