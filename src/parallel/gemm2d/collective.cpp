// Collective 2D GeMM (MeshSlice §2.3.4, Fig. 2b): one all-gather or reduce-scatter per mesh
// direction and one local GeMM. Simple and bandwidth-optimal, but nothing overlaps: the GeMM
// waits for both gathers, the reduce-scatter waits for the GeMM.
//
// Math (chip (i, j) of an Nr × Nc mesh; X_ij its block, X_i* = mesh row i's blocks side by
// side, X_*j = mesh column j's blocks stacked):
//   OS  C_ij = A_i* · B_*j              A_i* = AG_row(A_ij), B_*j = AG_col(B_ij)
//   LS  C_ij = RdS_row(A_ij · B_*jᵀ)    B_*j = AG_col(B_ij); the partial product is m/Nr × n,
//                                       rank j' of the row receives the sum of its n/Nc columns
//   RS  C_ij = RdS_col(A_i*ᵀ · B_ij)    A_i* = AG_row(A_ij); partial m × n/Nc, rank i' gets the
//                                       sum of its m/Nr rows
// Loop (OS): start AG_row(A_ij) and AG_col(B_ij) together; wait both; lay the Nc gathered
//            blocks side by side (a row-wise memcpy) into A_i*; C_ij = A_i* · B_*j, one GeMM.
//            (B_*j needs no such step: stacked row blocks are already row-major.)
//   LS: AG_col(B_ij); for each row member j': chunk j' = A_ij · (rows j' of B_*j)ᵀ, the Nc
//       chunks laid end to end as reduce_scatter wants them; RdS_row into C_ij.
//   RS: AG_row(A_ij), side by side = A_i* (k/Nr × m); partial = A_i*ᵀ · B_ij; RdS_col.
//
// Worked example, OS on a 2×2 mesh, every matrix cut into 2×2 blocks:
//   before      chip (0,0): A00 B00   (0,1): A01 B01   (1,0): A10 B10   (1,1): A11 B11
//   AG_row(A)   chips (0,*) hold [A00 A01], chips (1,*) hold [A10 A11]
//   AG_col(B)   chips (*,0) hold [B00; B10], chips (*,1) hold [B01; B11]
//   GeMM        chip (0,0): C00 = A00·B00 + A01·B10, … ; after: chip (i,j) holds C_ij only.
//   LS on the same mesh: chip (0,0) computes [A00·B00ᵀ | A00·B10ᵀ] (its k-half of C00 and C01),
//   chip (0,1) [A01·B01ᵀ | A01·B11ᵀ]; RdS_row leaves C00 = A00·B00ᵀ + A01·B01ᵀ on (0,0).
//
// Cost per rank (|X| = bytes of a local block, ring collectives):
//   OS  row (Nc−1)·|A_ij|   column (Nr−1)·|B_ij|   2 collectives, (Nc−1)+(Nr−1) sync steps
//   LS  row (Nc−1)·|C_ij|   column (Nr−1)·|B_ij|
//   RS  row (Nc−1)·|A_ij|   column (Nr−1)·|C_ij|
//   Extra memory: the gathered operand (and for LS/RS the Nc- or Nr-times larger partial C).
#include "parallel/gemm2d/gemm2d_impl.hpp"

namespace meshtp::parallel::detail {
namespace {

void collective_os(const Grid& g, const View& a, const View& b, const View& c, const Gemm2dOptions&,
                   Gemm2dWorkspace& ws) {
  const std::int64_t k = a.cols * g.nc;
  comm::Request gather_a, gather_b;
  View a_chunks;
  if (g.nc > 1) {
    a_chunks = ws.get(0, g.nc * a.rows, a.cols, a.type);
    gather_a = g.row->iall_gather(cmsg(a), msg(a_chunks));
  }
  View b_col = b;  // B_*j: k × n/Nc
  if (g.nr > 1) {
    b_col = ws.get(2, k, b.cols, b.type);
    gather_b = g.col->iall_gather(cmsg(b), msg(b_col));
  }
  View a_row = a;  // A_i*: m/Nr × k
  gather_a.wait();
  if (g.nc > 1) {
    // The Nc gathered blocks arrive one after another; side by side they are A_i*.
    a_row = ws.get(1, a.rows, k, a.type);
    concat_col_chunks(ws, a_chunks, g.nc, a.rows, a.cols, a_row);
  }
  gather_b.wait();
  gemm_poking(a_row, Trans::kNo, b_col, Trans::kNo, c, 0.0f, {}, 1, ws);
}

void collective_ls(const Grid& g, const View& a, const View& b, const View& c, const Gemm2dOptions&,
                   Gemm2dWorkspace& ws) {
  const std::int64_t n = b.rows * g.nr;
  View b_col = b;  // B_*j: n × k/Nc
  if (g.nr > 1) {
    b_col = ws.get(0, n, b.cols, b.type);
    g.col->all_gather(cmsg(b), msg(b_col));
  }
  if (g.nc == 1) {
    gemm_poking(a, Trans::kNo, b_col, Trans::kYes, c, 0.0f, {}, 1, ws);
    return;
  }
  // Nc partial C blocks one after another: the reduce-scatter's blocks in member order.
  const View partial = ws.get(1, g.nc * c.rows, c.cols, c.type);
  for (int q = 0; q < g.nc; ++q) {
    gemm_poking(a, Trans::kNo, b_col.block(q * c.cols, 0, c.cols, b_col.cols), Trans::kYes,
                partial.row_band(q * c.rows, c.rows), 0.0f, {}, 1, ws);
  }
  g.row->reduce_scatter(cmsg(partial), msg(c), comm::ReduceOp::kSum);
}

void collective_rs(const Grid& g, const View& a, const View& b, const View& c, const Gemm2dOptions&,
                   Gemm2dWorkspace& ws) {
  const std::int64_t m = a.cols * g.nc;
  View a_row = a;  // A_i*: k/Nr × m, used transposed
  if (g.nc > 1) {
    const View a_chunks = ws.get(0, g.nc * a.rows, a.cols, a.type);
    g.row->all_gather(cmsg(a), msg(a_chunks));
    a_row = ws.get(1, a.rows, m, a.type);
    concat_col_chunks(ws, a_chunks, g.nc, a.rows, a.cols, a_row);
  }
  if (g.nr == 1) {
    gemm_poking(a_row, Trans::kYes, b, Trans::kNo, c, 0.0f, {}, 1, ws);
    return;
  }
  const View partial = ws.get(2, m, c.cols, c.type);
  gemm_poking(a_row, Trans::kYes, b, Trans::kNo, partial, 0.0f, {}, 1, ws);
  g.col->reduce_scatter(cmsg(partial), msg(c), comm::ReduceOp::kSum);
}

}  // namespace

const Gemm2dDataflows kCollective = {collective_os, collective_ls, collective_rs};

}  // namespace meshtp::parallel::detail
