#include "bench/local_gemm.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/stats.hpp"
#include "tensor/gemm.hpp"
#include "tensor/random.hpp"

namespace meshtp::bench {

std::vector<GemmShape> default_gemm_shapes() {
  return {{256, 256, 256},   {512, 512, 512},   {1024, 1024, 1024},
          {2048, 2048, 2048}, {4096, 1024, 1024}, {1024, 4096, 1024}};
}

LocalGemmSample time_local_gemm(const GemmShape& shape, double target_seconds) {
  const Tensor a = uniform_tensor({shape.m, shape.k}, 1);
  const Tensor b = uniform_tensor({shape.k, shape.n}, 2);
  Tensor c_meshtp({shape.m, shape.n});
  Tensor c_blas({shape.m, shape.n});
  const auto run_meshtp = [&] {
    gemm(a.matrix(), Trans::kNo, b.matrix(), Trans::kNo, c_meshtp.matrix());
  };
  const auto run_blas = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<blasint>(shape.m),
                static_cast<blasint>(shape.n), static_cast<blasint>(shape.k), 1.0f, a.data(),
                static_cast<blasint>(shape.k), b.data(), static_cast<blasint>(shape.n), 0.0f,
                c_blas.data(), static_cast<blasint>(shape.n));
  };
  run_meshtp();
  run_blas();
  MESHTP_CHECK(max_abs_diff(c_meshtp.values(), c_blas.values()) == 0.0,
               "bench gemm: meshtp::gemm and cblas_sgemm disagree on {}x{}x{}", shape.m, shape.n,
               shape.k);
  double start = now_seconds();
  run_meshtp();
  const double once = std::max(now_seconds() - start, 1e-6);
  const int iterations = std::clamp(static_cast<int>(target_seconds / (2 * once)), 3, 200);
  std::vector<double> t_meshtp;
  std::vector<double> t_blas;
  for (int i = 0; i < iterations; ++i) {
    start = now_seconds();
    run_meshtp();
    t_meshtp.push_back(now_seconds() - start);
    start = now_seconds();
    run_blas();
    t_blas.push_back(now_seconds() - start);
  }
  const double flops = 2.0 * static_cast<double>(shape.m) * shape.n * shape.k;
  LocalGemmSample s;
  s.shape = shape;
  s.iterations = iterations;
  s.meshtp_seconds = median(t_meshtp);
  s.blas_seconds = median(t_blas);
  s.meshtp_gflops = flops / s.meshtp_seconds / 1e9;
  s.blas_gflops = flops / s.blas_seconds / 1e9;
  s.ratio = s.meshtp_gflops / s.blas_gflops;
  return s;
}

}  // namespace meshtp::bench
