#include "tensor/gemm.hpp"

#include <cblas.h>

#include <algorithm>

#include <cstdlib>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/simulation.hpp"
#include "core/trace.hpp"

namespace meshtp {
namespace {

struct OpShape {
  std::int64_t rows, cols;
};

OpShape op_shape(ConstMatrixView x, Trans t) {
  return t == Trans::kNo ? OpShape{x.rows, x.cols} : OpShape{x.cols, x.rows};
}

// Shape checks shared by both implementations; returns k.
std::int64_t check_gemm(ConstMatrixView a, Trans ta, ConstMatrixView b, Trans tb,
                        MatrixView c) {
  const OpShape oa = op_shape(a, ta);
  const OpShape ob = op_shape(b, tb);
  MESHTP_CHECK(oa.cols == ob.rows && oa.rows == c.rows && ob.cols == c.cols,
               "gemm shapes do not chain: op(A) {}x{} · op(B) {}x{} → C {}x{}", oa.rows,
               oa.cols, ob.rows, ob.cols, c.rows, c.cols);
  MESHTP_CHECK(a.ld >= a.cols && b.ld >= b.cols && c.ld >= c.cols,
               "gemm leading dimension smaller than a row (lda={} cols={}, ldb={} cols={}, "
               "ldc={} cols={})",
               a.ld, a.cols, b.ld, b.cols, c.ld, c.cols);
  return oa.cols;
}

thread_local Precision operand_precision = Precision::kFp32;

// x's rows × cols (with its leading dimension) rounded to bf16 into `scratch`, packed (ld =
// cols): the bf16 operand, widened back to fp32 for sgemm.
ConstMatrixView rounded_to_bf16(ConstMatrixView x, std::vector<float>& scratch) {
  scratch.resize(static_cast<std::size_t>(x.rows * x.cols));
  if (x.contiguous()) {
    round_to_bf16(x.data, scratch.data(), x.rows * x.cols);
  } else {
    for (std::int64_t r = 0; r < x.rows; ++r) {
      round_to_bf16(x.data + r * x.ld, scratch.data() + r * x.cols, x.cols);
    }
  }
  return {scratch.data(), x.rows, x.cols, x.cols};
}

}  // namespace

ScopedGemmPrecision::ScopedGemmPrecision(Precision precision) : before_(operand_precision) {
  MESHTP_CHECK(precision != Precision::kFp16,
               "GeMM precision {} is not supported by the runtime (fp32, bf16)", name(precision));
  operand_precision = precision;
}

ScopedGemmPrecision::~ScopedGemmPrecision() { operand_precision = before_; }

Precision gemm_precision() { return operand_precision; }

Element saved_operand_element() {
  return operand_precision == Precision::kBf16 ? compute_element(Precision::kBf16) : Element::kF32;
}

void gemm(ConstMatrixView a, Trans trans_a, ConstMatrixView b, Trans trans_b, MatrixView c,
          float alpha, float beta) {
  const std::int64_t k = check_gemm(a, trans_a, b, trans_b, c);
  ComputeLedger& ledger = compute_ledger();
  ledger.gemm_calls += 1;
  const double flops = 2.0 * static_cast<double>(c.rows) * static_cast<double>(c.cols) * k;
  ledger.flops += flops;
  if (c.rows == 0 || c.cols == 0) return;
  const ScopedSpan span("gemm", SpanKind::kCompute);
  // Simulated, charged mode: the time of this shape instead of the product.
  if (simhooks::charge_gemm(static_cast<double>(c.rows), static_cast<double>(c.cols),
                            static_cast<double>(k))) {
    return;
  }
  if (operand_precision == Precision::kBf16 && k > 0) {
    thread_local std::vector<float> a16, b16;
    a = rounded_to_bf16(a, a16);
    b = rounded_to_bf16(b, b16);
  }
  // BLAS requires ld ≥ 1 even for empty operands.
  const auto ld = [](std::int64_t v) { return static_cast<blasint>(v > 0 ? v : 1); };
  cblas_sgemm(CblasRowMajor, trans_a == Trans::kYes ? CblasTrans : CblasNoTrans,
              trans_b == Trans::kYes ? CblasTrans : CblasNoTrans, static_cast<blasint>(c.rows),
              static_cast<blasint>(c.cols), static_cast<blasint>(k), alpha, a.data, ld(a.ld),
              b.data, ld(b.ld), beta, c.data, ld(c.ld));
}

void gemm_in_bands(ConstMatrixView a, Trans ta, ConstMatrixView b, Trans tb, MatrixView c,
                   float beta, std::int64_t bands, const std::function<void()>& between) {
  simhooks::charge_step_overhead();
  bands = std::clamp<std::int64_t>(bands, 1, std::max<std::int64_t>(c.rows, 1));
  for (std::int64_t p = 0; p < bands; ++p) {
    const std::int64_t r0 = c.rows * p / bands;
    const std::int64_t r1 = c.rows * (p + 1) / bands;
    const ConstMatrixView a_band =
        ta == Trans::kNo ? a.block(r0, 0, r1 - r0, a.cols) : a.block(0, r0, a.rows, r1 - r0);
    gemm(a_band, ta, b, tb, c.block(r0, 0, r1 - r0, c.cols), 1.0f, beta);
    if (p + 1 < bands && between) between();
  }
}

void gemm_reference(ConstMatrixView a, Trans trans_a, ConstMatrixView b, Trans trans_b,
                    MatrixView c, float alpha, float beta) {
  const std::int64_t k = check_gemm(a, trans_a, b, trans_b, c);
  for (std::int64_t i = 0; i < c.rows; ++i) {
    for (std::int64_t j = 0; j < c.cols; ++j) {
      double sum = 0.0;
      for (std::int64_t p = 0; p < k; ++p) {
        const float av = trans_a == Trans::kNo ? a(i, p) : a(p, i);
        const float bv = trans_b == Trans::kNo ? b(p, j) : b(j, p);
        sum += static_cast<double>(av) * bv;
      }
      // beta = 0 overwrites, as BLAS does, so NaN garbage in C does not leak through.
      const double prior = beta == 0.0f ? 0.0 : static_cast<double>(beta) * c(i, j);
      c(i, j) = static_cast<float>(alpha * sum + prior);
    }
  }
}

ComputeLedger& compute_ledger() {
  static ComputeLedger ledger;
  return ledger;
}

void set_blas_threads(int threads) {
  MESHTP_CHECK(threads >= 1, "BLAS thread count must be at least 1, got {}", threads);
  openblas_set_num_threads(threads);
}

int blas_threads_from_env() {
  const char* text = std::getenv("MESHTP_BLAS_THREADS");
  if (text == nullptr || *text == '\0') return 1;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  MESHTP_CHECK(*end == '\0' && value >= 1 && value <= 1024,
               "MESHTP_BLAS_THREADS='{}' is not a thread count between 1 and 1024", text);
  return static_cast<int>(value);
}

}  // namespace meshtp
