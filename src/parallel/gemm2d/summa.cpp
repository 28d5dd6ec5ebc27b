// SUMMA (van de Geijn & Watts '97; MeshSlice §2.3.3, Fig. 2a): the shared dim cut into
// L = lcm(Nr, Nc)·S panels of width w; one broadcast per panel and direction (OS), or a
// broadcast and a reduce (LS, RS), with a one-panel look-ahead: panel t+1's broadcast is in
// flight (ibroadcast, tested between row bands) while panel t is multiplied.
//
// Panel t of a dim d split Nc ways lives on mesh column jt = t / (L/Nc) as its local panel
// t mod (L/Nc); split Nr ways, on mesh row it = t / (L/Nr) as local panel t mod (L/Nr).
// L must divide d, so panels never straddle two chips.
//
// Math and loop, chip (i, j):
//   OS  (panels of k)  for t: A panel (m/Nr × w) bcast along the row from (i, jt);
//                             B panel (w × n/Nc) bcast along the column from (it, j);
//                             C_ij += A_panel · B_panel
//   LS  (panels of n)  for t: B panel (w × k/Nc) bcast along the column from (it, j);
//                             P = A_ij · B_panelᵀ (m/Nr × w);
//                             reduce P along the row to (i, jt): its C columns of panel t
//   RS  (panels of m)  for t: A panel (k/Nr × w) bcast along the row from (i, jt);
//                             P = A_panelᵀ · B_ij (w × n/Nc);
//                             reduce P along the column to (it, j): its C rows of panel t
// The reduces are blocking (the comm layer has no ireduce); they still progress the
// in-flight broadcast of the next panel.
//
// Worked example, OS on a 2×2 mesh, S = 1: L = 2 panels of k, panel t = k-block t.
//   t = 0  row i: (i,0) bcasts A_i0; column j: (0,j) bcasts B_0j; every chip C_ij = A_i0·B_0j
//   t = 1  (i,1) bcasts A_i1; (1,j) bcasts B_1j; C_ij += A_i1·B_1j.  After: C_ij on (i,j).
//   LS, 2×2, S = 1 (panels of n): t = 0: (0,j) bcasts B_0j down column j; chip (i,j) forms
//   A_ij·B_0jᵀ; row i reduces to (i,0) = C_i0. t = 1: (1,j) bcasts B_1j; reduce to (i,1).
//
// Cost per rank (pipelined bcast / reduce: each of P ranks forwards the message once except
// the last, (P−1)/P of it on average): the same bytes as Collective 2D —
//   OS  row (Nc−1)·|A_ij|, column (Nr−1)·|B_ij|;  LS row (Nc−1)·|C_ij|, column (Nr−1)·|B_ij|;
//   RS  row (Nc−1)·|A_ij|, column (Nr−1)·|C_ij|
// — but in 2L calls of L-times smaller messages; each pipelined broadcast or reduce adds
// P−1 pipeline-fill steps, so sync steps = L·((Nc−1)+(Nr−1)): the overhead MeshSlice avoids.

#include "parallel/gemm2d/gemm2d_impl.hpp"

