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
std::span<const float> row_slice(ConstMatrixView x, const Slicing& sl, int s,
                                 std::span<float> pack) {
  if (sl.slices() == 1) return as_span(x);
  if (sl.blocks_per_slice() == 1) {
    return {x.data + sl.block_start(s, 0) * x.cols, sz(sl.block * x.cols)};
  }
  pack_rows(x, sl, s, pack.data());
  return pack;
}

// Slice s of x's columns as a send buffer: x itself when S = 1, else packed (row-wise
// memcpys of each block's runs) into `pack`.
std::span<const float> col_slice(ConstMatrixView x, const Slicing& sl, int s,
                                 std::span<float> pack) {
  if (sl.slices() == 1) return as_span(x);
  pack_cols(x, sl, s, pack.data());
  return pack;
}

// The gathered column slices of a row: Nc chunks (rows × width) one after another. Side by
// side they are the slice as a row-major matrix; with one chip in the row they already are.
ConstMatrixView gathered_cols(const Grid& g, std::span<float> chunks, std::int64_t rows,
                              std::int64_t width, std::span<float> side_by_side) {
  if (g.nc == 1) return as_matrix(chunks, rows, width);
  MatrixView out = as_matrix(side_by_side, rows, g.nc * width);
  concat_col_chunks(chunks.data(), g.nc, rows, width, out);
  return out;
}

void meshslice_os(const Grid& g, ConstMatrixView a, ConstMatrixView b, MatrixView c,
                  const Gemm2dOptions& o, Gemm2dWorkspace& ws) {
  const int S = o.params.slices;
  const std::int64_t k = a.cols * g.nc;
  const std::int64_t blk = slicing_block(k, g.nr, g.nc, o);
  const Slicing sa{a.cols, o.params, blk};  // A_ij's columns: k/Nc
  const Slicing sb{b.rows, o.params, blk};  // B_ij's rows: k/Nr
  const std::int64_t ks = k / S;
  std::span<float> a_send[2], a_recv[2], b_send[2], b_recv[2];
  for (int x = 0; x < 2; ++x) {
    a_send[x] = ws.get(0 + x, sz(a.rows * sa.slice_extent()));
    a_recv[x] = ws.get(2 + x, sz(a.rows * ks));
    b_send[x] = ws.get(4 + x, sz(sb.slice_extent() * b.cols));
    b_recv[x] = ws.get(6 + x, sz(ks * b.cols));
  }
  const std::span<float> a_slice = ws.get(8, sz(a.rows * ks));
  Request gather_a[2], gather_b[2];
  const auto start = [&](int s) {
    const int x = s % 2;
    gather_a[x] = g.row->iall_gather(col_slice(a, sa, s, a_send[x]), a_recv[x]);
    gather_b[x] = g.col->iall_gather(row_slice(b, sb, s, b_send[x]), b_recv[x]);
  };
  start(0);
  for (int s = 0; s < S; ++s) {
    const int x = s % 2;
    if (s + 1 < S) start(s + 1);
    gather_a[x].wait();
    const ConstMatrixView a_s = gathered_cols(g, a_recv[x], a.rows, sa.slice_extent(), a_slice);
    gather_b[x].wait();
    gemm_poking(a_s, Trans::kNo, as_matrix(b_recv[x], ks, b.cols), Trans::kNo, c,
                s == 0 ? 0.0f : 1.0f, {&gather_a[1 - x], &gather_b[1 - x]}, o.progress_splits, ws);
  }
}

