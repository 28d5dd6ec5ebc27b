#include "parallel/context_parallel.hpp"

#include <algorithm>
#include <array>
#include <functional>
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

namespace {

// The chunk ids (of 2·cp) of a group of u consecutive ranks from `first`, in member order
// (each member's two, chunk-major): the rows a rank holds after the all-to-all.
std::vector<std::int64_t> group_chunks(int cp, int first, int u) {
  std::vector<std::int64_t> ids;
  for (int m = 0; m < u; ++m) {
    for (const std::int64_t c : chunks_of(cp, first + m)) ids.push_back(c);
  }
  return ids;
}

}  // namespace

void validate_context_parallel(const ContextParallelShape& s, layout::CpComm kind, int n) {
  MESHTP_CHECK(s.batch >= 1 && s.seq >= 1 && s.heads >= 1 && s.kv_heads >= 1 && s.head_dim >= 1,
               "context parallelism: batch={}, seq={}, heads={}, kv_heads={}, head_dim={} must "
               "be positive",
               s.batch, s.seq, s.heads, s.kv_heads, s.head_dim);
  MESHTP_CHECK(s.seq % (2 * n) == 0,
               "context parallelism: seq={} is not divisible by 2·cp={} (the zigzag's chunks)",
               s.seq, 2 * n);
  MESHTP_CHECK(s.heads % s.kv_heads == 0, "heads={} is not divisible by kv_heads={}", s.heads,
               s.kv_heads);
  const int u = layout::cp_a2a_size(kind, n, static_cast<int>(s.heads));
  MESHTP_CHECK(kind != layout::CpComm::kA2aRing || u > 1,
               "cp_comm=a2a+ring with cp={}: no a2a degree 1 < u < {} divides both cp and "
               "heads={}",
               n, n, s.heads);
  if (kind == layout::CpComm::kA2a) {
    MESHTP_CHECK(s.heads % n == 0, "cp_comm=a2a: heads={} are not divisible by cp={}", s.heads,
                 n);
  }
  MESHTP_CHECK(s.kv_heads % u == 0 || u % s.kv_heads == 0,
               "cp_comm={}: kv_heads={} and the all-to-all's {} ranks: one must divide the other "
               "(key/value heads split over them, or replicated u/kv_heads times)",
               layout::name(kind), s.kv_heads, u);
}

namespace {

const ContextParallelShape& validated(const ContextParallelShape& s, layout::CpComm kind, int n) {
  validate_context_parallel(s, kind, n);
  return s;
}

}  // namespace

ContextParallelAttention::ContextParallelAttention(const ContextParallelShape& shape,
                                                   layout::CpComm kind, comm::Communicator cp)
    : shape_(validated(shape, kind, cp.size())),
      kind_(kind),
      cp_(std::move(cp)),
      u_(layout::cp_a2a_size(kind, cp_.size(), static_cast<int>(shape.heads))),
      r_(cp_.size() / u_),
      a2a_(cp_.split(cp_.rank() / u_, cp_.rank() % u_, "cp a2a")),
      ring_(cp_.split(cp_.rank() % u_, cp_.rank() / u_, "cp ring")),
      chunk_(shape.seq / (2 * cp_.size())),
      heads_(shape.heads / u_),
      kv_heads_(shape.kv_heads % u_ == 0 ? shape.kv_heads / u_ : 1) {
  for (int p = 0; p < r_; ++p) ring_chunks_.push_back(group_chunks(cp_.size(), p * u_, u_));
}

std::int64_t ContextParallelAttention::local_rows() const {
  return cp_local_rows(shape_, cp_.size());
}

std::int64_t ContextParallelAttention::lse_size() const {
  return shape_.heads * local_rows();
}

