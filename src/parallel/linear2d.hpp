// ATP's 2D tensor-parallel linear layers on DeviceMesh(d1, d2) (ATP §3.2), and
// Megatron's 1D ones as the mesh (N, 1) case.
//
//   y = x·Wᵀ + b        nn.Linear convention: W [M, K] = [out, in], x [n, K], y [n, M]
//   n rows (tokens b·s) in c chunks of nc rows;  (c0, c1) = this rank's mesh coordinates
//
// Column-first: W [S(0), S(1)] (out over mesh dim 0, in over mesh dim 1), b [S(0), R]
//   forward : x [R, S(1)]  local [nc, K/d2]
//             y_p = x·W_lᵀ                [nc, M/d1]   Partial over mesh dim 1
//             y   = all_reduce₁(y_p) + b_l             [S(1), R]
//   backward: dx_p = dy·W_l               [nc, K/d2]   Partial over mesh dim 0
//             dx   = all_reduce₀(dx_p)                 [R, S(1)]
//             dW_l += dyᵀ·x,  db_l += Σ_n dy           no communication
// Row-first: W [S(1), S(0)] (out over mesh dim 1, in over mesh dim 0), b [R, S(0)]
//   forward : x [S(1), R]  local [nc, K/d1]
//             y_p = x·W_lᵀ                [nc, M/d2]   Partial over mesh dim 0
//             y   = all_reduce₀(y_p) + b_l             [R, S(1)]
//   backward: dx = all_reduce₁(dy·W_l)                 [S(1), R]
//             dW_l += dyᵀ·x,  db_l += Σ_n dy
// (ATP §3.2 writes W as [in, out], so its specs read transposed: column-first [S(1), S(0)].)
//
// Mesh (N, 1) is Megatron: column-first = ColumnParallelLinear (conjugate f: identity forward,
// all-reduce backward), row-first = RowParallelLinear (f̄: all-reduce forward, identity
// backward); the all-reduces over the size-1 mesh dim vanish.
//
// Three variants replace an all-reduce by the scatter/gather it contains:
//   scatter_output (column-first; the QKV linear): the forward all_reduce₁ becomes a
//       reduce_scatter₁ of y_p cut into d2 column pieces — rank (c0, c1) keeps piece c1,
//       [nc, M/(d1·d2)] — and the backward first all_gathers dy over dim 1 back into pieces.
//       Which output features form piece j is the weight's local row order (param_shard.hpp
//       orders QKV rows so that piece j is whole heads of q, k and v).
//   gather_input (row-first; the attention output projection): x arrives as one piece
//       [nc, K/(d1·d2)] and is all_gathered over dim 1 into x_g [nc, K/d1] (d2 pieces); the
//       backward reduce_scatters dx_g over dim 1 instead of all-reducing it.
//   sequence_parallel (mesh (N, 1) only; Megatron-SP): rows of a chunk are split over dim 0,
//       rank c0 holding rows [c0·nc/N, (c0+1)·nc/N) of every chunk. Column-first all_gathers
//       x over dim 0 before its GeMM and reduce_scatters dx_p over dim 0; row-first
//       reduce_scatters y_p over dim 0 and all_gathers dy over dim 0 before its GeMMs.
//
// The four collectives of a layer, by step (— = none; any group of size 1 is none too):
//                     gather_input      reduce output        gather grad        reduce dx
//   column-first      SP: AG₀ rows      AR₁ | RS₁ pieces     — | AG₁ pieces     AR₀ | SP: RS₀ rows
//   row-first         — | AG₁ pieces    AR₀ | SP: RS₀ rows   — | SP: AG₀ rows   AR₁ | RS₁ pieces
// Each backward collective is the transpose of a forward one (AG ↔ RS, AR ↔ identity).
//
// Chunked overlap: every step is split in start(i)/wait(i) per chunk. A caller starts chunk
// i's collective as soon as its GeMM is done and computes chunk i+1 meanwhile; in backward it
// starts every chunk's dx reduction, then runs backward_weight (dW needs no communication)
// while they fly. GeMMs cut themselves into panels and poke MPI while anything watched by the
// Progress is pending (chunked.hpp).
//
// Buffers belong to the caller, in the layouts x_layout() … y_layout(); xg aliases x unless
// gathers_input(), y aliases y_p unless scatters_output() or the row-first SP output. The
// weight/bias are bound views into the caller's parameter storage; gradients accumulate (+=).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "mesh/device_mesh.hpp"
#include "parallel/chunked.hpp"
#include "parallel/chunked_collective.hpp"

