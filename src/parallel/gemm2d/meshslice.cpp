// MeshSlice 2D GeMM (MeshSlice §3.1, Fig. 5, Alg. 1–2): the collectives of Collective 2D cut
// into S partial collectives on sub-blocks, software-pipelined against partial GeMMs in BOTH
// mesh directions.
//
// Math. Take OS on chip (i, j): C_ij = A_i*·B_*j = Σ_p a_p·b_p over the k outer products of
// A_i*'s columns a_p and B_*j's rows b_p. Any partition of the k indices into S sets gives
// C_ij = Σ_s Σ_{p ∈ set s} a_p·b_p, provided A's columns and B's rows use the SAME sets. A_ij
// holds k-block j of k/Nc indices and B_ij k-block i of k/Nr indices, so the set must be
// definable from either side: MeshSlice takes set s = {p : ⌊p/blk⌋ ≡ s (mod S)}, blocks of
// blk consecutive indices dealt round-robin. When S·blk divides both k/Nc and k/Nr, every
// local block starts at a multiple of S·blk, so "local block b of slice s" is the same rule
// on every chip ("blocked slicing": slice s of a local block is k/(N·S·blk) runs of blk
// contiguous rows or columns, never single scattered vectors). blk defaults to
// gcd(k/Nr, k/Nc)/S: on a square mesh each slice is one contiguous run.
//   AG_row of A's slice-s columns (from every j') and AG_col of B's slice-s rows (from every
//   i') both list the indices of set s in ascending order, so A'·B' is iteration s of Alg. 1.
// LS slices n instead (B's rows and C's columns), RS slices m (A's columns and C's rows): the
// dim the moving operand and the reduce-scattered C share; k is never sliced there, so each
// slice's partial C is final after its reduce-scatter.
//
// Loop (software pipeline; collectives are non-blocking, double-buffered):
//   OS  start AG(0)
//       for s = 0..S−1:  start AG_row(A slice s+1), AG_col(B slice s+1)      [in flight]
//                        wait AG(s); lay A's Nc gathered chunks side by side (row-wise
//                        memcpy) into A'; C_ij += A'·B'  (requests tested between row bands)
//   LS  for s:  start AG_col(B slice s+1); wait AG(s); wait RdS(s−2), unpack its C columns;
//               chunk j' = A_ij · (B' rows of j')ᵀ for every j';  start RdS_row(slice s)
//       so GeMM s overlaps AG(s+1) and RdS(s−1); the epilogue drains RdS(S−2), RdS(S−1).
//   RS  the mirror: AG_row(A slice s), side by side = A' (k/Nr × m/S), partial = A'ᵀ·B_ij
//       (m/S × n/Nc), RdS_col.
// Packing a slice is a row-wise memcpy of its runs (none at all when S = 1 or the slice is
// one run of rows); nothing is ever transposed — BLAS takes A'ᵀ as a flag.
// Prologue (AG(0)) and epilogue (the last GeMM, or the last RdS) are not overlapped: a larger
// S shrinks them but launches more, smaller collectives (§3.1: the K trade-off).
//
// Worked example, OS on a 2×2 mesh, k = 4 (each local block has 2 k-indices), S = 2, blk = 1:
//   global k indices 0 1 | 2 3; slice 0 = {0, 2}, slice 1 = {1, 3}
//   before   chip (0,0): A00 = A[0:m/2, 0:2], B00 = B[0:2, 0:n/2]; chip (0,1): A01 = A[.., 2:4] …
//   s = 0    (0,0) sends column 0 of A00 (global 0), (0,1) column 0 of A01 (global 2):
//            after AG_row both hold A[0:m/2, {0,2}]; AG_col gives B[{0,2}, 0:n/2] on (0,0),(1,0)
//            (0,0): C00 = A[.., {0,2}]·B[{0,2}, ..]        — meanwhile slice 1 is gathered
//   s = 1    (0,0): C00 += A[.., {1,3}]·B[{1,3}, ..]  = A_0*·B_*0 after both slices.
//
// Cost per rank: the same bytes as Collective 2D (OS: row (Nc−1)·|A_ij|, column
// (Nr−1)·|B_ij|; LS: row (Nc−1)·|C_ij|, column (Nr−1)·|B_ij|; RS: row (Nc−1)·|A_ij|,
// column (Nr−1)·|C_ij|), in S partial collectives per direction: 2S calls and
// S·((Nc−1)+(Nr−1)) sync steps. Time ≈ prologue + (S−1)·max(AG_row, AG_col, GeMM) +
// epilogue (MeshSlice §3.2). Extra memory: two slices of each moving operand, gathered and packed.
#include "core/error.hpp"
#include "parallel/gemm2d/gemm2d_impl.hpp"