namespace {

// The first key/value head a2a member j receives: its NKV/u, or the one its query heads read.
std::int64_t kv_first(int j, int u, std::int64_t kv_heads, std::int64_t kv_per_member) {
  return kv_heads % u == 0 ? j * kv_per_member : j * kv_heads / u;
}

// An all-to-all over the a2a group: to member j, what pack(j, to) writes into `to` (this
// rank's `rows` rows, `width` columns); returns [u·rows, width], member i's block of this
// rank's share at rows [i·rows, (i+1)·rows).
Tensor exchange(const comm::Communicator& group, std::int64_t rows, std::int64_t width,
                const std::function<void(int j, MatrixView to)>& pack) {
  const int u = group.size();
  Tensor send({u * rows, width}), recv({u * rows, width});
  for (int j = 0; j < u; ++j) pack(j, send.matrix().block(j * rows, 0, rows, width));
  group.all_to_all(std::span<const float>(send.values()), recv.values());
  return recv;
}

}  // namespace

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
  const std::int64_t HD = shape_.head_dim, lq = heads_ * HD, lk = kv_heads_ * HD;
  if (u_ == 1) {
    ring_forward(out, lse, q, k, v);
    return;
  }
  const Tensor in = exchange(a2a_, rows, lq + 2 * lk, [&](int j, MatrixView to) {
    const std::int64_t k0 = kv_first(j, u_, shape_.kv_heads, kv_heads_) * HD;
    copy(columns(q, j * lq, lq), columns(to, 0, lq));
    copy(columns(k, k0, lk), columns(to, lq, lk));
    copy(columns(v, k0, lk), columns(to, lq + lk, lk));
  });
  const ConstMatrixView iv = in.matrix();
  Tensor o({u_ * rows, lq});
  ring_forward(o.matrix(), lse, columns(iv, 0, lq), columns(iv, lq, lk), columns(iv, lq + lk, lk));
  const Tensor back = exchange(a2a_, rows, lq, [&](int i, MatrixView to) {
    copy(ConstMatrixView(o.matrix().block(i * rows, 0, rows, lq)), to);
  });
  for (int j = 0; j < u_; ++j) {
    copy(ConstMatrixView(back.matrix().block(j * rows, 0, rows, lq)), columns(out, j * lq, lq));
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
  const std::int64_t HD = shape_.head_dim, lq = heads_ * HD, lk = kv_heads_ * HD;
  if (u_ == 1) {
    ring_backward(dq, dk, dv, dout, q, k, v, out, lse);
    return;
  }
  // The forward keeps nothing but lse in the heads' layout: q, k, v, out and dout are
  // exchanged again.
  const Tensor in = exchange(a2a_, rows, 3 * lq + 2 * lk, [&](int j, MatrixView to) {
    const std::int64_t k0 = kv_first(j, u_, shape_.kv_heads, kv_heads_) * HD;
    copy(columns(q, j * lq, lq), columns(to, 0, lq));
    copy(columns(out, j * lq, lq), columns(to, lq, lq));
    copy(columns(dout, j * lq, lq), columns(to, 2 * lq, lq));
    copy(columns(k, k0, lk), columns(to, 3 * lq, lk));
    copy(columns(v, k0, lk), columns(to, 3 * lq + lk, lk));
  });
  const ConstMatrixView iv = in.matrix();
  Tensor grads({u_ * rows, lq + 2 * lk});  // dq | dk | dv of the group's rows, these heads
  grads.fill(0.0f);
  const MatrixView gv = grads.matrix();
  ring_backward(columns(gv, 0, lq), columns(gv, lq, lk), columns(gv, lq + lk, lk),
                columns(iv, 2 * lq, lq), columns(iv, 0, lq), columns(iv, 3 * lq, lk),
                columns(iv, 3 * lq + lk, lk), columns(iv, lq, lq), lse);
  const Tensor back = exchange(a2a_, rows, lq + 2 * lk, [&](int i, MatrixView to) {
    copy(ConstMatrixView(grads.matrix().block(i * rows, 0, rows, lq + 2 * lk)), to);
  });
  // From member j: dQ of its query heads, and dK, dV of its key/value heads — summed where
  // several members hold replicas of one key/value head.
  for (int j = 0; j < u_; ++j) {
    const ConstMatrixView from = back.matrix().block(j * rows, 0, rows, lq + 2 * lk);
    const std::int64_t k0 = kv_first(j, u_, shape_.kv_heads, kv_heads_) * HD;
    add(columns(from, 0, lq), columns(dq, j * lq, lq));
    add(columns(from, lq, lk), columns(dk, k0, lk));
    add(columns(from, lq + lk, lk), columns(dv, k0, lk));
  }
}

