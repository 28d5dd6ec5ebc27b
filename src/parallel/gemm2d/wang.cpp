// Wang et al. (ASPLOS '22; MeshSlice §2.3.4): the collective along the mesh ROW (mesh dim 1)
// decomposed into Nc send/recv ring steps, each overlapped with the partial GeMM that needs
// (or produces) the block in flight; the collective along the mesh column stays one
// blocking all-gather / reduce-scatter, not overlapped. (The FSDP + 1D-TP combination.)
//
// Math, chip (i, j), ring over the row, left = j−1, right = j+1 (mod Nc):
//   OS  C_ij = Σ_l A_il · B_*j[k-block l]. B_*j = AG_col(B_ij) first (blocking). Step t holds
//       A_il with l = (j+t) mod Nc, multiplies it, and meanwhile passes it left and receives
//       A_i(l+1) from the right — an all-gather spread over the GeMMs.
//   LS  C_ij = Σ_l A_il · (B_*l[n-block j])ᵀ. B_*j = AG_col(B_ij) first. Step t computes
//       P = A_ij · (B_*j[n-block tb])ᵀ for the target column tb = (j+t+1) mod Nc, adds the
//       running sum for tb that arrives from the right, and passes it left; at t = Nc−1 the
//       target is j itself and the sum is C_ij — a ring reduce-scatter spread over the GeMMs.
//       The running sum of step t travels while step t+1 multiplies.
//   RS  C_ij = RdS_col(Σ_l A_il ᵀ-rows): step t holds A_il (l = (j+t) mod Nc, the m-block l)
//       and writes rows m-block l of the partial P = A_i*ᵀ·B_ij (m × n/Nc) while A moves
//       left; then one blocking RdS_col of P gives C_ij.
//
// Worked example, OS on a 2×2 mesh:
//   before   (0,0): A00 B00   (0,1): A01 B01   (1,0): A10 B10   (1,1): A11 B11
//   AG_col   (0,0),(1,0) hold [B00; B10]; (0,1),(1,1) hold [B01; B11]
//   t = 0    (0,0): C00 = A00·B00 while sending A00 to (0,1) and receiving A01 from it
//            (0,1): C01 = A01·B11 while sending A01 to (0,0), receiving A00
//   t = 1    (0,0): C00 += A01·B10;  (0,1): C01 += A00·B01.  After: chip (i,j) holds C_ij.
//
// Cost per rank (|X| = local block bytes):
//   OS  row (Nc−1)·|A_ij| in Nc−1 send/recv steps    column (Nr−1)·|B_ij| (one AG, exposed)
//   LS  row (Nc−1)·|C_ij| in Nc−1 steps              column (Nr−1)·|B_ij| (one AG, exposed)
//   RS  row (Nc−1)·|A_ij| in Nc−1 steps              column (Nr−1)·|C_ij| (one RdS, exposed)
//   Calls: 2(Nc−1) send/recv + 1 collective; sync steps (Nc−1) + (Nr−1).
//   Extra memory: the gathered column operand (OS, LS) or the m × n/Nc partial (RS), two
//   ring buffers.
#include "parallel/gemm2d/gemm2d_impl.hpp"

