#include "parallel/context_parallel.hpp"

#include <algorithm>
#include <array>
#include <functional>
#include <limits>
#include <utility>
#include <vector>

#include "core/error.hpp"

namespace meshtp::parallel {
namespace {

// The two chunk indices (of 2·cp) rank `rank` holds: the zigzag.
std::array<std::int64_t, 2> chunks_of(int cp, int rank) {
  return {rank, 2 * static_cast<std::int64_t>(cp) - 1 - rank};
}

// Chunk x of a chunk-major local block: rows [x·n, (x+1)·n).
View chunk(const View& m, std::int64_t x, std::int64_t n) { return m.row_band(x * n, n); }
View columns(const View& m, std::int64_t col0, std::int64_t cols) {
  return m.block(0, col0, m.rows, cols);
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
                                                   layout::CpComm kind, comm::Communicator cp,
                                                   device::Backend& backend)
    : shape_(validated(shape, kind, cp.size())),
      kind_(kind),
      cp_(std::move(cp)),
      be_(&backend),
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

}  // namespace

device::Array ContextParallelAttention::exchange(std::int64_t rows, std::int64_t width,
                                                 const std::function<Pieces(int j)>& pieces) {
  const int u = a2a_.size();
  device::Array send = be_->alloc(u * rows * width, Element::kF32);
  device::Array recv = be_->alloc(u * rows * width, Element::kF32);
  const View to = send.view(u * rows, width);
  std::vector<View> dst, src;
  for (int j = 0; j < u; ++j) {
    for (const auto& [from, col] : pieces(j)) {
      dst.push_back(to.block(j * rows, col, rows, from.cols));
      src.push_back(from);
    }
  }
  be_->copy_blocks(dst, src);  // one operation: the simulated build charges them together
  a2a_.all_to_all(std::span<const float>(device::floats(send)), device::floats(recv));
  return recv;
}

void ContextParallelAttention::forward(const View& out, const View& lse, const View& q,
                                       const View& k, const View& v) {
  const std::int64_t rows = local_rows(), qw = shape_.heads * shape_.head_dim,
                     kw = shape_.kv_heads * shape_.head_dim;
  MESHTP_CHECK(q.rows == rows && out.rows == rows && k.rows == rows && v.rows == rows &&
                   q.cols == qw && out.cols == qw && k.cols == kw && v.cols == kw &&
                   lse.type == Element::kF32 && lse.contiguous() && lse.elements() == lse_size(),
               "context-parallel attention: q {}, k {}, v {}, out {}, lse {}; expected {} rows of "
               "{} (q, out) and {} (k, v) columns, lse fp32 1x{}",
               describe(q), describe(k), describe(v), describe(out), describe(lse), rows, qw, kw,
               lse_size());
  const std::int64_t HD = shape_.head_dim, lq = heads_ * HD, lk = kv_heads_ * HD;
  if (u_ == 1) {
    ring_forward(out, lse, q, k, v);
    return;
  }
  const device::Array in = exchange(rows, lq + 2 * lk, [&](int j) {
    const std::int64_t k0 = kv_first(j, u_, shape_.kv_heads, kv_heads_) * HD;
    return Pieces{
        {columns(q, j * lq, lq), 0}, {columns(k, k0, lk), lq}, {columns(v, k0, lk), lq + lk}};
  });
  const View iv = in.view(u_ * rows, lq + 2 * lk);
  const device::Array o = be_->alloc(u_ * rows * lq, Element::kF32);
  const View ov = o.view(u_ * rows, lq);
  ring_forward(ov, lse, columns(iv, 0, lq), columns(iv, lq, lk), columns(iv, lq + lk, lk));
  const device::Array back = exchange(rows, lq, [&](int i) {
    return Pieces{{ov.row_band(i * rows, rows), 0}};
  });
  const View bv = back.view(u_ * rows, lq);
  std::vector<View> dst, src;
  for (int j = 0; j < u_; ++j) {
    dst.push_back(columns(out, j * lq, lq));
    src.push_back(bv.row_band(j * rows, rows));
  }
  be_->copy_blocks(dst, src);
}

void ContextParallelAttention::backward(const View& dq, const View& dk, const View& dv,
                                        const View& dout, const View& q, const View& k,
                                        const View& v, const View& out, const View& lse) {
  const std::int64_t rows = local_rows();
  MESHTP_CHECK(dq.rows == rows && dk.rows == rows && dv.rows == rows && dout.rows == rows &&
                   dq.cols == q.cols && dk.cols == k.cols && dv.cols == v.cols &&
                   lse.type == Element::kF32 && lse.contiguous() && lse.elements() == lse_size(),
               "context-parallel attention backward: dq {}, dk {}, dv {}, dout {}, lse {}; "
               "expected {} rows as q, k, v and lse fp32 1x{}",
               describe(dq), describe(dk), describe(dv), describe(dout), describe(lse), rows,
               lse_size());
  const std::int64_t HD = shape_.head_dim, lq = heads_ * HD, lk = kv_heads_ * HD;
  if (u_ == 1) {
    ring_backward(dq, dk, dv, dout, q, k, v, out, lse);
    return;
  }
  // The forward keeps nothing but lse in the heads' layout: q, k, v, out and dout are
  // exchanged again.
  const device::Array in = exchange(rows, 3 * lq + 2 * lk, [&](int j) {
    const std::int64_t k0 = kv_first(j, u_, shape_.kv_heads, kv_heads_) * HD;
    return Pieces{{columns(q, j * lq, lq), 0},
                  {columns(out, j * lq, lq), lq},
                  {columns(dout, j * lq, lq), 2 * lq},
                  {columns(k, k0, lk), 3 * lq},
                  {columns(v, k0, lk), 3 * lq + lk}};
  });
  const View iv = in.view(u_ * rows, 3 * lq + 2 * lk);
  device::Array grads = be_->alloc(u_ * rows * (lq + 2 * lk), Element::kF32);  // dq | dk | dv
  const View gv = grads.view(u_ * rows, lq + 2 * lk);
  be_->zero(gv);
  ring_backward(columns(gv, 0, lq), columns(gv, lq, lk), columns(gv, lq + lk, lk),
                columns(iv, 2 * lq, lq), columns(iv, 0, lq), columns(iv, 3 * lq, lk),
                columns(iv, 3 * lq + lk, lk), columns(iv, lq, lq), lse);
  const device::Array back = exchange(rows, lq + 2 * lk, [&](int i) {
    return Pieces{{gv.row_band(i * rows, rows), 0}};
  });
  const View bv = back.view(u_ * rows, lq + 2 * lk);
  // From member j: dQ of its query heads, and dK, dV of its key/value heads — summed where
  // several members hold replicas of one key/value head.
  for (int j = 0; j < u_; ++j) {
    const View from = bv.row_band(j * rows, rows);
    const std::int64_t k0 = kv_first(j, u_, shape_.kv_heads, kv_heads_) * HD;
    be_->add(columns(dq, j * lq, lq), columns(from, 0, lq));
    be_->add(columns(dk, k0, lk), columns(from, lq, lk));
    be_->add(columns(dv, k0, lk), columns(from, lq + lk, lk));
  }
}

// ---- the ring ------------------------------------------------------------------------------
//
// Over ring_ (r ranks), rows chunk-major over this rank's ring_chunks_ (chunks of B·c rows),
// heads_ query and kv_heads_ key/value heads; ring position p holds ring_chunks_[p]. Step j
// attends to the block of ring position (me − j) mod r. The block that travels is [k | v] of
// one rank's rows, in one array so that one message carries it.

void ContextParallelAttention::ring_forward(const View& out, const View& lse, const View& q,
                                            const View& k, const View& v) {
  device::Backend& be = *be_;
  const int n = r_, me = ring_.rank();
  const std::vector<std::int64_t>& mine = ring_chunks_[static_cast<std::size_t>(me)];
  const std::int64_t c = chunk_, per_chunk = shape_.batch * c, HD = shape_.head_dim;
  const auto chunks = static_cast<std::int64_t>(mine.size());
  const std::int64_t kw = kv_heads_ * HD, lse_chunk = shape_.batch * heads_ * c;
  device::Array kv = be.alloc(q.rows * 2 * kw, Element::kF32);
  device::Array next = be.alloc(q.rows * 2 * kw, Element::kF32);
  be.copy_blocks(std::vector<View>{columns(kv.view(q.rows, 2 * kw), 0, kw),
                                   columns(kv.view(q.rows, 2 * kw), kw, kw)},
                 std::vector<View>{k, v});
  FlashAttention a{.batch = shape_.batch, .heads = heads_, .kv_heads = kv_heads_};
  const device::Array part = be.alloc(per_chunk * out.cols, Element::kF32);
  const device::Array part_lse = be.alloc(lse_chunk, Element::kF32);
  const device::Array scratch = be.alloc(be.flash_attention_scratch(a, c, c, HD), Element::kF32);
  // A query chunk's first visible pair writes out and lse; the later ones merge into them.
  // (Every chunk's first is at step 0: its own block holds a chunk no later than it.)
  std::vector<bool> written(static_cast<std::size_t>(chunks), false);
  for (int step = 0; step < n; ++step) {
    const int src = (me - step + n) % n;
    comm::Request sent, received;
    if (step + 1 < n) {  // the next block travels while this one is attended to
      sent = ring_.isend(std::span<const float>(device::floats(kv)), (me + 1) % n);
      received = ring_.irecv(device::floats(next), (me - 1 + n) % n);
    }
    const View kvv = kv.view(q.rows, 2 * kw);
    const std::vector<std::int64_t>& theirs = ring_chunks_[static_cast<std::size_t>(src)];
    for (std::int64_t x = 0; x < chunks; ++x) {
      const View out_x = chunk(out, x, per_chunk),
                 lse_x = lse.block(0, x * lse_chunk, 1, lse_chunk);
      for (std::int64_t y = 0; y < chunks; ++y) {
        const std::int64_t qc = mine[static_cast<std::size_t>(x)],
                           kc = theirs[static_cast<std::size_t>(y)];
        if (kc > qc) continue;  // every key after every query: masked whole
        a.q_pos = qc * c;
        a.k_pos = kc * c;
        const View kvy = chunk(kvv, y, per_chunk), q_x = chunk(q, x, per_chunk);
        const View sv = scratch.view(1, scratch.count());
        if (!written[static_cast<std::size_t>(x)]) {
          be.flash_attention_forward(out_x, lse_x, sv, q_x, columns(kvy, 0, kw),
                                     columns(kvy, kw, kw), a);
          written[static_cast<std::size_t>(x)] = true;
          continue;
        }
        const View pv = part.view(per_chunk, out.cols), plv = part_lse.view(1, lse_chunk);
        be.flash_attention_forward(pv, plv, sv, q_x, columns(kvy, 0, kw), columns(kvy, kw, kw), a);
        be.flash_attention_merge(out_x, lse_x, pv, plv, a);
      }
    }
    if (step + 1 < n) {
      sent.wait();
      received.wait();
      std::swap(kv, next);
    }
  }
  for (std::int64_t x = 0; x < chunks; ++x) {
    MESHTP_CHECK(written[static_cast<std::size_t>(x)],
                 "context-parallel attention: query chunk {} saw no key",
                 mine[static_cast<std::size_t>(x)]);
  }
}

void ContextParallelAttention::ring_backward(const View& dq, const View& dk, const View& dv,
                                             const View& dout, const View& q, const View& k,
                                             const View& v, const View& out, const View& lse) {
  device::Backend& be = *be_;
  const int n = r_, me = ring_.rank();
  const std::vector<std::int64_t>& mine = ring_chunks_[static_cast<std::size_t>(me)];
  const std::int64_t c = chunk_, per_chunk = shape_.batch * c, HD = shape_.head_dim;
  const auto chunks = static_cast<std::int64_t>(mine.size());
  const std::int64_t kw = kv_heads_ * HD, lse_chunk = shape_.batch * heads_ * c;
  const std::int64_t rows = chunks * per_chunk;
  device::Array kv = be.alloc(rows * 2 * kw, Element::kF32);
  device::Array next = be.alloc(rows * 2 * kw, Element::kF32);
  be.copy_blocks(std::vector<View>{columns(kv.view(rows, 2 * kw), 0, kw),
                                   columns(kv.view(rows, 2 * kw), kw, kw)},
                 std::vector<View>{k, v});
  // The accumulator of dK | dV that travels with the block it belongs to.
  device::Array dkv = be.alloc(rows * 2 * kw, Element::kF32);
  device::Array dkv_next = be.alloc(rows * 2 * kw, Element::kF32);
  be.zero(dkv.view(rows, 2 * kw));
  FlashAttention a{.batch = shape_.batch, .heads = heads_, .kv_heads = kv_heads_};
  const device::Array scratch = be.alloc(be.flash_attention_scratch(a, c, c, HD), Element::kF32);
  for (int step = 0; step < n; ++step) {
    const int src = (me - step + n) % n;
    comm::Request sent, received;
    if (step + 1 < n) {
      sent = ring_.isend(std::span<const float>(device::floats(kv)), (me + 1) % n);
      received = ring_.irecv(device::floats(next), (me - 1 + n) % n);
    }
    const View kvv = kv.view(rows, 2 * kw), dkvv = dkv.view(rows, 2 * kw);
    const std::vector<std::int64_t>& theirs = ring_chunks_[static_cast<std::size_t>(src)];
    for (std::int64_t x = 0; x < chunks; ++x) {
      for (std::int64_t y = 0; y < chunks; ++y) {
        const std::int64_t qc = mine[static_cast<std::size_t>(x)],
                           kc = theirs[static_cast<std::size_t>(y)];
        if (kc > qc) continue;
        a.q_pos = qc * c;
        a.k_pos = kc * c;
        const View kvy = chunk(kvv, y, per_chunk), dkvy = chunk(dkvv, y, per_chunk);
        be.flash_attention_backward(
            chunk(dq, x, per_chunk), columns(dkvy, 0, kw), columns(dkvy, kw, kw),
            scratch.view(1, scratch.count()), chunk(dout, x, per_chunk), chunk(q, x, per_chunk),
            columns(kvy, 0, kw), columns(kvy, kw, kw), chunk(out, x, per_chunk),
            lse.block(0, x * lse_chunk, 1, lse_chunk), a);
      }
    }
    // The accumulator goes on with its block's owner one step nearer; after n passes each is
    // home. (Not overlapped: the next step adds to what arrives.)
    if (n > 1) {
      ring_.sendrecv(std::span<const float>(device::floats(dkv)), (me + 1) % n,
                     device::floats(dkv_next), (me - 1 + n) % n, 1);
      std::swap(dkv, dkv_next);
    }
    if (step + 1 < n) {
      sent.wait();
      received.wait();
      std::swap(kv, next);
    }
  }
  const View home = dkv.view(rows, 2 * kw);
  be.add(dk, columns(home, 0, kw));
  be.add(dv, columns(home, kw, kw));
}

}  // namespace meshtp::parallel