namespace {

// The block that travels the ring: [k | v] of one rank's rows.
Tensor travelling_block(ConstMatrixView k, ConstMatrixView v) {
  Tensor kv({k.rows, k.cols + v.cols});
  copy(k, columns(kv.matrix(), 0, k.cols));
  copy(v, columns(kv.matrix(), k.cols, v.cols));
  return kv;
}

}  // namespace

// ---- the ring ------------------------------------------------------------------------------
//
// Over ring_ (r ranks), rows chunk-major over this rank's ring_chunks_ (chunks of B·c rows),
// heads_ query and kv_heads_ key/value heads; ring position p holds ring_chunks_[p]. Step j
// attends to the block of ring position (me − j) mod r.

void ContextParallelAttention::ring_forward(MatrixView out, std::span<float> lse,
                                            ConstMatrixView q, ConstMatrixView k,
                                            ConstMatrixView v) {
  const int n = r_, me = ring_.rank();
  const std::vector<std::int64_t>& mine = ring_chunks_[static_cast<std::size_t>(me)];
  const std::int64_t c = chunk_, per_chunk = shape_.batch * c, HD = shape_.head_dim;
  const auto chunks = static_cast<std::int64_t>(mine.size());
  const std::int64_t kw = kv_heads_ * HD, lse_chunk = shape_.batch * heads_ * c;
  Tensor kv = travelling_block(k, v), next(kv.shape());
  Tensor part({per_chunk, out.cols});
  std::vector<float> part_lse(static_cast<std::size_t>(lse_chunk));
  FlashAttention a{.batch = shape_.batch, .heads = heads_, .kv_heads = kv_heads_};
  std::vector<float> scratch(static_cast<std::size_t>(flash_attention_scratch_size(a, c, c, HD)));
  zero(out);
  std::fill(lse.begin(), lse.end(), -std::numeric_limits<float>::infinity());
  for (int step = 0; step < n; ++step) {
    const int src = (me - step + n) % n;
    comm::Request sent, received;
    if (step + 1 < n) {  // the next block travels while this one is attended to
      sent = ring_.isend(std::span<const float>(kv.values()), (me + 1) % n);
      received = ring_.irecv(next.values(), (me - 1 + n) % n);
    }
    const std::vector<std::int64_t>& theirs = ring_chunks_[static_cast<std::size_t>(src)];
    for (std::int64_t x = 0; x < chunks; ++x) {
      for (std::int64_t y = 0; y < chunks; ++y) {
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
  const int n = r_, me = ring_.rank();
  const std::vector<std::int64_t>& mine = ring_chunks_[static_cast<std::size_t>(me)];
  const std::int64_t c = chunk_, per_chunk = shape_.batch * c, HD = shape_.head_dim;
  const auto chunks = static_cast<std::int64_t>(mine.size());
  const std::int64_t kw = kv_heads_ * HD, lse_chunk = shape_.batch * heads_ * c;
  Tensor kv = travelling_block(k, v), next(kv.shape());
  // The accumulator of dK | dV that travels with the block it belongs to.
  Tensor dkv({chunks * per_chunk, 2 * kw}), dkv_next({chunks * per_chunk, 2 * kw});
  dkv.fill(0.0f);
  FlashAttention a{.batch = shape_.batch, .heads = heads_, .kv_heads = kv_heads_};
  std::vector<float> scratch(static_cast<std::size_t>(flash_attention_scratch_size(a, c, c, HD)));
  for (int step = 0; step < n; ++step) {
    const int src = (me - step + n) % n;
    comm::Request sent, received;
    if (step + 1 < n) {
      sent = ring_.isend(std::span<const float>(kv.values()), (me + 1) % n);
      received = ring_.irecv(next.values(), (me - 1 + n) % n);
    }
    const std::vector<std::int64_t>& theirs = ring_chunks_[static_cast<std::size_t>(src)];
    for (std::int64_t x = 0; x < chunks; ++x) {
      for (std::int64_t y = 0; y < chunks; ++y) {
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
      ring_.sendrecv(std::span<const float>(dkv.values()), (me + 1) % n, dkv_next.values(),
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

}  // namespace meshtp::parallel
