// Local GeMM: the one place meshtp multiplies matrices, so it is also the one place that
// knows their FLOPs (2·m·n·k each) — the hook a simulator charges instead of computing.
//
//   C = alpha · op(A) · op(B) + beta · C        op(X) = X or Xᵀ
//   op(A): m×k   op(B): k×n   C: m×n          all row-major, with leading dimensions
//
// gemm() calls CBLAS (OpenBLAS); gemm_reference() is a naive triple loop accumulating in
// double, the independent reference tests compare against.
//
// Precision (core/precision.hpp). Under a ScopedGemmPrecision(kBf16) every gemm() on this
// thread takes its operands in bf16 and keeps fp32 accumulation and output, as a GPU's bf16
// GeMM does with an fp32 C (cuBLASLt, CUBLAS_COMPUTE_32F):
//
//   C = alpha · op(bf16(A)) · op(bf16(B)) + beta · C        bf16(x) = round_to_bf16(x)
//
// On the CPU the operands are rounded into scratch copies and multiplied by sgemm: the values
// of a bf16 GeMM, computed by widening to fp32 (the products of two bf16 values are exact in
// fp32). Rounding is elementwise, so a GeMM split into blocks over ranks rounds the same
// elements the same way: a distributed bf16 GeMM equals the serial one up to fp32 summation
// order, as in fp32. gemm_reference() ignores the scope (it is the exact reference).
#pragma once

#include <cstdint>
#include <functional>

#include "core/precision.hpp"
#include "tensor/tensor.hpp"

namespace meshtp {

enum class Trans { kNo, kYes };

void gemm(ConstMatrixView a, Trans trans_a, ConstMatrixView b, Trans trans_b, MatrixView c,
          float alpha = 1.0f, float beta = 0.0f);

// C = α·op(A)·op(B) + β·C computed in `bands` bands of C's rows (clamped to 1 … C.rows),
// calling between() after every band but the last: a GeMM that lets pending communication
// progress (the 2D GeMMs poke their in-flight collectives). One step of a pipelined 2D GeMM:
// the simulated build charges its host overhead once per call (core/simulation.hpp
// charge_step_overhead); each band's GeMM charges itself.
void gemm_in_bands(ConstMatrixView a, Trans trans_a, ConstMatrixView b, Trans trans_b,
                   MatrixView c, float beta, std::int64_t bands,
                   const std::function<void()>& between);

void gemm_reference(ConstMatrixView a, Trans trans_a, ConstMatrixView b, Trans trans_b,
                    MatrixView c, float alpha = 1.0f, float beta = 0.0f);

// The operand precision of gemm() on this thread while the scope lives (kFp32 outside every
// scope); scopes nest and restore the one before. kFp16 is refused (meshtp::Error): the
// runtime does not run fp16.
class ScopedGemmPrecision {
 public:
  explicit ScopedGemmPrecision(Precision precision);
  ~ScopedGemmPrecision();
  ScopedGemmPrecision(const ScopedGemmPrecision&) = delete;
  ScopedGemmPrecision& operator=(const ScopedGemmPrecision&) = delete;

 private:
  Precision before_;
};
Precision gemm_precision();
// The element a layer built now stores its saved GeMM inputs in (model/block.hpp,
// parallel/moe.hpp): bf16 under bf16 precision — a GeMM rounds its fp32 operands to bf16
// then anyway, so the stored value is the one it multiplies — else fp32.
Element saved_operand_element();

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
