// Wang et al. (ASPLOS '22; MeshSlice §2.3.4): the collective along the mesh ROW (mesh dim 1)
// decomposed into Nc−1 send/recv ring steps, each overlapped with the partial GeMMs that need
// (or produce) the blocks in flight; the collective along the mesh column stays one blocking
// all-gather / reduce-scatter, not overlapped. (The FSDP + 1D-TP combination.)
//
// Two-way, as the algorithm's published code runs it (MeshSlice's Wang_OS / Wang_LS /
// Wang_RS): every moving block is cut into a top half (its first ⌊rows/2⌋ rows) that travels
// LEFT round the row ring and a bottom half that travels RIGHT, both at once — both
// directions of a full-duplex ring, so each step moves half a block per link direction. A
// step multiplies the two halves it holds (two GeMM calls). With Nc = 1 nothing moves and the
// block is one GeMM.
//
// Math, chip (i, j), left = j−1, right = j+1 (mod Nc); "top"/"bottom" = the row halves:
//   OS  C_ij = Σ_l A_il · B_*j[k-block l]. B_*j = AG_col(B_ij) first (blocking). Step t holds
//       top(A_il) for l = j+t and bottom(A_il') for l' = j−t; C's top rows += top(A_il)·B_*j
//       [k-block l], its bottom rows += bottom(A_il')·B_*j[k-block l'] — an all-gather of A
//       spread over the GeMMs, each half going round one way.
//   LS  C_ij = Σ_l A_il · (B_*l[n-block j])ᵀ. B_*j = AG_col(B_ij) first. Step t computes the
//       top rows top(A_ij)·(B_*j[n-block j+t+1])ᵀ, adds the running top sum for that target
//       arriving from the right and passes it left; the bottom rows target j−t−1, arrive from
//       the left and go right. At t = Nc−1 both targets are j: the sums are C_ij — a ring
//       reduce-scatter each way, spread over the GeMMs.
//   RS  C_ij = RdS_col(P), P = A_i*ᵀ·B_ij (m × n/Nc): step t holds top(A_il), l = j+t, and
//       bottom(A_il'), l' = j−t (halves of the contraction, paired with the same rows of
//       B_ij); the m-block l of P gets top(A_il)ᵀ·top(B_ij), the m-block l' gets
//       bottom(A_il')ᵀ·bottom(B_ij), accumulated (block l is first written by whichever half
//       reaches it first); then one blocking RdS_col of P gives C_ij.
//
// Worked example, OS on a 1×2 mesh (Nr = 1, so no column all-gather), A_00 and A_01 of 2 rows:
//   t = 0    (0,0): C00[row 0] = A00[row 0]·B[k-block 0], C00[row 1] = A00[row 1]·B[k-block 0]
//            while A00[row 0] goes left to (0,1), A00[row 1] right to (0,1) (the same chip:
//            with Nc = 2 both halves cross the one link between them)
//   t = 1    (0,0): C00[row 0] += A01[row 0]·B[k-block 1], C00[row 1] += A01[row 1]·B[k-block 1]
//
// Cost per rank (|X| = local block bytes):
//   OS  row (Nc−1)·|A_ij| in Nc−1 two-way steps     column (Nr−1)·|B_ij| (one AG, exposed)
//   LS  row (Nc−1)·|C_ij| in Nc−1 two-way steps     column (Nr−1)·|B_ij| (one AG, exposed)
//   RS  row (Nc−1)·|A_ij| in Nc−1 two-way steps     column (Nr−1)·|C_ij| (one RdS, exposed)
//   Calls: 4(Nc−1) send/recv (two halves each way) + 1 collective; 2·Nc GeMMs; sync steps
//   (Nc−1) + (Nr−1).
//   Extra memory: the gathered column operand (OS, LS) or the m × n/Nc partial (RS), two
//   ring buffers per half.
#include "parallel/gemm2d/gemm2d_impl.hpp"