namespace meshtp::parallel::detail {
namespace {

using comm::Request;


// Ring all-gather of this rank's block `mine` (rows × cols, contiguous) along the row, with
// step(t, held block) called on block l = (j+t) mod Nc while the next one moves.
template <typename Step>
void ring_all_gather(const Grid& g, ConstMatrixView mine, const Gemm2dOptions& o,
                     Gemm2dWorkspace& ws, Step step) {
  const int left = (g.j + g.nc - 1) % g.nc;
  const int right = (g.j + 1) % g.nc;
  std::span<float> ring[2] = {ws.get(10, sz(mine.rows * mine.cols)),
                              ws.get(11, sz(mine.rows * mine.cols))};
  ConstMatrixView held = mine;
  for (int t = 0; t < g.nc; ++t) {
    Request to_left, from_right;
    if (t + 1 < g.nc) {
      from_right = g.row->irecv<float>(ring[(t + 1) % 2], right);
      to_left = g.row->isend(as_span(held), left);
    }
    step(t, held, InFlight{&to_left, &from_right}, o.progress_splits);
    to_left.wait();
    from_right.wait();
    held = as_matrix(ring[(t + 1) % 2], mine.rows, mine.cols);
  }
}

void wang_os(const Grid& g, ConstMatrixView a, ConstMatrixView b, MatrixView c,
             const Gemm2dOptions& o, Gemm2dWorkspace& ws) {
  const std::int64_t k = a.cols * g.nc;
  ConstMatrixView b_col = b;  // B_*j: k × n/Nc
  if (g.nr > 1) {
    auto b_all = ws.get(0, sz(k * b.cols));
    g.col->all_gather(as_span(b), b_all);
    b_col = as_matrix(b_all, k, b.cols);
  }
  ring_all_gather(g, a, o, ws, [&](int t, ConstMatrixView held, const InFlight& f, int chunks) {
    const int l = (g.j + t) % g.nc;
    gemm_poking(held, Trans::kNo, b_col.block(l * a.cols, 0, a.cols, b.cols), Trans::kNo, c,
                t == 0 ? 0.0f : 1.0f, f, chunks, ws);
  });
}

void wang_ls(const Grid& g, ConstMatrixView a, ConstMatrixView b, MatrixView c,
             const Gemm2dOptions& o, Gemm2dWorkspace& ws) {
  const std::int64_t n = b.rows * g.nr;
  ConstMatrixView b_col = b;  // B_*j: n × k/Nc
  if (g.nr > 1) {
    auto b_all = ws.get(0, sz(n * b.cols));
    g.col->all_gather(as_span(b), b_all);
    b_col = as_matrix(b_all, n, b.cols);
  }
  const int left = (g.j + g.nc - 1) % g.nc;
  const int right = (g.j + 1) % g.nc;
  const std::size_t block = sz(c.rows * c.cols);
  std::span<float> sums[2] = {ws.get(1, block), ws.get(2, block)};
  std::span<float> incoming = ws.get(3, block);
  Request to_left[2], from_right;
  for (int t = 0; t < g.nc; ++t) {
    const int target = (g.j + t + 1) % g.nc;
    const bool last = t + 1 == g.nc;
    MatrixView sum = last ? c : as_matrix(sums[t % 2], c.rows, c.cols);
    to_left[t % 2].wait();  // the send of step t−2 read this buffer
    gemm_poking(a, Trans::kNo, b_col.block(target * c.cols, 0, c.cols, b.cols), Trans::kYes, sum,
                0.0f, {&from_right, &to_left[1 - t % 2]}, o.progress_splits, ws);
    if (t > 0) {
      from_right.wait();
      add_into(as_matrix(incoming, c.rows, c.cols), sum);
    }
    if (!last) {
      to_left[t % 2] = g.row->isend<float>(sums[t % 2], left);
      from_right = g.row->irecv<float>(incoming, right);
    }
  }
  to_left[0].wait();
  to_left[1].wait();
}

void wang_rs(const Grid& g, ConstMatrixView a, ConstMatrixView b, MatrixView c,
             const Gemm2dOptions& o, Gemm2dWorkspace& ws) {
  const std::int64_t m = a.cols * g.nc;
  // P = A_i*ᵀ · B_ij (m × n/Nc); with one row of chips in the column it is C_ij itself.
  MatrixView partial = g.nr == 1 ? c : as_matrix(ws.get(0, sz(m * c.cols)), m, c.cols);
  ring_all_gather(g, a, o, ws, [&](int t, ConstMatrixView held, const InFlight& f, int chunks) {
    const int l = (g.j + t) % g.nc;
    gemm_poking(held, Trans::kYes, b, Trans::kNo, partial.block(l * a.cols, 0, a.cols, c.cols),
                0.0f, f, chunks, ws);
  });
  if (g.nr > 1) g.col->reduce_scatter<float>(as_span(partial), as_span(c));
}

}  // namespace

const Gemm2dDataflows kWang = {wang_os, wang_ls, wang_rs};

}  // namespace meshtp::parallel::detail
