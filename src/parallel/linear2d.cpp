#include "parallel/linear2d.hpp"

#include "ops/cpu_backend.hpp"

#include "core/error.hpp"

namespace meshtp::parallel {
namespace {

bool column_first(const Linear2DSpec& s) { return s.kind == LinearKind::kColumnFirst; }

void check_layout(const char* what, const ChunkedMatrix& m, const ChunkedLayout& expected) {
  const ChunkedLayout& l = m.layout();
  MESHTP_CHECK(l == expected && m.data() != nullptr,
               "Linear2D: {} is {} chunks × [{}, {}] in {} pieces, expected {} × [{}, {}] in {}",
               what, l.chunks, l.chunk_rows, l.cols, l.pieces, expected.chunks,
               expected.chunk_rows, expected.cols, expected.pieces);
}

}  // namespace

void validate(const Linear2DSpec& s, const std::vector<int>& mesh_shape) {
  MESHTP_CHECK(mesh_shape.size() == 2, "a 2-D linear needs a 2-D mesh, got {} dims",
               mesh_shape.size());
  const int d1 = mesh_shape[0], d2 = mesh_shape[1];
  const auto K = s.in_features, M = s.out_features;
  MESHTP_CHECK(K > 0 && M > 0 && s.rows > 0, "linear in={} out={} rows={} must be positive", K,
               M, s.rows);
  MESHTP_CHECK(s.chunks >= 1 && s.rows % s.chunks == 0,
               "rows={} is not divisible by chunks={}", s.rows, s.chunks);
  // Column-first splits out over d1 and in over d2; row-first the other way round.
  const int out_parts = column_first(s) ? d1 : d2;
  const int in_parts = column_first(s) ? d2 : d1;
  MESHTP_CHECK(M % out_parts == 0, "out features {} not divisible by mesh dim {} (size {})", M,
               column_first(s) ? 0 : 1, out_parts);
  MESHTP_CHECK(K % in_parts == 0, "in features {} not divisible by mesh dim {} (size {})", K,
               column_first(s) ? 1 : 0, in_parts);
  if (s.scatter_output) {
    MESHTP_CHECK(column_first(s), "scatter_output is a column-first variant");
    MESHTP_CHECK((M / d1) % d2 == 0,
                 "out features {} not divisible by d1·d2={} to scatter over mesh dim 1", M,
                 d1 * d2);
  }
  if (s.gather_input) {
    MESHTP_CHECK(!column_first(s), "gather_input is a row-first variant");
    MESHTP_CHECK((K / d1) % d2 == 0,
                 "in features {} not divisible by d1·d2={} to gather over mesh dim 1", K, d1 * d2);
  }
  if (s.sequence_parallel) {
    MESHTP_CHECK(d2 == 1, "sequence parallelism runs on a mesh (N, 1), got {}x{}", d1, d2);
    MESHTP_CHECK((s.rows / s.chunks) % d1 == 0,
                 "sequence parallelism: chunk rows {} not divisible by N={}",
                 s.rows / s.chunks, d1);
    MESHTP_CHECK(!s.scatter_output && !s.gather_input,
                 "sequence parallelism with scattered heads is not a (N, 1) layout");
  }
}

Linear2D::Linear2D(const mesh::DeviceMesh& mesh, const Linear2DSpec& spec)
    : Linear2D(mesh, spec, cpu_backend()) {}

Linear2D::Linear2D(const mesh::DeviceMesh& mesh, const Linear2DSpec& spec,
                   device::Backend& backend)
    : backend_(&backend), spec_(spec) {
  validate(spec, mesh.shape());
  d1_ = mesh.size(0);
  d2_ = mesh.size(1);
  c1_ = mesh.coord(1);
  const bool cf = column_first(spec);
  k_local_ = spec.in_features / (cf ? d2_ : d1_);
  m_local_ = spec.out_features / (cf ? d1_ : d2_);
  chunk_rows_ = spec.rows / spec.chunks;
  const auto* dim0 = &mesh.dim_comm(0);
  const auto* dim1 = &mesh.dim_comm(1);
  const int c = spec.chunks;
  using K = CollectiveKind;
  const bool sp = spec.sequence_parallel;
  if (cf) {
    gather_input_ = ChunkedCollective(sp ? K::kAllGather : K::kNone, dim0, c);
    reduce_output_ =
        ChunkedCollective(spec.scatter_output ? K::kReduceScatter : K::kAllReduce, dim1, c);
    gather_grad_ = ChunkedCollective(spec.scatter_output ? K::kAllGather : K::kNone, dim1, c);
    reduce_grad_ = ChunkedCollective(sp ? K::kReduceScatter : K::kAllReduce, dim0, c);
  } else {
    gather_input_ = ChunkedCollective(spec.gather_input ? K::kAllGather : K::kNone, dim1, c);
    reduce_output_ = ChunkedCollective(sp ? K::kReduceScatter : K::kAllReduce, dim0, c);
    gather_grad_ = ChunkedCollective(sp ? K::kAllGather : K::kNone, dim0, c);
    reduce_grad_ =
        ChunkedCollective(spec.gather_input ? K::kReduceScatter : K::kAllReduce, dim1, c);
  }
}

ChunkedLayout Linear2D::x_layout() const {
  const int c = spec_.chunks;
  if (spec_.sequence_parallel && column_first(spec_)) {
    return {chunk_rows_ / d1_, k_local_, c, 1};
  }
  if (spec_.gather_input) return {chunk_rows_, k_local_ / d2_, c, 1};
  return {chunk_rows_, k_local_, c, 1};
}

ChunkedLayout Linear2D::xg_layout() const {
  return {chunk_rows_, k_local_, spec_.chunks, in_pieces()};
}

ChunkedLayout Linear2D::yp_layout() const {
  return {chunk_rows_, m_local_, spec_.chunks, out_pieces()};
}

ChunkedLayout Linear2D::y_layout() const {
  const int c = spec_.chunks;
  if (spec_.sequence_parallel && !column_first(spec_)) return {chunk_rows_ / d1_, m_local_, c, 1};
  if (spec_.scatter_output) return {chunk_rows_, m_local_ / d2_, c, 1};
  return {chunk_rows_, m_local_, c, 1};
}

void Linear2D::bind(const View& w, const View& b, const View& dw, const View& db) {
  // No gradients (both empty): a forward-only binding (ZeRO ≥ 2, train/zero.hpp). No bias
  // (b and db empty): a linear without one (SwiGLU models', layout/model_shape.hpp).
  const std::int64_t wn = m_local_ * k_local_, bias = b.data == nullptr ? 0 : m_local_;
  const bool grads = dw.elements() == wn && db.elements() == bias;
  const bool none = dw.data == nullptr && db.data == nullptr;
  MESHTP_CHECK(w.elements() == wn && b.elements() == bias && (grads || none),
               "Linear2D::bind: W {} / dW {} values (expected {}), b {} / db {} (expected {})",
               w.elements(), dw.elements(), wn, b.elements(), db.elements(), m_local_);
  const auto packed = [](const View& v, std::int64_t rows, std::int64_t cols) {
    return v.data == nullptr ? View{} : View::packed(v.data, v.type, rows, cols);
  };
  w_ = packed(w, m_local_, k_local_);
  b_ = packed(b, 1, m_local_);
  dw_ = packed(dw, m_local_, k_local_);
  db_ = packed(db, 1, m_local_);
}

void Linear2D::bind(std::span<const float> w, std::span<const float> b, std::span<float> dw,
                    std::span<float> db) {
  const auto view = [](std::span<const float> s) {
    return s.empty() ? View{}
                     : View::packed(const_cast<float*>(s.data()), Element::kF32, 1,
                                    static_cast<std::int64_t>(s.size()));
  };
  bind(view(w), view(b), view(dw), view(db));
}

View Linear2D::w_block(int jy, int jx) const {
  const std::int64_t mp = m_local_ / out_pieces(), kp = k_local_ / in_pieces();
  return w_.block(jy * mp, jx * kp, mp, kp);
}

View Linear2D::dw_block(int jy, int jx) const {
  const std::int64_t mp = m_local_ / out_pieces(), kp = k_local_ / in_pieces();
  return dw_.block(jy * mp, jx * kp, mp, kp);
}

void Linear2D::gather_input_start(int i, const ChunkedMatrix& x, const ChunkedMatrix& xg) {
  check_layout("x", x, x_layout());
  check_layout("x_g", xg, xg_layout());
  gather_input_.start(i, x.chunk_message(i), xg.chunk_message(i));
}

void Linear2D::forward_start(int i, const ChunkedMatrix& xg, const ChunkedMatrix& yp,
                             const ChunkedMatrix& y, Progress* progress) {
  check_layout("x_g", xg, xg_layout());
  check_layout("y_p", yp, yp_layout());
  check_layout("y", y, y_layout());
  // y_p piece jy = Σ_jx  x_g piece jx · (W_l block (jy, jx))ᵀ
  for (int jy = 0; jy < out_pieces(); ++jy) {
    for (int jx = 0; jx < in_pieces(); ++jx) {
      gemm_poked(*backend_, xg.piece_view(i, jx), Trans::kNo, w_block(jy, jx), Trans::kYes,
                 yp.piece_view(i, jy), 1.0f, jx == 0 ? 0.0f : 1.0f, progress);
    }
  }
  reduce_output_.start(i, yp.chunk_message(i), y.chunk_message(i));
}

void Linear2D::forward_wait(int i, const ChunkedMatrix& y) {
  reduce_output_.wait(i);
  if (has_bias()) backend_->add_bias(y.chunk_view(i), output_bias(y));
}

View Linear2D::output_bias(const ChunkedMatrix& y) const {
  if (!has_bias()) return {};
  // The scattered output holds local features [c1·M_l/d2, (c1+1)·M_l/d2).
  const std::int64_t width = y.layout().cols;
  const std::int64_t first = spec_.scatter_output ? c1_ * width : 0;
  return b_.block(0, first, 1, width);
}

void Linear2D::gather_grad_start(int i, const ChunkedMatrix& dy, const ChunkedMatrix& dyp) {
  check_layout("dy", dy, y_layout());
  check_layout("dy_p", dyp, yp_layout());
  gather_grad_.start(i, dy.chunk_message(i), dyp.chunk_message(i));
}

void Linear2D::backward_data_start(int i, const ChunkedMatrix& dyp, const ChunkedMatrix& dxg,
                                   const ChunkedMatrix& dx, Progress* progress) {
  check_layout("dy_p", dyp, yp_layout());
  check_layout("dx_g", dxg, xg_layout());
  check_layout("dx", dx, x_layout());
  // dx_g piece jx = Σ_jy  dy_p piece jy · W_l block (jy, jx)
  for (int jx = 0; jx < in_pieces(); ++jx) {
    for (int jy = 0; jy < out_pieces(); ++jy) {
      gemm_poked(*backend_, dyp.piece_view(i, jy), Trans::kNo, w_block(jy, jx), Trans::kNo,
                 dxg.piece_view(i, jx), 1.0f, jy == 0 ? 0.0f : 1.0f, progress);
    }
  }
  reduce_grad_.start(i, dxg.chunk_message(i), dx.chunk_message(i));
}

void Linear2D::backward_weight(const ChunkedMatrix& dyp, const ChunkedMatrix& xg,
                               Progress* progress) {
  check_layout("dy_p", dyp, yp_layout());
  check_layout("x_g", xg, xg_layout());
  if (in_pieces() == 1 && out_pieces() == 1) {
    // Chunk-major row blocks are the row-major whole: one GeMM over all n rows.
    gemm_poked(*backend_, dyp.whole_view(), Trans::kYes, xg.whole_view(), Trans::kNo, dw_, 1.0f,
               1.0f, progress);
    if (has_bias()) backend_->bias_grad(db_, dyp.whole_view());
    return;
  }
  const std::int64_t mp = m_local_ / out_pieces();
  for (int i = 0; i < spec_.chunks; ++i) {
    for (int jy = 0; jy < out_pieces(); ++jy) {
      for (int jx = 0; jx < in_pieces(); ++jx) {
        gemm_poked(*backend_, dyp.piece_view(i, jy), Trans::kYes, xg.piece_view(i, jx),
                   Trans::kNo, dw_block(jy, jx), 1.0f, 1.0f, progress);
      }
      if (has_bias()) backend_->bias_grad(db_.block(0, jy * mp, 1, mp), dyp.piece_view(i, jy));
    }
  }
}

void Linear2D::forward(const ChunkedMatrix& x, const ChunkedMatrix& xg, const ChunkedMatrix& yp,
                       const ChunkedMatrix& y, Progress* progress) {
  const int c = spec_.chunks;
  for (int i = 0; i < c; ++i) gather_input_start(i, x, xg);
  for (int i = 0; i < c; ++i) {
    gather_input_wait(i);
    forward_start(i, xg, yp, y, progress);
  }
  for (int i = 0; i < c; ++i) forward_wait(i, y);
}

void Linear2D::backward(const ChunkedMatrix& dy, const ChunkedMatrix& dyp,
                        const ChunkedMatrix& dxg, const ChunkedMatrix& dx,
                        const ChunkedMatrix& xg, Progress* progress) {
  const int c = spec_.chunks;
  for (int i = 0; i < c; ++i) gather_grad_start(i, dy, dyp);
  for (int i = 0; i < c; ++i) {
    gather_grad_wait(i);
    backward_data_start(i, dyp, dxg, dx, progress);
  }
  backward_weight(dyp, xg, progress);  // overlaps the dx reductions
  for (int i = 0; i < c; ++i) backward_data_wait(i);
}

void Linear2D::watch(Progress& progress) {
  progress.watch(&gather_input_);
  progress.watch(&reduce_output_);
  progress.watch(&gather_grad_);
  progress.watch(&reduce_grad_);
}

CollectiveKind Linear2D::collective(int step) const {
  switch (step) {
    case 0: return gather_input_.kind();
    case 1: return reduce_output_.kind();
    case 2: return gather_grad_.kind();
    default: return reduce_grad_.kind();
  }
}

}  // namespace meshtp::parallel