namespace meshtp::parallel::detail {
namespace {

using comm::Request;


struct Panels {
  int count;           // L
  std::int64_t width;  // w
  int per_col_block;   // L / Nc: panels in a block split over the row
  int per_row_block;   // L / Nr: panels in a block split over the column
  int row_owner(int t) const { return t / per_col_block; }  // mesh column holding it
  int col_owner(int t) const { return t / per_row_block; }  // mesh row holding it
  std::int64_t row_offset(int t) const { return (t % per_col_block) * width; }
  std::int64_t col_offset(int t) const { return (t % per_row_block) * width; }
};

Panels make_panels(const Grid& g, std::int64_t d, int slices) {
  const int l = layout::summa_panels(g.nr, g.nc, slices);
  return {l, d / l, l / g.nc, l / g.nr};
}

void summa_os(const Grid& g, const View& a, const View& b, const View& c, const Gemm2dOptions& o,
              Gemm2dWorkspace& ws) {
  const Panels p = make_panels(g, a.cols * g.nc, o.params.slices);
  View a_panel[2], b_panel[2];
  for (int x = 0; x < 2; ++x) {
    a_panel[x] = ws.get(0 + x, a.rows, p.width, a.type);
    b_panel[x] = ws.get(2 + x, p.width, b.cols, b.type);
  }
  Request bcast_a[2], bcast_b[2];
  const auto start = [&](int t) {
    const int x = t % 2;
    if (g.j == p.row_owner(t)) {
      ws.backend().copy(a_panel[x], a.block(0, p.row_offset(t), a.rows, p.width));
    }
    bcast_a[x] = g.row->ibroadcast(msg(a_panel[x]), p.row_owner(t));
    if (g.i == p.col_owner(t)) {
      ws.backend().copy(b_panel[x], b.block(p.col_offset(t), 0, p.width, b.cols));
    }
    bcast_b[x] = g.col->ibroadcast(msg(b_panel[x]), p.col_owner(t));
  };
  start(0);
  for (int t = 0; t < p.count; ++t) {
    const int x = t % 2;
    if (t + 1 < p.count) start(t + 1);
    bcast_a[x].wait();
    bcast_b[x].wait();
    gemm_poking(a_panel[x], Trans::kNo, b_panel[x], Trans::kNo, c, t == 0 ? 0.0f : 1.0f,
                {&bcast_a[1 - x], &bcast_b[1 - x]}, o.progress_splits, ws);
  }
}

void summa_ls(const Grid& g, const View& a, const View& b, const View& c, const Gemm2dOptions& o,
              Gemm2dWorkspace& ws) {
  const Panels p = make_panels(g, c.cols * g.nc, o.params.slices);
  const View b_panel[2] = {ws.get(0, p.width, b.cols, b.type), ws.get(1, p.width, b.cols, b.type)};
  const View partial = ws.get(2, c.rows, p.width, c.type);
  const View reduced = ws.get(3, c.rows, p.width, c.type);
  Request bcast_b[2];
  const auto start = [&](int t) {
    const int x = t % 2;
    if (g.i == p.col_owner(t)) {
      ws.backend().copy(b_panel[x], b.block(p.col_offset(t), 0, p.width, b.cols));
    }
    bcast_b[x] = g.col->ibroadcast(msg(b_panel[x]), p.col_owner(t));
  };
  start(0);
  for (int t = 0; t < p.count; ++t) {
    const int x = t % 2;
    if (t + 1 < p.count) start(t + 1);
    bcast_b[x].wait();
    gemm_poking(a, Trans::kNo, b_panel[x], Trans::kYes, partial, 0.0f, {&bcast_b[1 - x]},
                o.progress_splits, ws);
    const int root = p.row_owner(t);
    g.row->reduce(cmsg(partial), msg(reduced), root, comm::ReduceOp::kSum);
    if (g.j == root) ws.backend().copy(c.block(0, p.row_offset(t), c.rows, p.width), reduced);
  }
}

void summa_rs(const Grid& g, const View& a, const View& b, const View& c, const Gemm2dOptions& o,
              Gemm2dWorkspace& ws) {
  const Panels p = make_panels(g, c.rows * g.nr, o.params.slices);
  const View a_panel[2] = {ws.get(0, a.rows, p.width, a.type), ws.get(1, a.rows, p.width, a.type)};
  const View partial = ws.get(2, p.width, c.cols, c.type);
  Request bcast_a[2];
  const auto start = [&](int t) {
    const int x = t % 2;
    if (g.j == p.row_owner(t)) {
      ws.backend().copy(a_panel[x], a.block(0, p.row_offset(t), a.rows, p.width));
    }
    bcast_a[x] = g.row->ibroadcast(msg(a_panel[x]), p.row_owner(t));
  };
  start(0);
  for (int t = 0; t < p.count; ++t) {
    const int x = t % 2;
    if (t + 1 < p.count) start(t + 1);
    bcast_a[x].wait();
    gemm_poking(a_panel[x], Trans::kYes, b, Trans::kNo, partial, 0.0f, {&bcast_a[1 - x]},
                o.progress_splits, ws);
    const int root = p.col_owner(t);
    // The root's panel rows of C are contiguous: reduce straight into them.
    const comm::Buffer target = g.i == root ? msg(c.row_band(p.col_offset(t), p.width))
                                            : comm::Buffer{nullptr, c.type, 0};
    g.col->reduce(cmsg(partial), target, root, comm::ReduceOp::kSum);
  }
}

}  // namespace

const Gemm2dDataflows kSumma = {summa_os, summa_ls, summa_rs};

}  // namespace meshtp::parallel::detail
