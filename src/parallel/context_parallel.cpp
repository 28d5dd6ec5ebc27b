#include "parallel/context_parallel.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "ops/flash_attention.hpp"

namespace meshtp::parallel {
namespace {

// The two chunk indices (of 2·cp) rank `rank` holds: the zigzag.
std::array<std::int64_t, 2> chunks_of(int cp, int rank) {
  return {rank, 2 * static_cast<std::int64_t>(cp) - 1 - rank};
}

// Chunk x (0 or 1) of a chunk-major local block: rows [x·B·c, (x+1)·B·c).
ConstMatrixView chunk(ConstMatrixView m, int x, std::int64_t rows) {
  return {m.data + x * rows * m.ld, rows, m.cols, m.ld};
}
MatrixView chunk(MatrixView m, int x, std::int64_t rows) {
  return {m.data + x * rows * m.ld, rows, m.cols, m.ld};
}
ConstMatrixView columns(ConstMatrixView m, std::int64_t col0, std::int64_t cols) {
  return {m.data + col0, m.rows, cols, m.ld};
}
MatrixView columns(MatrixView m, std::int64_t col0, std::int64_t cols) {
  return {m.data + col0, m.rows, cols, m.ld};
}

}  // namespace

std::int64_t cp_local_rows(const ContextParallelShape& s, int cp) {
  return s.batch * s.seq / cp;
}

std::int64_t cp_global_row(const ContextParallelShape& s, int cp, int rank, std::int64_t r) {
  const std::int64_t c = s.seq / (2 * cp), per_chunk = s.batch * c;
  const int x = r < per_chunk ? 0 : 1;
  const std::int64_t in_chunk = r - x * per_chunk, b = in_chunk / c, t = in_chunk % c;
  return b * s.seq + chunks_of(cp, rank)[static_cast<std::size_t>(x)] * c + t;
}

ContextParallelAttention::ContextParallelAttention(const ContextParallelShape& shape,
                                                   layout::CpComm kind, comm::Communicator cp)
    : shape_(shape), kind_(kind), cp_(std::move(cp)) {
  const int n = cp_.size();
  const auto& s = shape_;
  MESHTP_CHECK(s.batch >= 1 && s.seq >= 1 && s.heads >= 1 && s.kv_heads >= 1 && s.head_dim >= 1,
               "context parallelism: batch={}, seq={}, heads={}, kv_heads={}, head_dim={} must "
               "be positive",
               s.batch, s.seq, s.heads, s.kv_heads, s.head_dim);
  MESHTP_CHECK(s.seq % (2 * n) == 0,
               "context parallelism: seq={} is not divisible by 2·cp={} (the zigzag's chunks)",
               s.seq, 2 * n);
  MESHTP_CHECK(s.heads % s.kv_heads == 0, "heads={} is not divisible by kv_heads={}", s.heads,
               s.kv_heads);
  MESHTP_CHECK(kind_ != layout::CpComm::kA2aRing,
               "cp_comm=a2a+ring: meshtp's context-parallel layer runs ring or a2a (the planner "
               "prices a2a+ring)");
  if (kind_ == layout::CpComm::kA2a) {
    MESHTP_CHECK(s.heads % n == 0, "cp_comm=a2a: heads={} are not divisible by cp={}", s.heads,
                 n);
    MESHTP_CHECK(s.kv_heads % n == 0 || n % s.kv_heads == 0,
                 "cp_comm=a2a: kv_heads={} and cp={}: one must divide the other (key/value "
                 "heads split over cp, or replicated cp/kv_heads times)",
                 s.kv_heads, n);
  }
  chunk_ = s.seq / (2 * n);
}

std::int64_t ContextParallelAttention::local_rows() const {
  return cp_local_rows(shape_, cp_.size());
}

std::int64_t ContextParallelAttention::lse_size() const {
  return shape_.heads * local_rows();
}

void ContextParallelAttention::forward(MatrixView out, std::span<float> lse, ConstMatrixView q,
                                       ConstMatrixView k, ConstMatrixView v) {
  const std::int64_t rows = local_rows(), qw = shape_.heads * shape_.head_dim,
                     kw = shape_.kv_heads * shape_.head_dim;
  MESHTP_CHECK(q.rows == rows && out.rows == rows && k.rows == rows && v.rows == rows &&
                   q.cols == qw && out.cols == qw && k.cols == kw && v.cols == kw &&
                   static_cast<std::int64_t>(lse.size()) == lse_size(),
               "context-parallel attention: q {}×{}, k {}×{}, v {}×{}, out {}×{}, lse {}; "
               "expected {} rows of {} (q, out) and {} (k, v) columns, lse {}",
               q.rows, q.cols, k.rows, k.cols, v.rows, v.cols, out.rows, out.cols, lse.size(),
               rows, qw, kw, lse_size());
  if (kind_ == layout::CpComm::kRing) {
    ring_forward(out, lse, q, k, v);
  } else {
    ulysses_forward(out, lse, q, k, v);
  }
}

void ContextParallelAttention::backward(MatrixView dq, MatrixView dk, MatrixView dv,
                                        ConstMatrixView dout, ConstMatrixView q,
                                        ConstMatrixView k, ConstMatrixView v, ConstMatrixView out,
                                        std::span<const float> lse) {
  const std::int64_t rows = local_rows();
  MESHTP_CHECK(dq.rows == rows && dk.rows == rows && dv.rows == rows && dout.rows == rows &&
                   dq.cols == q.cols && dk.cols == k.cols && dv.cols == v.cols &&
                   static_cast<std::int64_t>(lse.size()) == lse_size(),
               "context-parallel attention backward: dq {}×{}, dk {}×{}, dv {}×{}, dout {} rows, "
               "lse {}; expected {} rows as q, k, v and lse {}",
               dq.rows, dq.cols, dk.rows, dk.cols, dv.rows, dv.cols, dout.rows, lse.size(), rows,
               lse_size());
  if (kind_ == layout::CpComm::kRing) {
    ring_backward(dq, dk, dv, dout, q, k, v, out, lse);
  } else {
    ulysses_backward(dq, dk, dv, dout, q, k, v, out, lse);
  }
}

// ---- ring ----------------------------------------------------------------------------------

void ContextParallelAttention::ring_forward(MatrixView out, std::span<float> lse,
                                            ConstMatrixView q, ConstMatrixView k,
                                            ConstMatrixView v) {
  const int n = cp_.size(), me = cp_.rank();
  const std::int64_t c = chunk_, per_chunk = shape_.batch * c, HD = shape_.head_dim;
  const std::int64_t kw = shape_.kv_heads * HD, lse_chunk = shape_.batch * shape_.heads * c;
  // The travelling block: [k | v] of one rank's rows.
  Tensor kv({2 * per_chunk, 2 * kw}), next({2 * per_chunk, 2 * kw});
  copy(k, columns(kv.matrix(), 0, kw));
  copy(v, columns(kv.matrix(), kw, kw));
  Tensor part({per_chunk, out.cols});
  std::vector<float> part_lse(static_cast<std::size_t>(lse_chunk));
  FlashAttention a{.batch = shape_.batch, .heads = shape_.heads, .kv_heads = shape_.kv_heads};
  std::vector<float> scratch(static_cast<std::size_t>(flash_attention_scratch_size(a, c, c, HD)));
  zero(out);
  std::fill(lse.begin(), lse.end(), -std::numeric_limits<float>::infinity());
  const auto mine = chunks_of(n, me);
  for (int step = 0; step < n; ++step) {
    const int src = (me - step + n) % n;
    comm::Request sent, received;
    if (step + 1 < n) {  // the next block travels while this one is attended to
      sent = cp_.isend(std::span<const float>(kv.values()), (me + 1) % n);
      received = cp_.irecv(next.values(), (me - 1 + n) % n);
    }
    const auto theirs = chunks_of(n, src);
    for (int x = 0; x < 2; ++x) {
      for (int y = 0; y < 2; ++y) {
        const std::int64_t qc = mine[static_cast<std::size_t>(x)],
                           kc = theirs[static_cast<std::size_t>(y)];
        if (kc > qc) continue;  // every key after every query: masked whole
        a.q_pos = qc * c;
        a.k_pos = kc * c;
        const ConstMatrixView kvy = chunk(ConstMatrixView(kv.matrix()), y, per_chunk);
        flash_attention_forward(part.matrix(), part_lse, scratch, chunk(q, x, per_chunk),
                                columns(kvy, 0, kw), columns(kvy, kw, kw), a);
        flash_attention_merge(chunk(out, x, per_chunk),
                              lse.subspan(static_cast<std::size_t>(x * lse_chunk),
                                          static_cast<std::size_t>(lse_chunk)),
                              part.matrix(), part_lse, a);
      }
    }
    if (step + 1 < n) {
      sent.wait();
      received.wait();
      std::swap(kv, next);
    }
  }
}

void ContextParallelAttention::ring_backward(MatrixView dq, MatrixView dk, MatrixView dv,
                                             ConstMatrixView dout, ConstMatrixView q,
                                             ConstMatrixView k, ConstMatrixView v,
                                             ConstMatrixView out, std::span<const float> lse) {
  const int n = cp_.size(), me = cp_.rank();
  const std::int64_t c = chunk_, per_chunk = shape_.batch * c, HD = shape_.head_dim;
  const std::int64_t kw = shape_.kv_heads * HD, lse_chunk = shape_.batch * shape_.heads * c;
  Tensor kv({2 * per_chunk, 2 * kw}), next({2 * per_chunk, 2 * kw});
  copy(k, columns(kv.matrix(), 0, kw));
  copy(v, columns(kv.matrix(), kw, kw));
  // The accumulator of dK | dV that travels with the block it belongs to.
  Tensor dkv({2 * per_chunk, 2 * kw}), dkv_next({2 * per_chunk, 2 * kw});
  dkv.fill(0.0f);
  FlashAttention a{.batch = shape_.batch, .heads = shape_.heads, .kv_heads = shape_.kv_heads};
  std::vector<float> scratch(static_cast<std::size_t>(flash_attention_scratch_size(a, c, c, HD)));
  const auto mine = chunks_of(n, me);
  for (int step = 0; step < n; ++step) {
    const int src = (me - step + n) % n;
    comm::Request sent, received;
    if (step + 1 < n) {
      sent = cp_.isend(std::span<const float>(kv.values()), (me + 1) % n);
      received = cp_.irecv(next.values(), (me - 1 + n) % n);
    }
    const auto theirs = chunks_of(n, src);
    for (int x = 0; x < 2; ++x) {
      for (int y = 0; y < 2; ++y) {
        const std::int64_t qc = mine[static_cast<std::size_t>(x)],
                           kc = theirs[static_cast<std::size_t>(y)];
        if (kc > qc) continue;
        a.q_pos = qc * c;
        a.k_pos = kc * c;
        const ConstMatrixView kvy = chunk(ConstMatrixView(kv.matrix()), y, per_chunk);
        const MatrixView dkvy = chunk(dkv.matrix(), y, per_chunk);
        flash_attention_backward(chunk(dq, x, per_chunk), columns(dkvy, 0, kw),
                                 columns(dkvy, kw, kw), scratch, chunk(dout, x, per_chunk),
                                 chunk(q, x, per_chunk), columns(kvy, 0, kw),
                                 columns(kvy, kw, kw), chunk(out, x, per_chunk),
                                 lse.subspan(static_cast<std::size_t>(x * lse_chunk),
                                             static_cast<std::size_t>(lse_chunk)),
                                 a);
      }
    }
    // The accumulator goes on with its block's owner one step nearer; after n passes each is
    // home. (Not overlapped: the next step adds to what arrives.)
    if (n > 1) {
      cp_.sendrecv(std::span<const float>(dkv.values()), (me + 1) % n, dkv_next.values(),
                   (me - 1 + n) % n, 1);
      std::swap(dkv, dkv_next);
    }
    if (step + 1 < n) {
      sent.wait();
      received.wait();
      std::swap(kv, next);
    }
  }
  add(columns(ConstMatrixView(dkv.matrix()), 0, kw), dk);
  add(columns(ConstMatrixView(dkv.matrix()), kw, kw), dv);
}

// ---- Ulysses -------------------------------------------------------------------------------

namespace {

// Rank j's share of heads under Ulysses: query heads [j·NHl, (j+1)·NHl), and the key/value
// heads [kv0(j), kv0(j) + NKVl): NKV/cp of them, or the one its query heads read.
struct UlyssesHeads {
  std::int64_t q = 0, kv = 0;  // per rank: NHl, NKVl
  std::int64_t kv_first(int j, int cp, std::int64_t kv_heads) const {
    return kv_heads % cp == 0 ? j * kv : j * kv_heads / cp;
  }
};
UlyssesHeads ulysses_heads(const ContextParallelShape& s, int cp) {
  return {s.heads / cp, s.kv_heads % cp == 0 ? s.kv_heads / cp : 1};
}

}  // namespace

void ContextParallelAttention::ulysses_forward(MatrixView out, std::span<float> lse,
                                               ConstMatrixView q, ConstMatrixView k,
                                               ConstMatrixView v) {
  const int n = cp_.size();
  const std::int64_t rows = local_rows(), HD = shape_.head_dim, all = shape_.batch * shape_.seq;
  const UlyssesHeads heads = ulysses_heads(shape_, n);
  const std::int64_t qw = heads.q * HD, kw = heads.kv * HD, w = qw + 2 * kw;
  // To rank j: this rank's rows of j's heads, [q | k | v].
  Tensor send({n * rows, w}), recv({n * rows, w});
  for (int j = 0; j < n; ++j) {
    const MatrixView to = send.matrix().block(j * rows, 0, rows, w);
    const std::int64_t k0 = heads.kv_first(j, n, shape_.kv_heads) * HD;
    copy(columns(q, j * qw, qw), columns(to, 0, qw));
    copy(columns(k, k0, kw), columns(to, qw, kw));
    copy(columns(v, k0, kw), columns(to, qw + kw, kw));
  }
  cp_.all_to_all(std::span<const float>(send.values()), recv.values());
  // Every rank's rows, put in sequence order: ordinary causal attention for these heads.
  Tensor whole({all, w});
  for (int i = 0; i < n; ++i) {
    for (std::int64_t r = 0; r < rows; ++r) {
      std::copy_n(&recv.matrix()(i * rows + r, 0), w,
                  &whole.matrix()(cp_global_row(shape_, n, i, r), 0));
    }
  }
  const FlashAttention a{.batch = shape_.batch, .heads = heads.q, .kv_heads = heads.kv};
  std::vector<float> scratch(
      static_cast<std::size_t>(flash_attention_scratch_size(a, shape_.seq, shape_.seq, HD)));
  Tensor o({all, qw});
  const ConstMatrixView wv = whole.matrix();
  flash_attention_forward(o.matrix(), lse, scratch, columns(wv, 0, qw), columns(wv, qw, kw),
                          columns(wv, qw + kw, kw), a);
  // Back: rank i gets its rows of these heads.
  Tensor back({n * rows, qw}), got({n * rows, qw});
  for (int i = 0; i < n; ++i) {
    for (std::int64_t r = 0; r < rows; ++r) {
      std::copy_n(&o.matrix()(cp_global_row(shape_, n, i, r), 0), qw, &back.matrix()(i * rows + r, 0));
    }
  }
  cp_.all_to_all(std::span<const float>(back.values()), got.values());
  for (int j = 0; j < n; ++j) {
    copy(ConstMatrixView(got.matrix().block(j * rows, 0, rows, qw)), columns(out, j * qw, qw));
  }
}

void ContextParallelAttention::ulysses_backward(MatrixView dq, MatrixView dk, MatrixView dv,
                                                ConstMatrixView dout, ConstMatrixView q,
                                                ConstMatrixView k, ConstMatrixView v,
                                                ConstMatrixView out, std::span<const float> lse) {
  const int n = cp_.size();
  const std::int64_t rows = local_rows(), HD = shape_.head_dim, all = shape_.batch * shape_.seq;
  const UlyssesHeads heads = ulysses_heads(shape_, n);
  const std::int64_t qw = heads.q * HD, kw = heads.kv * HD;
  // [q | out | dout | k | v] of rank j's heads, as in the forward (the forward keeps nothing
  // but lse in the heads' layout: the rest is exchanged again).
  const std::int64_t w = 3 * qw + 2 * kw;
  Tensor send({n * rows, w}), recv({n * rows, w});
  for (int j = 0; j < n; ++j) {
    const MatrixView to = send.matrix().block(j * rows, 0, rows, w);
    const std::int64_t k0 = heads.kv_first(j, n, shape_.kv_heads) * HD;
    copy(columns(q, j * qw, qw), columns(to, 0, qw));
    copy(columns(out, j * qw, qw), columns(to, qw, qw));
    copy(columns(dout, j * qw, qw), columns(to, 2 * qw, qw));
    copy(columns(k, k0, kw), columns(to, 3 * qw, kw));
    copy(columns(v, k0, kw), columns(to, 3 * qw + kw, kw));
  }
  cp_.all_to_all(std::span<const float>(send.values()), recv.values());
  Tensor whole({all, w});
  for (int i = 0; i < n; ++i) {
    for (std::int64_t r = 0; r < rows; ++r) {
      std::copy_n(&recv.matrix()(i * rows + r, 0), w,
                  &whole.matrix()(cp_global_row(shape_, n, i, r), 0));
    }
  }
  const FlashAttention a{.batch = shape_.batch, .heads = heads.q, .kv_heads = heads.kv};
  std::vector<float> scratch(
      static_cast<std::size_t>(flash_attention_scratch_size(a, shape_.seq, shape_.seq, HD)));
  const std::int64_t gw = qw + 2 * kw;  // [dq | dk | dv]
  Tensor grads({all, gw});
  grads.fill(0.0f);
  const ConstMatrixView wv = whole.matrix();
  const MatrixView gv = grads.matrix();
  flash_attention_backward(columns(gv, 0, qw), columns(gv, qw, kw), columns(gv, qw + kw, kw),
                           scratch, columns(wv, 2 * qw, qw), columns(wv, 0, qw),
                           columns(wv, 3 * qw, kw), columns(wv, 3 * qw + kw, kw),
                           columns(wv, qw, qw), lse, a);
  Tensor back({n * rows, gw}), got({n * rows, gw});
  for (int i = 0; i < n; ++i) {
    for (std::int64_t r = 0; r < rows; ++r) {
      std::copy_n(&grads.matrix()(cp_global_row(shape_, n, i, r), 0), gw,
                  &back.matrix()(i * rows + r, 0));
    }
  }
  cp_.all_to_all(std::span<const float>(back.values()), got.values());
  // From rank j: dQ of its query heads, and dK, dV of its key/value heads — summed where
  // several ranks hold replicas of one key/value head.
  for (int j = 0; j < n; ++j) {
    const ConstMatrixView from = got.matrix().block(j * rows, 0, rows, gw);
    const std::int64_t k0 = heads.kv_first(j, n, shape_.kv_heads) * HD;
    add(columns(from, 0, qw), columns(dq, j * qw, qw));
    add(columns(from, qw, kw), columns(dk, k0, kw));
    add(columns(from, qw + kw, kw), columns(dv, k0, kw));
  }
}

}  // namespace meshtp::parallel