namespace meshtp::parallel {

enum class LinearKind { kColumnFirst, kRowFirst };

struct Linear2DSpec {
  LinearKind kind = LinearKind::kColumnFirst;
  std::int64_t in_features = 0;   // K
  std::int64_t out_features = 0;  // M
  std::int64_t rows = 0;          // n: tokens of the whole batch
  int chunks = 1;                 // c; whole sequences are the caller's business
  bool sequence_parallel = false;
  bool scatter_output = false;  // column-first only
  bool gather_input = false;    // row-first only
};

// Megatron's 1D layers by their names, for a mesh (N, 1): ColumnParallelLinear is
// column-first (identity forward, all-reduce of dx backward: f), RowParallelLinear is
// row-first (all-reduce forward: f̄). With sequence_parallel the all-reduces become
// all-gather / reduce-scatter pairs (Megatron-SP's g and ḡ).
inline Linear2DSpec column_parallel_linear(std::int64_t in, std::int64_t out, std::int64_t rows,
                                           int chunks = 1, bool sequence_parallel = false) {
  return {.kind = LinearKind::kColumnFirst, .in_features = in, .out_features = out,
          .rows = rows, .chunks = chunks, .sequence_parallel = sequence_parallel};
}
inline Linear2DSpec row_parallel_linear(std::int64_t in, std::int64_t out, std::int64_t rows,
                                        int chunks = 1, bool sequence_parallel = false) {
  return {.kind = LinearKind::kRowFirst, .in_features = in, .out_features = out,
          .rows = rows, .chunks = chunks, .sequence_parallel = sequence_parallel};
}

// Throws meshtp::Error naming the values unless the spec fits a 2-D mesh of this shape.
// Depends only on the spec and the mesh shape: every rank reaches the same verdict.
void validate(const Linear2DSpec& spec, const std::vector<int>& mesh_shape);

class Linear2D {
 public:
  // Computes on `backend` (its views) and communicates over the mesh's groups, whose
  // transport must carry the backend's memory; the CPU backend when none is given.
  Linear2D(const mesh::DeviceMesh& mesh, const Linear2DSpec& spec);
  Linear2D(const mesh::DeviceMesh& mesh, const Linear2DSpec& spec, device::Backend& backend);

  const Linear2DSpec& spec() const { return spec_; }
  std::int64_t local_in() const { return k_local_; }    // K_l: columns of W_l
  std::int64_t local_out() const { return m_local_; }   // M_l: rows of W_l, size of b_l

  ChunkedLayout x_layout() const;
  ChunkedLayout xg_layout() const;
  ChunkedLayout yp_layout() const;
  ChunkedLayout y_layout() const;
  bool gathers_input() const { return !(x_layout() == xg_layout()); }
  bool scatters_output() const { return !(y_layout() == yp_layout()); }

  // W_l [M_l, K_l] and b_l [1, M_l] as packed views in the backend's memory, their gradients
  // likewise; b and db empty (View{}): no bias; dw and db empty: a forward-only binding.
  void bind(const View& w, const View& b, const View& dw, const View& db);
  // The same on host fp32 spans (stored contiguously).
  void bind(std::span<const float> w, std::span<const float> b, std::span<float> dw,
            std::span<float> db);

  // ---- forward, chunk i ------------------------------------------------------------
  void gather_input_start(int i, const ChunkedMatrix& x, const ChunkedMatrix& xg);
  void gather_input_wait(int i) { gather_input_.wait(i); }
  // y_p(i) = x_g(i)·W_lᵀ, then starts the reduction y_p(i) → y(i).
  void forward_start(int i, const ChunkedMatrix& xg, const ChunkedMatrix& yp,
                     const ChunkedMatrix& y, Progress* progress);
  // Waits for the reduction and adds the bias to y(i).
  void forward_wait(int i, const ChunkedMatrix& y);
  // Waits for the reduction only; the caller adds output_bias(y) itself (e.g. fused with the
  // activation after it: ops bias_gelu_forward).
  void forward_wait_without_bias(int i) { reduce_output_.wait(i); }
  // The part of b_l that y holds (all of it, or this rank's scattered share), 1 × y's columns;
  // an empty view: no bias.
  View output_bias(const ChunkedMatrix& y) const;

  // ---- backward, chunk i -----------------------------------------------------------
  // dy(i) → dy_p(i): the transpose of the forward reduction (a gather, or nothing).
  void gather_grad_start(int i, const ChunkedMatrix& dy, const ChunkedMatrix& dyp);
  void gather_grad_wait(int i) { gather_grad_.wait(i); }
  // dx_g(i) = dy_p(i)·W_l (overwritten), then starts the reduction dx_g(i) → dx(i).
  void backward_data_start(int i, const ChunkedMatrix& dyp, const ChunkedMatrix& dxg,
                           const ChunkedMatrix& dx, Progress* progress);
  void backward_data_wait(int i) { reduce_grad_.wait(i); }
  // dW_l += Σ_i dy_p(i)ᵀ·x_g(i),  db_l += Σ rows of dy_p: no communication.
  void backward_weight(const ChunkedMatrix& dyp, const ChunkedMatrix& xg, Progress* progress);

  // Whole batch, chunk after chunk (tests, and callers with nothing to interleave).
  void forward(const ChunkedMatrix& x, const ChunkedMatrix& xg, const ChunkedMatrix& yp,
               const ChunkedMatrix& y, Progress* progress);
  void backward(const ChunkedMatrix& dy, const ChunkedMatrix& dyp, const ChunkedMatrix& dxg,
                const ChunkedMatrix& dx, const ChunkedMatrix& xg, Progress* progress);

  // Registers the four collectives with a Progress, so GeMMs poke them.
  void watch(Progress& progress);
  CollectiveKind collective(int step) const;  // 0..3 in the table's column order

 private:
  int in_pieces() const { return spec_.gather_input ? d2_ : 1; }
  int out_pieces() const { return spec_.scatter_output ? d2_ : 1; }
  View w_block(int jy, int jx) const;
  View dw_block(int jy, int jx) const;
  bool has_bias() const { return b_.data != nullptr; }

  device::Backend* backend_;
  Linear2DSpec spec_;
  int d1_ = 1, d2_ = 1, c1_ = 0;
  std::int64_t k_local_ = 0, m_local_ = 0, chunk_rows_ = 0;
  View w_, b_, dw_, db_;
  ChunkedCollective gather_input_, reduce_output_, gather_grad_, reduce_grad_;
};

}  // namespace meshtp::parallel
