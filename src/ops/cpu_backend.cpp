#include "ops/cpu_backend.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/error.hpp"
#include "core/op_costs.hpp"
#include "core/simulation.hpp"
#include "ops/adamw.hpp"
#include "ops/kernels.hpp"
#include "ops/ops.hpp"

namespace meshtp {

using device::Array;

namespace {

std::span<float> span_of(const Array& a, std::int64_t count, const char* what) {
  MESHTP_CHECK(count >= 0 && a.count() >= count, "cpu backend: {} has {} elements, the op needs {}",
               what, a.count(), count);
  return {device::floats(a).data(), static_cast<std::size_t>(count)};
}

}  // namespace

MatrixView host_matrix(const View& v, const char* what) {
  MESHTP_CHECK(v.type == Element::kF32, "cpu backend: {} is {}, the CPU computes on fp32 views",
               what, describe(v));
  MESHTP_CHECK(v.rows >= 0 && v.cols >= 0 && v.ld >= v.cols,
               "cpu backend: {} is {}: a leading dimension below its columns", what, describe(v));
  return {static_cast<float*>(v.data), v.rows, v.cols, v.ld};
}

CpuBackend& cpu_backend() {
  static CpuBackend backend;
  return backend;
}

namespace {

// A host event: the CPU ran every op before its call returned.
class DoneEvent final : public device::Event {
 public:
  bool done() override { return true; }
  void synchronize() override {}
};

// The fp32 values a product with a bf16 operand multiplies (a bf16 product, whatever the
// run's precision): a bf16 view (a saved GeMM input, backend.hpp) widened into `scratch`,
// which is exact, and an fp32 one rounded to bf16 into it, as tensor/gemm.hpp's bf16 GeMM
// rounds; BLAS then multiplies them as they are (ScopedGemmPrecision(kFp32)), so nothing is
// converted twice. In the simulated build's charged mode the product is charged by shape and
// never read (tensor/gemm.cpp), so nothing is converted.
ConstMatrixView bf16_operand(const View& v, std::vector<float>& scratch, const char* what) {
  MESHTP_CHECK((v.type == Element::kF32 || v.type == Element::kBF16) && v.rows >= 0 &&
                   v.cols >= 0 && v.ld >= v.cols,
               "cpu backend: {} is {}: fp32 or bf16 with a leading dimension of its columns or "
               "more",
               what, describe(v));
  if (simhooks::values_meaningless()) {
    return {static_cast<const float*>(v.data), v.rows, v.cols, v.ld};
  }
  scratch.resize(static_cast<std::size_t>(v.rows * v.cols));
  for (std::int64_t r = 0; r < v.rows; ++r) {
    float* out = scratch.data() + r * v.cols;
    if (v.type == Element::kBF16) {
      bf16_to_floats(static_cast<const std::uint16_t*>(v.data) + r * v.ld, out, v.cols);
    } else {
      round_to_bf16(static_cast<const float*>(v.data) + r * v.ld, out, v.cols);
    }
  }
  return {scratch.data(), v.rows, v.cols, v.cols};
}

bool bf16_product(const View& a, const View& b) {
  return a.type == Element::kBF16 || b.type == Element::kBF16;
}

}  // namespace

void CpuBackend::gemm(const View& c, const View& a, Trans trans_a, const View& b, Trans trans_b,
                      float alpha, float beta, device::Epilogue epilogue, const View& bias) {
  const MatrixView cm = host_matrix(c, "C");
  if (bf16_product(a, b)) {
    thread_local std::vector<float> a32, b32;
    const ScopedGemmPrecision as_given(Precision::kFp32);
    meshtp::gemm(bf16_operand(a, a32, "A"), trans_a, bf16_operand(b, b32, "B"), trans_b, cm, alpha,
                 beta);
  } else {
    meshtp::gemm(host_matrix(a, "A"), trans_a, host_matrix(b, "B"), trans_b, cm, alpha, beta);
  }
  if (epilogue == device::Epilogue::kNone) return;
  const MatrixView bm = host_matrix(bias, "the bias");
  MESHTP_CHECK(bm.rows == 1 && bm.cols == cm.cols,
               "cpu backend: the GeMM's bias is {}, C is {}: it needs fp32 1x{}", describe(bias),
               describe(c), c.cols);
  const std::span<const float> bias_values{bm.data, static_cast<std::size_t>(bm.cols)};
  if (epilogue == device::Epilogue::kBias) {
    meshtp::add_bias(cm, bias_values);
  } else {
    bias_gelu_forward(cm, cm, bias_values);
  }
}

// Between fp32 and bf16 (rounded to nearest even, core/precision.hpp), or bf16 to bf16; fp32
// to fp32 is tensor/tensor.hpp's copy.
void CpuBackend::copy(const View& dst, const View& src) {
  if (dst.type == Element::kF32 && src.type == Element::kF32) {
    meshtp::copy(host_matrix(src, "the source"), host_matrix(dst, "the destination"));
    return;
  }
  const auto two_types = [](const View& v) {
    return v.type == Element::kF32 || v.type == Element::kBF16;
  };
  MESHTP_CHECK(two_types(dst) && two_types(src) && dst.rows == src.rows && dst.cols == src.cols &&
                   dst.ld >= dst.cols && src.ld >= src.cols,
               "cpu backend: copying {} into {} (fp32 or bf16 of one shape)", describe(src),
               describe(dst));
  if (simhooks::skip_values(static_cast<std::size_t>(src.elements()) * sizeof(float))) return;
  for (std::int64_t r = 0; r < src.rows; ++r) {
    if (src.type == Element::kBF16 && dst.type == Element::kBF16) {
      std::memcpy(static_cast<std::uint16_t*>(dst.data) + r * dst.ld,
                  static_cast<const std::uint16_t*>(src.data) + r * src.ld,
                  static_cast<std::size_t>(src.cols) * sizeof(std::uint16_t));
    } else if (src.type == Element::kF32) {
      floats_to_bf16(static_cast<const float*>(src.data) + r * src.ld,
                     static_cast<std::uint16_t*>(dst.data) + r * dst.ld, src.cols);
    } else {
      bf16_to_floats(static_cast<const std::uint16_t*>(src.data) + r * src.ld,
                     static_cast<float*>(dst.data) + r * dst.ld, src.cols);
    }
  }
}

void CpuBackend::add(const View& dst, const View& src) {
  meshtp::add(host_matrix(src, "the source"), host_matrix(dst, "the destination"));
}

void CpuBackend::zero(const View& dst) {
  if (dst.type == Element::kF32) {
    meshtp::zero(host_matrix(dst, "the destination"));
    return;
  }
  MESHTP_CHECK(dst.rows >= 0 && dst.cols >= 0 && dst.ld >= dst.cols,
               "cpu backend: zeroing {}: a leading dimension below its columns", describe(dst));
  const std::size_t row_bytes = static_cast<std::size_t>(dst.cols) * element_size(dst.type);
  if (simhooks::skip_values(row_bytes * static_cast<std::size_t>(dst.rows))) return;
  for (std::int64_t r = 0; r < dst.rows; ++r) {
    std::memset(static_cast<char*>(dst.data) + r * dst.ld * element_size(dst.type), 0, row_bytes);
  }
}

void CpuBackend::residual_grad(const View& d, const View& dy) {
  residual_backward_copy(host_matrix(d, "d"), host_matrix(dy, "dy"));
}

void CpuBackend::residual(const View& sum, const View& a, const View& b) {
  meshtp::residual_forward(host_matrix(sum, "sum"), host_matrix(a, "a"), host_matrix(b, "b"));
}

namespace {
std::span<float> row_vector(const View& v, std::int64_t cols, const char* what) {
  const MatrixView m = host_matrix(v, what);
  MESHTP_CHECK(m.rows == 1 && m.cols == cols, "cpu backend: {} is {}, the op needs fp32 1x{}",
               what, describe(v), cols);
  return {m.data, static_cast<std::size_t>(cols)};
}
}  // namespace

void CpuBackend::add_bias(const View& y, const View& bias) {
  meshtp::add_bias(host_matrix(y, "y"), row_vector(bias, y.cols, "the bias"));
}

void CpuBackend::bias_grad(const View& db, const View& dy) {
  add_bias_grad(row_vector(db, dy.cols, "db"), host_matrix(dy, "dy"));
}

namespace {

// A norm's fp64 per-row sums: a 1 × count view.
std::span<double> sums_of(const View& v, std::int64_t count) {
  MESHTP_CHECK(v.type == Element::kF64 && v.rows == 1 && v.cols == count,
               "cpu backend: the norm's sums are {}, the op needs fp64 1x{}", describe(v), count);
  return {static_cast<double*>(v.data), static_cast<std::size_t>(count)};
}

bool layer_norm(layout::Norm norm) { return norm == layout::Norm::kLayerNorm; }

}  // namespace

void CpuBackend::norm_forward(layout::Norm norm, const View& y, const View& mean, const View& rstd,
                              const View& x, const View& w, const View& b) {
  const MatrixView xm = host_matrix(x, "x");
  if (layer_norm(norm)) {
    meshtp::layernorm_forward(host_matrix(y, "y"), row_vector(mean, xm.rows, "mean"),
                              row_vector(rstd, xm.rows, "rstd"), xm, row_vector(w, xm.cols, "w"),
                              row_vector(b, xm.cols, "b"));
  } else {
    meshtp::rmsnorm_forward(host_matrix(y, "y"), row_vector(rstd, xm.rows, "r"), xm,
                            row_vector(w, xm.cols, "g"));
  }
}

void CpuBackend::residual_norm_forward(layout::Norm norm, const View& sum, const View& y,
                                       const View& mean, const View& rstd, const View& a,
                                       const View& b_in, const View& w, const View& b) {
  const MatrixView sm = host_matrix(sum, "sum");
  if (layer_norm(norm)) {
    meshtp::residual_layernorm_forward(sm, host_matrix(y, "y"), row_vector(mean, sm.rows, "mean"),
                                       row_vector(rstd, sm.rows, "rstd"), host_matrix(a, "a"),
                                       host_matrix(b_in, "b_in"), row_vector(w, sm.cols, "w"),
                                       row_vector(b, sm.cols, "b"));
  } else {
    meshtp::residual_forward(sm, host_matrix(a, "a"), host_matrix(b_in, "b_in"));
    norm_forward(norm, y, mean, rstd, sum, w, b);
  }
}

void CpuBackend::norm_backward(layout::Norm norm, const View& dx, const View& dw, const View& db,
                               const View& dy, const View& x, const View& w, const View& mean,
                               const View& rstd) {
  const MatrixView xm = host_matrix(x, "x");
  if (layer_norm(norm)) {
    meshtp::layernorm_backward(host_matrix(dx, "dx"), row_vector(dw, xm.cols, "dw"),
                               row_vector(db, xm.cols, "db"), host_matrix(dy, "dy"), xm,
                               row_vector(w, xm.cols, "w"), row_vector(mean, xm.rows, "mean"),
                               row_vector(rstd, xm.rows, "rstd"));
  } else {
    meshtp::rmsnorm_backward(host_matrix(dx, "dx"), row_vector(dw, xm.cols, "dg"),
                             host_matrix(dy, "dy"), xm, row_vector(w, xm.cols, "g"),
                             row_vector(rstd, xm.rows, "r"));
  }
}

void CpuBackend::norm_forward_sums(layout::Norm norm, const View& sums, const View& x) {
  const MatrixView xm = host_matrix(x, "x");
  const std::span<double> s = sums_of(sums, device::norm_sum_count(norm, xm.rows));
  if (layer_norm(norm)) {
    layernorm_shard_forward_sums(xm, s);
  } else {
    rmsnorm_shard_forward_sums(xm, s);
  }
}

void CpuBackend::norm_forward_apply(layout::Norm norm, const View& y, const View& mean,
                                    const View& rstd, const View& x, const View& w, const View& b,
                                    const View& sums, std::int64_t c_global) {
  const MatrixView xm = host_matrix(x, "x");
  const std::span<double> s = sums_of(sums, device::norm_sum_count(norm, xm.rows));
  if (layer_norm(norm)) {
    layernorm_shard_forward_apply(
        host_matrix(y, "y"), row_vector(mean, xm.rows, "mean"), row_vector(rstd, xm.rows, "rstd"),
        xm, row_vector(w, xm.cols, "w"), row_vector(b, xm.cols, "b"), s, c_global);
  } else {
    rmsnorm_shard_forward_apply(host_matrix(y, "y"), row_vector(rstd, xm.rows, "r"), xm,
                                row_vector(w, xm.cols, "g"), s, c_global);
  }
}

void CpuBackend::norm_backward_sums(layout::Norm norm, const View& sums, const View& dw,
                                    const View& db, const View& dy, const View& x, const View& w,
                                    const View& mean, const View& rstd) {
  const MatrixView xm = host_matrix(x, "x");
  const std::span<double> s = sums_of(sums, device::norm_sum_count(norm, xm.rows));
  if (layer_norm(norm)) {
    layernorm_shard_backward_sums(s, row_vector(dw, xm.cols, "dw"), row_vector(db, xm.cols, "db"),
                                  host_matrix(dy, "dy"), xm, row_vector(w, xm.cols, "w"),
                                  row_vector(mean, xm.rows, "mean"),
                                  row_vector(rstd, xm.rows, "rstd"));
  } else {
    rmsnorm_shard_backward_sums(s, row_vector(dw, xm.cols, "dg"), host_matrix(dy, "dy"), xm,
                                row_vector(w, xm.cols, "g"), row_vector(rstd, xm.rows, "r"));
  }
}

void CpuBackend::norm_backward_apply(layout::Norm norm, const View& dx, const View& dy,
                                     const View& x, const View& w, const View& mean,
                                     const View& rstd, const View& sums, std::int64_t c_global) {
  const MatrixView xm = host_matrix(x, "x");
  const std::span<double> s = sums_of(sums, device::norm_sum_count(norm, xm.rows));
  if (layer_norm(norm)) {
    layernorm_shard_backward_apply(host_matrix(dx, "dx"), host_matrix(dy, "dy"), xm,
                                   row_vector(w, xm.cols, "w"), row_vector(mean, xm.rows, "mean"),
                                   row_vector(rstd, xm.rows, "rstd"), s, c_global);
  } else {
    rmsnorm_shard_backward_apply(host_matrix(dx, "dx"), host_matrix(dy, "dy"), xm,
                                 row_vector(w, xm.cols, "g"), row_vector(rstd, xm.rows, "r"), s,
                                 c_global);
  }
}

void CpuBackend::embedding_shard_forward(const View& out, std::span<const std::int32_t> tokens,
                                         const View& wte, std::int64_t begin) {
  meshtp::embedding_shard_forward(host_matrix(out, "out"), tokens, host_matrix(wte, "wte"), begin);
}

void CpuBackend::embedding_shard_backward(const View& dwte, const View& dout,
                                          std::span<const std::int32_t> tokens,
                                          std::int64_t begin) {
  meshtp::embedding_shard_backward(host_matrix(dwte, "dwte"), host_matrix(dout, "dout"), tokens,
                                   begin);
}

void CpuBackend::cross_entropy_shard_max(const View& logits, const View& row_max,
                                         std::int64_t begin, std::int64_t vocab_real) {
  const MatrixView l = host_matrix(logits, "the logits");
  meshtp::cross_entropy_shard_max(l, row_vector(row_max, l.rows, "row_max"), begin, vocab_real);
}

void CpuBackend::cross_entropy_shard_sums(const View& sums, const View& logits, const View& row_max,
                                          std::span<const std::int32_t> targets, std::int64_t begin,
                                          std::int64_t vocab_real) {
  const MatrixView l = host_matrix(logits, "the logits");
  meshtp::cross_entropy_shard_sums(row_vector(sums, 2 * l.rows, "sums"), l,
                                   row_vector(row_max, l.rows, "row_max"), targets, begin,
                                   vocab_real);
}

double CpuBackend::cross_entropy_shard_loss(const View& lse, const View& row_max,
                                            const View& sums) {
  return meshtp::cross_entropy_shard_loss(row_vector(lse, lse.cols, "lse"),
                                          row_vector(row_max, lse.cols, "row_max"),
                                          row_vector(sums, 2 * lse.cols, "sums"));
}

void CpuBackend::cross_entropy_shard_backward(const View& logits, const View& lse,
                                              std::span<const std::int32_t> targets,
                                              std::int64_t begin, float scale) {
  const MatrixView l = host_matrix(logits, "the logits");
  meshtp::cross_entropy_shard_backward(l, row_vector(lse, l.rows, "lse"), targets, begin, scale);
}

namespace {

// A packed fp32 vector view of at least `count` elements (scratch, saved statistics), its
// first `count` as a span.
std::span<float> floats_of(const View& v, std::int64_t count, const char* what) {
  MESHTP_CHECK(v.type == Element::kF32 && v.contiguous() && v.elements() >= count,
               "cpu backend: {} is {}, the op needs {} packed fp32 elements", what, describe(v),
               count);
  return {static_cast<float*>(v.data), static_cast<std::size_t>(count)};
}

}  // namespace

void CpuBackend::gelu_forward(const View& y, const View& x) {
  meshtp::gelu_forward(host_matrix(y, "y"), host_matrix(x, "x"));
}

void CpuBackend::bias_gelu(const View& y, const View& pre, const View& bias) {
  const MatrixView p = host_matrix(pre, "pre");
  bias_gelu_forward(host_matrix(y, "y"), p, row_vector(bias, p.cols, "the bias"));
}

namespace {

// op(dx, x, dy) with x fp32, or bf16 (a block's stored FC1 output) widened a row at a time
// into a scratch row: exact, and no second copy of x.
template <class Op>
void with_fp32_input(const View& dx, const View& x, const View& dy, Op op) {
  if (x.type == Element::kF32) {
    op(host_matrix(dx, "dx"), ConstMatrixView(host_matrix(x, "x")),
       ConstMatrixView(host_matrix(dy, "dy")));
    return;
  }
  MESHTP_CHECK(x.type == Element::kBF16 && x.ld >= x.cols && dx.rows == x.rows && dy.rows == x.rows,
               "cpu backend: the activation's input is {} for dx {} and dy {} (fp32 or bf16 of "
               "their rows)",
               describe(x), describe(dx), describe(dy));
  const MatrixView d = host_matrix(dx, "dx");
  const ConstMatrixView g = host_matrix(dy, "dy");
  thread_local std::vector<float> row;
  row.resize(static_cast<std::size_t>(x.cols));
  for (std::int64_t r = 0; r < x.rows; ++r) {
    if (!simhooks::values_meaningless()) {
      bf16_to_floats(static_cast<const std::uint16_t*>(x.data) + r * x.ld, row.data(), x.cols);
    }
    op(d.block(r, 0, 1, d.cols), ConstMatrixView{row.data(), 1, x.cols, x.cols},
       g.block(r, 0, 1, g.cols));
  }
}

}  // namespace

void CpuBackend::gelu_backward(const View& dx, const View& x, const View& dy) {
  with_fp32_input(dx, x, dy, [](MatrixView d, ConstMatrixView in, ConstMatrixView g) {
    meshtp::gelu_backward(d, in, g);
  });
}

void CpuBackend::swiglu_forward(const View& y, const View& x) {
  meshtp::swiglu_forward(host_matrix(y, "y"), host_matrix(x, "x"));
}

void CpuBackend::swiglu_backward(const View& dx, const View& x, const View& dy) {
  with_fp32_input(dx, x, dy, [](MatrixView d, ConstMatrixView in, ConstMatrixView g) {
    meshtp::swiglu_backward(d, in, g);
  });
}

void CpuBackend::attention_core_forward(const View& out, const View& att, const View& qkv,
                                        std::int64_t b, std::int64_t t, std::int64_t nh) {
  meshtp::attention_forward(host_matrix(out, "out"),
                            floats_of(att, attention_att_size(b, t, nh), "att"),
                            host_matrix(qkv, "qkv"), b, t, nh);
}

void CpuBackend::attention_core_backward(const View& dqkv, const View& scratch, const View& dout,
                                         const View& qkv, const View& att, std::int64_t b,
                                         std::int64_t t, std::int64_t nh) {
  meshtp::attention_backward(host_matrix(dqkv, "dqkv"),
                             floats_of(scratch, attention_scratch_size(t), "the scratch"),
                             host_matrix(dout, "dout"), host_matrix(qkv, "qkv"),
                             floats_of(att, attention_att_size(b, t, nh), "att"), b, t, nh);
}

std::int64_t CpuBackend::flash_attention_scratch(const FlashAttention& a, std::int64_t tq,
                                                 std::int64_t tk, std::int64_t hd) const {
  return flash_attention_scratch_size(a, tq, tk, hd);
}

namespace {

// Tq, Tk and HD of one fused call's views (rows B·Tq and B·Tk), checked to divide.
struct FlashSizes {
  std::int64_t tq, tk, hd;
};
FlashSizes flash_sizes(const View& q, const View& k, const FlashAttention& a) {
  MESHTP_CHECK(a.batch > 0 && a.heads > 0 && q.rows % a.batch == 0 && k.rows % a.batch == 0 &&
                   q.cols % a.heads == 0,
               "cpu backend: fused attention of B={} sequences and NH={} heads over q {} and k {}",
               a.batch, a.heads, describe(q), describe(k));
  return {q.rows / a.batch, k.rows / a.batch, q.cols / a.heads};
}

}  // namespace

void CpuBackend::flash_attention_forward(const View& out, const View& lse, const View& scratch,
                                         const View& q, const View& k, const View& v,
                                         const FlashAttention& a) {
  const FlashSizes n = flash_sizes(q, k, a);
  meshtp::flash_attention_forward(
      host_matrix(out, "out"), floats_of(lse, a.batch * a.heads * n.tq, "lse"),
      floats_of(scratch, flash_attention_scratch(a, n.tq, n.tk, n.hd), "the scratch"),
      host_matrix(q, "q"), host_matrix(k, "k"), host_matrix(v, "v"), a);
}

void CpuBackend::flash_attention_backward(const View& dq, const View& dk, const View& dv,
                                          const View& scratch, const View& dout, const View& q,
                                          const View& k, const View& v, const View& out,
                                          const View& lse, const FlashAttention& a) {
  const FlashSizes n = flash_sizes(q, k, a);
  meshtp::flash_attention_backward(
      host_matrix(dq, "dq"), host_matrix(dk, "dk"), host_matrix(dv, "dv"),
      floats_of(scratch, flash_attention_scratch(a, n.tq, n.tk, n.hd), "the scratch"),
      host_matrix(dout, "dout"), host_matrix(q, "q"), host_matrix(k, "k"), host_matrix(v, "v"),
      host_matrix(out, "out"), floats_of(lse, a.batch * a.heads * n.tq, "lse"), a);
}

void CpuBackend::flash_attention_merge(const View& out, const View& lse, const View& part,
                                       const View& part_lse, const FlashAttention& a) {
  const std::int64_t n = a.batch > 0 && a.heads > 0 ? out.rows * a.heads : 0;
  meshtp::flash_attention_merge(host_matrix(out, "out"), floats_of(lse, n, "lse"),
                                host_matrix(part, "the partial out"),
                                floats_of(part_lse, n, "the partial lse"), a);
}

// The rows move on the host, each a copy or an axpy of `cols` floats. In the simulated build's
// charged mode they are data movements: charged by the bytes they touch, not run (simulation.hpp).
void CpuBackend::gather_rows(const View& dst, const View& src, std::span<const std::int64_t> index,
                             std::span<const float> scale) {
  device::check_row_index("gather_rows", dst, src, index, scale);
  const MatrixView d = host_matrix(dst, "dst"), s = host_matrix(src, "src");
  if (simhooks::charge_bytes(2.0 * static_cast<double>(d.rows * d.cols) * sizeof(float))) return;
  for (std::int64_t i = 0; i < d.rows; ++i) {
    const float f = scale.empty() ? 1.0f : scale[static_cast<std::size_t>(i)];
    const float* from = &s(index[static_cast<std::size_t>(i)], 0);
    float* to = &d(i, 0);
    for (std::int64_t c = 0; c < d.cols; ++c) to[c] = f * from[c];
  }
}

void CpuBackend::scatter_add_rows(const View& dst, const View& src,
                                  std::span<const std::int64_t> index,
                                  std::span<const float> scale) {
  device::check_row_index("scatter_add_rows", src, dst, index, scale);
  const MatrixView d = host_matrix(dst, "dst"), s = host_matrix(src, "src");
  if (simhooks::charge_bytes(3.0 * static_cast<double>(s.rows * s.cols) * sizeof(float))) return;
  for (std::int64_t i = 0; i < s.rows; ++i) {
    const float f = scale.empty() ? 1.0f : scale[static_cast<std::size_t>(i)];
    const float* from = &s(i, 0);
    float* to = &d(index[static_cast<std::size_t>(i)], 0);
    for (std::int64_t c = 0; c < s.cols; ++c) to[c] += f * from[c];
  }
}

std::vector<float> CpuBackend::row_dots(const View& a, std::span<const std::int64_t> index,
                                        const View& b) {
  device::check_row_index("row_dots", b, a, index, {});
  const MatrixView am = host_matrix(a, "a"), bm = host_matrix(b, "b");
  std::vector<float> out(static_cast<std::size_t>(bm.rows), 0.0f);
  if (simhooks::charge_bytes(2.0 * static_cast<double>(bm.rows * bm.cols) * sizeof(float))) {
    return out;
  }
  for (std::int64_t i = 0; i < bm.rows; ++i) {
    const float* x = &am(index[static_cast<std::size_t>(i)], 0);
    const float* y = &bm(i, 0);
    double sum = 0;  // in double, as ops/moe.hpp's combine backward
    for (std::int64_t c = 0; c < bm.cols; ++c) sum += static_cast<double>(x[c]) * y[c];
    out[static_cast<std::size_t>(i)] = static_cast<float>(sum);
  }
  return out;
}

void CpuBackend::rope(const View& x, const View& cos_sin, std::int64_t batch, std::int64_t heads,
                      bool backward) {
  const MatrixView m = host_matrix(x, "x");
  const MatrixView table = host_matrix(cos_sin, "the rope table");
  if (backward) {
    rope_backward(m, table, batch, heads);
  } else {
    rope_forward(m, table, batch, heads);
  }
}

void CpuBackend::copy_blocks(std::span<const View> dst, std::span<const View> src) {
  MESHTP_CHECK(dst.size() == src.size(), "cpu backend: {} destination blocks for {} sources",
               dst.size(), src.size());
  const bool fp32 = std::ranges::all_of(src, [](const View& v) { return v.type == Element::kF32; });
  if (fp32) {
    std::vector<ConstMatrixView> from;
    std::vector<MatrixView> to;
    from.reserve(src.size());
    to.reserve(dst.size());
    for (std::size_t i = 0; i < src.size(); ++i) {
      from.push_back(host_matrix(src[i], "a source block"));
      to.push_back(host_matrix(dst[i], "a destination block"));
    }
    meshtp::copy_blocks(from, to);
    return;
  }
  // Blocks of another element (a 2D GeMM's bf16 operands): row by row, bytes as they are.
  std::size_t bytes = 0;
  for (std::size_t i = 0; i < src.size(); ++i) {
    MESHTP_CHECK(src[i].type == dst[i].type && src[i].rows == dst[i].rows &&
                     src[i].cols == dst[i].cols && src[i].ld >= src[i].cols &&
                     dst[i].ld >= dst[i].cols,
                 "cpu backend: block {} is {} into {} (one element type and shape)", i,
                 describe(src[i]), describe(dst[i]));
    bytes += static_cast<std::size_t>(src[i].elements()) * element_size(src[i].type);
  }
  if (simhooks::skip_values(bytes)) return;
  for (std::size_t i = 0; i < src.size(); ++i) {
    const std::size_t e = element_size(src[i].type);
    for (std::int64_t r = 0; r < src[i].rows; ++r) {
      std::memcpy(static_cast<std::byte*>(dst[i].data) + r * dst[i].ld * e,
                  static_cast<const std::byte*>(src[i].data) + r * src[i].ld * e,
                  static_cast<std::size_t>(src[i].cols) * e);
    }
  }
}

void CpuBackend::gemm_in_bands(const View& c, const View& a, Trans trans_a, const View& b,
                               Trans trans_b, float beta, int bands,
                               const std::function<void()>& between) {
  if (bf16_product(a, b)) {
    thread_local std::vector<float> a32, b32;
    const ScopedGemmPrecision as_given(Precision::kFp32);
    meshtp::gemm_in_bands(bf16_operand(a, a32, "A"), trans_a, bf16_operand(b, b32, "B"), trans_b,
                          host_matrix(c, "C"), beta, bands, between);
    return;
  }
  meshtp::gemm_in_bands(host_matrix(a, "A"), trans_a, host_matrix(b, "B"), trans_b,
                        host_matrix(c, "C"), beta, bands, between);
}

std::shared_ptr<device::Event> CpuBackend::record() { return std::make_shared<DoneEvent>(); }

void CpuBackend::wait(device::Event& event) {
  MESHTP_CHECK(event.done(), "cpu backend: waiting for an event that is not done");
}

Array CpuBackend::alloc(std::int64_t count, Element type) {
  MESHTP_CHECK(type == Element::kF32 || type == Element::kF64 || type == Element::kBF16,
               "cpu backend: arrays are fp32, fp64 (a norm's sums) or bf16 (stored GeMM "
               "operands), not {}",
               to_string(type));
  MESHTP_CHECK(count >= 0, "cpu backend: cannot allocate {} elements", count);
  // Tensor storage: counted by tensor/memory.hpp (what `bench rank` measures) and placed by
  // the simulation's allocator; uninitialised, as the interface says. An fp64 element is two
  // floats' room, two bf16 elements one float's (rounded up; the storage is aligned as
  // operator new aligns, enough for a double).
  const std::int64_t bytes = count * static_cast<std::int64_t>(element_size(type));
  const std::int64_t floats_needed = (bytes + 3) / 4;
  auto storage =
      std::make_shared<Storage>(static_cast<std::size_t>(std::max<std::int64_t>(floats_needed, 1)));
  std::shared_ptr<void> data(storage, storage->data());  // owns the storage, points at its data
  return Array(std::move(data), type, count);
}

// Whole arrays are data movements like the views' copy and zero (tensor/tensor.hpp): skipped
// in the simulated build's charged mode, so a large buffer's reserved pages stay untouched.
void CpuBackend::zero(Array& a) {
  const std::size_t bytes = static_cast<std::size_t>(a.count()) * element_size(a.type());
  if (simhooks::skip_values(bytes)) return;
  std::memset(a.data(), 0, bytes);
}

namespace {
void check_fp32(const Array& a, const char* what) {
  MESHTP_CHECK(a.type() == Element::kF32, "cpu backend: {} an {} array: only fp32 ones", what,
               to_string(a.type()));
}
}  // namespace

// fp32 values into and out of fp32 or bf16 arrays (rounded to nearest even into bf16).
void CpuBackend::upload(Array& a, std::span<const float> values) {
  MESHTP_CHECK(static_cast<std::int64_t>(values.size()) == a.count(),
               "cpu backend: uploading {} values into an array of {}", values.size(), a.count());
  if (a.type() == Element::kBF16) {
    copy(a.view(1, a.count()),
         View::packed(const_cast<float*>(values.data()), Element::kF32, 1, a.count()));
    return;
  }
  check_fp32(a, "uploading fp32 values into");
  std::copy(values.begin(), values.end(), device::floats(a).data());
}

std::vector<float> CpuBackend::download(const Array& a) {
  if (a.type() == Element::kBF16) {
    std::vector<float> out(static_cast<std::size_t>(a.count()));
    copy(View::packed(out.data(), Element::kF32, 1, a.count()), a.view(1, a.count()));
    return out;
  }
  check_fp32(a, "downloading fp32 values from");
  return {device::floats(a).data(), device::floats(a).data() + a.count()};
}

void CpuBackend::copy(Array& dst, const Array& src) {
  MESHTP_CHECK(
      dst.count() == src.count() && (dst.type() == src.type() ||
                                     (dst.type() != Element::kF64 && src.type() != Element::kF64)),
      "cpu backend: copying {} {} elements into {} {}", src.count(), to_string(src.type()),
      dst.count(), to_string(dst.type()));
  if (dst.type() != src.type()) {  // fp32 ⇄ bf16
    copy(dst.view(1, dst.count()), src.view(1, src.count()));
    return;
  }
  const std::size_t bytes = static_cast<std::size_t>(src.count()) * element_size(src.type());
  if (simhooks::skip_values(bytes)) return;
  std::memcpy(dst.data(), src.data(), bytes);
}

// Gradient clipping's halves. Simulated build, charged mode: one pass over the gradient in
// simulated time each (op_costs: the norm reads it, the scale reads and writes it), a sum of 0.
double CpuBackend::sum_of_squares(const Array& a) {
  const std::span<float> g = span_of(a, a.count(), "a");
  if (simhooks::charge_fp32_bytes(
          op_costs::bytes(static_cast<double>(g.size()), op_costs::kGradNormTouches))) {
    return 0.0;
  }
  return kernels::fast().moments(g.data(), a.count()).second;
}

void CpuBackend::scale(Array& a, float alpha) {
  const std::span<float> g = span_of(a, a.count(), "a");
  if (simhooks::charge_fp32_bytes(
          op_costs::bytes(static_cast<double>(g.size()), op_costs::kClipTouches))) {
    return;
  }
  kernels::fast().scale(g.data(), a.count(), alpha);
}

void CpuBackend::adamw_update(std::span<const device::AdamWParam> params, const AdamWStep& step) {
  for (const device::AdamWParam& t : params) {
    const std::int64_t n = t.p.count();
    meshtp::adamw_update(span_of(t.p, n, "p"), span_of(t.g, n, "g"), span_of(t.m, n, "m"),
                         span_of(t.v, n, "v"), step);
    if (!t.p_compute.empty() && t.p_compute.data() != t.p.data()) {
      Array compute = t.p_compute;
      copy(compute, t.p);
    }
  }
}

std::int64_t CpuBackend::attention_scratch(std::int64_t, std::int64_t t, std::int64_t) const {
  return attention_scratch_size(t);
}

}  // namespace meshtp