void meshslice_ls(const Grid& g, ConstMatrixView a, ConstMatrixView b, MatrixView c,
                  const Gemm2dOptions& o, Gemm2dWorkspace& ws) {
  const int S = o.params.slices;
  const std::int64_t n = c.cols * g.nc;
  const std::int64_t blk = slicing_block(n, g.nr, g.nc, o);
  const Slicing sb{b.rows, o.params, blk};  // B_ij's rows: n/Nr
  const Slicing sc{c.cols, o.params, blk};  // C_ij's columns: n/Nc
  const std::int64_t ns = n / S;
  const std::int64_t ncs = sc.slice_extent();  // columns of one row member's chunk
  std::span<float> b_send[2], b_recv[2], c_part[2], c_recv[2];
  for (int x = 0; x < 2; ++x) {
    b_send[x] = ws.get(0 + x, sz(sb.slice_extent() * b.cols));
    b_recv[x] = ws.get(2 + x, sz(ns * b.cols));
    c_part[x] = ws.get(4 + x, sz(g.nc * c.rows * ncs));
    c_recv[x] = ws.get(6 + x, sz(c.rows * ncs));
  }
  Request gather_b[2], scatter_c[2];
  const auto start_gather = [&](int s) {
    const int x = s % 2;
    gather_b[x] = g.col->iall_gather(row_slice(b, sb, s, b_send[x]), b_recv[x]);
  };
  const auto finish_scatter = [&](int s) {
    scatter_c[s % 2].wait();
    unpack_cols(c_recv[s % 2].data(), sc, s, c);
  };
  const int pieces = std::max(1, (o.progress_splits + g.nc - 1) / g.nc);
  start_gather(0);
  for (int s = 0; s < S; ++s) {
    const int x = s % 2;
    if (s + 1 < S) start_gather(s + 1);
    gather_b[x].wait();
    if (s >= 2) finish_scatter(s - 2);  // frees c_part[x]
    const ConstMatrixView b_slice = as_matrix(b_recv[x], ns, b.cols);
    const InFlight in_flight{&gather_b[1 - x], &scatter_c[1 - x]};
    for (int q = 0; q < g.nc; ++q) {
      MatrixView chunk{c_part[x].data() + q * c.rows * ncs, c.rows, ncs, ncs};
      gemm_poking(a, Trans::kNo, b_slice.block(q * ncs, 0, ncs, b.cols), Trans::kYes, chunk, 0.0f,
                  in_flight, pieces, ws);
      in_flight.poke();
    }
    scatter_c[x] = g.row->ireduce_scatter<float>(c_part[x], c_recv[x]);
  }
  for (int s = std::max(0, S - 2); s < S; ++s) finish_scatter(s);
}

void meshslice_rs(const Grid& g, ConstMatrixView a, ConstMatrixView b, MatrixView c,
                  const Gemm2dOptions& o, Gemm2dWorkspace& ws) {
  const int S = o.params.slices;
  const std::int64_t m = c.rows * g.nr;
  const std::int64_t blk = slicing_block(m, g.nr, g.nc, o);
  const Slicing sa{a.cols, o.params, blk};  // A_ij's columns: m/Nc
  const Slicing sc{c.rows, o.params, blk};  // C_ij's rows: m/Nr
  const std::int64_t ms = m / S;
  // With one run per slice the reduce-scatter lands in C's rows directly.
  const bool direct = sc.blocks_per_slice() == 1;
  std::span<float> a_send[2], a_recv[2], c_part[2], c_recv[2];
  for (int x = 0; x < 2; ++x) {
    a_send[x] = ws.get(0 + x, sz(a.rows * sa.slice_extent()));
    a_recv[x] = ws.get(2 + x, sz(a.rows * ms));
    c_part[x] = ws.get(4 + x, sz(ms * c.cols));
    c_recv[x] = direct ? std::span<float>() : ws.get(6 + x, sz(sc.slice_extent() * c.cols));
  }
  const std::span<float> a_slice = ws.get(8, sz(a.rows * ms));
  Request gather_a[2], scatter_c[2];
  const auto start_gather = [&](int s) {
    const int x = s % 2;
    gather_a[x] = g.row->iall_gather(col_slice(a, sa, s, a_send[x]), a_recv[x]);
  };
  const auto finish_scatter = [&](int s) {
    scatter_c[s % 2].wait();
    if (!direct) unpack_rows(c_recv[s % 2].data(), sc, s, c);
  };
  start_gather(0);
  for (int s = 0; s < S; ++s) {
    const int x = s % 2;
    if (s + 1 < S) start_gather(s + 1);
    gather_a[x].wait();
    if (s >= 2) finish_scatter(s - 2);  // frees c_part[x]
    const ConstMatrixView a_s = gathered_cols(g, a_recv[x], a.rows, sa.slice_extent(), a_slice);
    gemm_poking(a_s, Trans::kYes, b, Trans::kNo, as_matrix(c_part[x], ms, c.cols), 0.0f,
                {&gather_a[1 - x], &scatter_c[1 - x]}, o.progress_splits, ws);
    const std::span<float> target =
        direct ? std::span<float>(c.data + sc.block_start(s, 0) * c.cols, sz(sc.block * c.cols))
               : c_recv[x];
    scatter_c[x] = g.col->ireduce_scatter<float>(c_part[x], target);
  }
  for (int s = std::max(0, S - 2); s < S; ++s) finish_scatter(s);
}

}  // namespace

const Gemm2dDataflows kMeshSlice = {meshslice_os, meshslice_ls, meshslice_rs};

}  // namespace meshtp::parallel::detail
