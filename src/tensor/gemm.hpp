// Local GeMM: the one place meshtp multiplies matrices, so it is also the one place that
// knows their FLOPs (2·m·n·k each) — the hook a simulator charges instead of computing.
//
//   C = alpha · op(A) · op(B) + beta · C        op(X) = X or Xᵀ
//   op(A): m×k   op(B): k×n   C: m×n          all row-major, with leading dimensions
//
// gemm() calls CBLAS (OpenBLAS); gemm_reference() is a naive triple loop accumulating in
// double, the independent reference tests compare against.
#pragma once

#include <cstdint>

#include "tensor/tensor.hpp"

namespace meshtp {

enum class Trans { kNo, kYes };

void gemm(ConstMatrixView a, Trans trans_a, ConstMatrixView b, Trans trans_b, MatrixView c,
          float alpha = 1.0f, float beta = 0.0f);

void gemm_reference(ConstMatrixView a, Trans trans_a, ConstMatrixView b, Trans trans_b,
                    MatrixView c, float alpha = 1.0f, float beta = 0.0f);

// Totals of every gemm() call on this process since start (or the last reset).
struct ComputeLedger {
  std::int64_t gemm_calls = 0;
  double flops = 0.0;
};
ComputeLedger& compute_ledger();

// OpenBLAS threads per process. meshtp runs one rank per core, so the default (applied by
// the CLI and the tests at start-up) is 1; MESHTP_BLAS_THREADS overrides it.
void set_blas_threads(int threads);
int blas_threads_from_env();  // MESHTP_BLAS_THREADS, or 1

}  // namespace meshtp