namespace meshtp::parallel::detail {
namespace {

using comm::Request;


// Slice s of x's rows as a send buffer: x itself when S = 1, a view when the slice is one
// contiguous run, else packed into `pack`.
View row_slice(Gemm2dWorkspace& ws, const View& x, const Slicing& sl, int s, const View& pack) {
  if (sl.slices() == 1) return x;
  if (sl.blocks_per_slice() == 1) return x.row_band(sl.block_start(s, 0), sl.block);
  pack_rows(ws, x, sl, s, pack);
  return pack;
}

// Slice s of x's columns as a send buffer: x itself when S = 1, else packed (row-wise
// copies of each block's runs) into `pack`.
View col_slice(Gemm2dWorkspace& ws, const View& x, const Slicing& sl, int s, const View& pack) {
  if (sl.slices() == 1) return x;
  pack_cols(ws, x, sl, s, pack);
  return pack;
}

// The gathered column slices of a row: Nc chunks (rows × width) one after another. Side by
// side they are the slice as a row-major matrix; with one chip in the row they already are.
View gathered_cols(const Grid& g, Gemm2dWorkspace& ws, const View& chunks, std::int64_t rows,
                   std::int64_t width, const View& side_by_side) {
  if (g.nc == 1) return reshape(chunks, rows, width);
  concat_col_chunks(ws, chunks, g.nc, rows, width, side_by_side);
  return side_by_side;
}

void meshslice_os(const Grid& g, const View& a, const View& b, const View& c,
                  const Gemm2dOptions& o, Gemm2dWorkspace& ws) {
  const int S = o.params.slices;
  const std::int64_t k = a.cols * g.nc;
  const std::int64_t blk = slicing_block(k, g.nr, g.nc, o);
  const Slicing sa{a.cols, o.params, blk};  // A_ij's columns: k/Nc
  const Slicing sb{b.rows, o.params, blk};  // B_ij's rows: k/Nr
  const std::int64_t ks = k / S;
  View a_send[2], a_recv[2], b_send[2], b_recv[2];
  for (int x = 0; x < 2; ++x) {
    a_send[x] = ws.get(0 + x, a.rows, sa.slice_extent(), a.type);
    a_recv[x] = ws.get(2 + x, g.nc * a.rows, sa.slice_extent(), a.type);  // Nc chunks
    b_send[x] = ws.get(4 + x, sb.slice_extent(), b.cols, b.type);
    b_recv[x] = ws.get(6 + x, ks, b.cols, b.type);
  }
  const View a_slice = ws.get(8, a.rows, ks, a.type);
  Request gather_a[2], gather_b[2];
  const auto start = [&](int s) {
    const int x = s % 2;
    gather_a[x] = g.row->iall_gather(cmsg(col_slice(ws, a, sa, s, a_send[x])), msg(a_recv[x]));
    gather_b[x] = g.col->iall_gather(cmsg(row_slice(ws, b, sb, s, b_send[x])), msg(b_recv[x]));
  };
  start(0);
  for (int s = 0; s < S; ++s) {
    const int x = s % 2;
    if (s + 1 < S) start(s + 1);
    gather_a[x].wait();
    const View a_s = gathered_cols(g, ws, a_recv[x], a.rows, sa.slice_extent(), a_slice);
    gather_b[x].wait();
    gemm_poking(a_s, Trans::kNo, b_recv[x], Trans::kNo, c, s == 0 ? 0.0f : 1.0f,
                {&gather_a[1 - x], &gather_b[1 - x]}, o.progress_splits, ws);
  }
}

void meshslice_ls(const Grid& g, const View& a, const View& b, const View& c,
                  const Gemm2dOptions& o, Gemm2dWorkspace& ws) {
  const int S = o.params.slices;
  const std::int64_t n = c.cols * g.nc;
  const std::int64_t blk = slicing_block(n, g.nr, g.nc, o);
  const Slicing sb{b.rows, o.params, blk};  // B_ij's rows: n/Nr
  const Slicing sc{c.cols, o.params, blk};  // C_ij's columns: n/Nc
  const std::int64_t ns = n / S;
  const std::int64_t ncs = sc.slice_extent();  // columns of one row member's chunk
  View b_send[2], b_recv[2], c_part[2], c_recv[2];
  for (int x = 0; x < 2; ++x) {
    b_send[x] = ws.get(0 + x, sb.slice_extent(), b.cols, b.type);
    b_recv[x] = ws.get(2 + x, ns, b.cols, b.type);
    c_part[x] = ws.get(4 + x, g.nc * c.rows, ncs, c.type);  // Nc chunks, one per member
    c_recv[x] = ws.get(6 + x, c.rows, ncs, c.type);
  }
  Request gather_b[2], scatter_c[2];
  const auto start_gather = [&](int s) {
    const int x = s % 2;
    gather_b[x] = g.col->iall_gather(cmsg(row_slice(ws, b, sb, s, b_send[x])), msg(b_recv[x]));
  };
  const auto finish_scatter = [&](int s) {
    scatter_c[s % 2].wait();
    unpack_cols(ws, c_recv[s % 2], sc, s, c);
  };
  const int pieces = std::max(1, (o.progress_splits + g.nc - 1) / g.nc);
  start_gather(0);
  for (int s = 0; s < S; ++s) {
    const int x = s % 2;
    if (s + 1 < S) start_gather(s + 1);
    gather_b[x].wait();
    if (s >= 2) finish_scatter(s - 2);  // frees c_part[x]
    const InFlight in_flight{&gather_b[1 - x], &scatter_c[1 - x]};
    for (int q = 0; q < g.nc; ++q) {
      gemm_poking(a, Trans::kNo, b_recv[x].row_band(q * ncs, ncs), Trans::kYes,
                  c_part[x].row_band(q * c.rows, c.rows), 0.0f, in_flight, pieces, ws);
      in_flight.poke();
    }
    scatter_c[x] = g.row->ireduce_scatter(cmsg(c_part[x]), msg(c_recv[x]), comm::ReduceOp::kSum);
  }
  for (int s = std::max(0, S - 2); s < S; ++s) finish_scatter(s);
}

void meshslice_rs(const Grid& g, const View& a, const View& b, const View& c,
                  const Gemm2dOptions& o, Gemm2dWorkspace& ws) {
  const int S = o.params.slices;
  const std::int64_t m = c.rows * g.nr;
  const std::int64_t blk = slicing_block(m, g.nr, g.nc, o);
  const Slicing sa{a.cols, o.params, blk};  // A_ij's columns: m/Nc
  const Slicing sc{c.rows, o.params, blk};  // C_ij's rows: m/Nr
  const std::int64_t ms = m / S;
  // With one run per slice the reduce-scatter lands in C's rows directly.
  const bool direct = sc.blocks_per_slice() == 1;
  View a_send[2], a_recv[2], c_part[2], c_recv[2];
  for (int x = 0; x < 2; ++x) {
    a_send[x] = ws.get(0 + x, a.rows, sa.slice_extent(), a.type);
    a_recv[x] = ws.get(2 + x, g.nc * a.rows, sa.slice_extent(), a.type);  // Nc chunks
    c_part[x] = ws.get(4 + x, ms, c.cols, c.type);
    if (!direct) c_recv[x] = ws.get(6 + x, sc.slice_extent(), c.cols, c.type);
  }
  const View a_slice = ws.get(8, a.rows, ms, a.type);
  Request gather_a[2], scatter_c[2];
  const auto start_gather = [&](int s) {
    const int x = s % 2;
    gather_a[x] = g.row->iall_gather(cmsg(col_slice(ws, a, sa, s, a_send[x])), msg(a_recv[x]));
  };
  const auto finish_scatter = [&](int s) {
    scatter_c[s % 2].wait();
    if (!direct) unpack_rows(ws, c_recv[s % 2], sc, s, c);
  };
  start_gather(0);
  for (int s = 0; s < S; ++s) {
    const int x = s % 2;
    if (s + 1 < S) start_gather(s + 1);
    gather_a[x].wait();
    if (s >= 2) finish_scatter(s - 2);  // frees c_part[x]
    const View a_s = gathered_cols(g, ws, a_recv[x], a.rows, sa.slice_extent(), a_slice);
    gemm_poking(a_s, Trans::kYes, b, Trans::kNo, c_part[x], 0.0f,
                {&gather_a[1 - x], &scatter_c[1 - x]}, o.progress_splits, ws);
    const View target = direct ? c.row_band(sc.block_start(s, 0), sc.block) : c_recv[x];
    scatter_c[x] = g.col->ireduce_scatter(cmsg(c_part[x]), msg(target), comm::ReduceOp::kSum);
  }
  for (int s = std::max(0, S - 2); s < S; ++s) finish_scatter(s);
}

}  // namespace

const Gemm2dDataflows kMeshSlice = {meshslice_os, meshslice_ls, meshslice_rs};

}  // namespace meshtp::parallel::detail