namespace meshtp::parallel::detail {
namespace {

using comm::Request;

// Message tags: with Nc = 2 both halves go to the same neighbour.
constexpr int kTopTag = 0;
constexpr int kBottomTag = 1;

// The row halves of a block: the top ⌊rows/2⌋ rows and the rest.
struct Halves {
  std::int64_t top = 0, bottom = 0;
};
Halves halves(std::int64_t rows, int nc) {
  if (nc == 1) return {rows, 0};  // nothing moves: one GeMM
  return {rows / 2, rows - rows / 2};
}

struct Ring {
  int left = 0, right = 0;
};
Ring ring_of(const Grid& g) { return {(g.j + g.nc - 1) % g.nc, (g.j + 1) % g.nc}; }

// Two-way ring all-gather of this rank's block `mine` (rows × cols, packed) along the row:
// step(t, top, l, bottom, l', in_flight, chunks) is called with top(A_il), l = j+t, and
// bottom(A_il'), l' = j−t, while the next two halves move.
template <typename Step>
void two_way_all_gather(const Grid& g, const View& mine, const Gemm2dOptions& o,
                        Gemm2dWorkspace& ws, Step step) {
  const Ring r = ring_of(g);
  const Halves h = halves(mine.rows, g.nc);
  const View top_ring[2] = {ws.get(10, h.top, mine.cols, mine.type),
                            ws.get(11, h.top, mine.cols, mine.type)};
  const View bottom_ring[2] = {ws.get(12, h.bottom, mine.cols, mine.type),
                               ws.get(13, h.bottom, mine.cols, mine.type)};
  View top = mine.row_band(0, h.top);
  View bottom = mine.row_band(h.top, h.bottom);
  for (int t = 0; t < g.nc; ++t) {
    Request top_out, top_in, bottom_out, bottom_in;
    const int next = (t + 1) % 2;
    if (t + 1 < g.nc) {
      top_in = g.row->irecv(msg(top_ring[next]), r.right, kTopTag);
      bottom_in = g.row->irecv(msg(bottom_ring[next]), r.left, kBottomTag);
      top_out = g.row->isend(cmsg(top), r.left, kTopTag);
      bottom_out = g.row->isend(cmsg(bottom), r.right, kBottomTag);
    }
    step(t, top, (g.j + t) % g.nc, bottom, (g.j - t + g.nc) % g.nc,
         InFlight{&top_out, &top_in, &bottom_out, &bottom_in}, o.progress_splits);
    for (Request* q : {&top_out, &top_in, &bottom_out, &bottom_in}) q->wait();
    top = top_ring[next];
    bottom = bottom_ring[next];
  }
}

void wang_os(const Grid& g, const View& a, const View& b, const View& c, const Gemm2dOptions& o,
             Gemm2dWorkspace& ws) {
  const std::int64_t k = a.cols * g.nc;
  View b_col = b;  // B_*j: k × n/Nc
  if (g.nr > 1) {
    b_col = ws.get(0, k, b.cols, b.type);
    g.col->all_gather(cmsg(b), msg(b_col));
  }
  const Halves h = halves(c.rows, g.nc);
  const View c_top = c.row_band(0, h.top), c_bottom = c.row_band(h.top, h.bottom);
  two_way_all_gather(
      g, a, o, ws,
      [&](int t, const View& top, int l, const View& bottom, int l2, const InFlight& f,
          int chunks) {
        const float beta = t == 0 ? 0.0f : 1.0f;
        auto k_block = [&](int blk) { return b_col.row_band(blk * a.cols, a.cols); };
        if (h.top > 0) {
          gemm_poking(top, Trans::kNo, k_block(l), Trans::kNo, c_top, beta, f, chunks, ws);
        }
        if (h.bottom > 0) {
          gemm_poking(bottom, Trans::kNo, k_block(l2), Trans::kNo, c_bottom, beta, f, chunks, ws);
        }
      });
}

void wang_ls(const Grid& g, const View& a, const View& b, const View& c, const Gemm2dOptions& o,
             Gemm2dWorkspace& ws) {
  const std::int64_t n = b.rows * g.nr;
  View b_col = b;  // B_*j: n × k/Nc
  if (g.nr > 1) {
    b_col = ws.get(0, n, b.cols, b.type);
    g.col->all_gather(cmsg(b), msg(b_col));
  }
  const Ring r = ring_of(g);
  const Halves h = halves(c.rows, g.nc);
  const View a_top = a.row_band(0, h.top);
  const View a_bottom = a.row_band(h.top, h.bottom);
  const View top_sums[2] = {ws.get(1, h.top, c.cols, c.type), ws.get(2, h.top, c.cols, c.type)};
  const View bottom_sums[2] = {ws.get(4, h.bottom, c.cols, c.type),
                               ws.get(5, h.bottom, c.cols, c.type)};
  const View top_in_buf = ws.get(3, h.top, c.cols, c.type);
  const View bottom_in_buf = ws.get(6, h.bottom, c.cols, c.type);
  Request to_left[2], to_right[2], from_right, from_left;
  auto n_block = [&](int blk) { return b_col.row_band(blk * c.cols, c.cols); };
  for (int t = 0; t < g.nc; ++t) {
    const int top_target = (g.j + t + 1) % g.nc;
    const int bottom_target = (g.j - t - 1 + 2 * g.nc) % g.nc;
    const bool last = t + 1 == g.nc;
    const int buf = t % 2;
    const View top_sum = last ? c.row_band(0, h.top) : top_sums[buf];
    const View bottom_sum = last ? c.row_band(h.top, h.bottom) : bottom_sums[buf];
    to_left[buf].wait();  // the sends of step t−2 read these buffers
    to_right[buf].wait();
    const InFlight f{&from_right, &from_left, &to_left[1 - buf], &to_right[1 - buf]};
    if (h.top > 0) {
      gemm_poking(a_top, Trans::kNo, n_block(top_target), Trans::kYes, top_sum, 0.0f, f,
                  o.progress_splits, ws);
    }
    if (h.bottom > 0) {
      gemm_poking(a_bottom, Trans::kNo, n_block(bottom_target), Trans::kYes, bottom_sum, 0.0f, f,
                  o.progress_splits, ws);
    }
    if (t > 0) {
      from_right.wait();
      ws.backend().add(top_sum, top_in_buf);
      from_left.wait();
      ws.backend().add(bottom_sum, bottom_in_buf);
    }
    if (!last) {
      to_left[buf] = g.row->isend(cmsg(top_sums[buf]), r.left, kTopTag);
      to_right[buf] = g.row->isend(cmsg(bottom_sums[buf]), r.right, kBottomTag);
      from_right = g.row->irecv(msg(top_in_buf), r.right, kTopTag);
      from_left = g.row->irecv(msg(bottom_in_buf), r.left, kBottomTag);
    }
  }
  for (Request* q : {&to_left[0], &to_left[1], &to_right[0], &to_right[1]}) q->wait();
}

void wang_rs(const Grid& g, const View& a, const View& b, const View& c, const Gemm2dOptions& o,
             Gemm2dWorkspace& ws) {
  const std::int64_t m = a.cols * g.nc;
  // P = A_i*ᵀ · B_ij (m × n/Nc); with one row of chips in the column it is C_ij itself.
  const View partial = g.nr == 1 ? c : ws.get(0, m, c.cols, c.type);
  const Halves h = halves(a.rows, g.nc);
  const View b_top = b.row_band(0, h.top);
  const View b_bottom = b.row_band(h.top, h.bottom);
  two_way_all_gather(
      g, a, o, ws,
      [&](int t, const View& top, int l, const View& bottom, int l2, const InFlight& f,
          int chunks) {
        // m-block l meets the top half at step (l−j) mod Nc and the bottom
        // half at (j−l) mod Nc; the earlier one writes it (β = 0), the top
        // first when they coincide.
        const float top_beta = 2 * t <= g.nc ? 0.0f : 1.0f;
        const float bottom_beta = t > 0 && 2 * t < g.nc ? 0.0f : 1.0f;
        auto m_block = [&](int blk) { return partial.row_band(blk * a.cols, a.cols); };
        if (h.top > 0) {
          gemm_poking(top, Trans::kYes, b_top, Trans::kNo, m_block(l), top_beta, f, chunks, ws);
        }
        if (h.bottom > 0) {
          gemm_poking(bottom, Trans::kYes, b_bottom, Trans::kNo, m_block(l2), bottom_beta, f,
                      chunks, ws);
        }
      });
  if (g.nr > 1) g.col->reduce_scatter(cmsg(partial), msg(c), comm::ReduceOp::kSum);
}

}  // namespace

const Gemm2dDataflows kWang = {wang_os, wang_ls, wang_rs};

}  // namespace meshtp::parallel::detail
