// Context parallelism's attention core: causal attention over sequences split across the cp
// ranks of a group, by a ring of key/value blocks or by an all-to-all over heads. Everything
// else in a transformer layer is token-local, so this is the one place context parallelism
// communicates in the forward (the parameters' gradients are then summed over cp as over
// data parallelism).
//
//   B sequences of s tokens, split into 2·cp chunks of c = s/(2·cp) tokens. Zigzag (the
//   Llama 3 paper §3.3.2; Megatron-Core's load balance): rank i holds chunks i and 2·cp−1−i of
//   every sequence, so each rank's causal work is equal. Local rows are CHUNK-MAJOR:
//     rows [0, B·c)      chunk i of sequences 0 … B−1   (row b·c + t: position i·c + t)
//     rows [B·c, 2·B·c)  chunk 2·cp−1−i                 (position (2·cp−1−i)·c + t)
//   cp_global_row maps a local row to its global row b·s + position.
//
//   q [2·B·c, NH·HD], k, v [2·B·c, NKV·HD] (grouped-query attention as ops/flash_attention),
//   out [2·B·c, NH·HD], lse: the log-sum-exp of each local query row and head, in
//   ops/flash_attention's order per chunk (chunk-major, then (b, h, t)): 2·B·NH·c floats.
//
// Ring (CpComm::kRing; Liu et al. 2023 "Ring Attention"; the zigzag of Megatron-Core's
// context parallelism). Forward, step j = 0 … cp−1: this rank holds the key/value block of
// rank src = (i − j) mod cp; it starts sending that block on to rank i+1 and receiving the
// next from rank i−1, then attends its two query chunks to the block's two key chunks by
// absolute position (ops/flash_attention's q_pos/k_pos: a key chunk after a query chunk is
// skipped, the diagonal is causal) and merges each partial (out, lse) into its running one
// (flash_attention_merge): the transfer of step j+1's block overlaps step j's compute.
// Backward: with the final out and lse, each step's block gets this rank's dK, dV into an
// accumulator that travels with it; after the compute the accumulator goes on to rank i+1,
// and after cp steps every accumulator is home (the dK/dV ring). dQ accumulates locally.
// Traffic per rank and layer: forward (cp−1) key/value blocks of 2·B·c·2·NKV·HD; backward the
// same and cp accumulators of that size.
//
// Ulysses (CpComm::kA2a; Jacobs et al. 2023 "DeepSpeed Ulysses"): an all-to-all over cp turns
// [local tokens, all heads] into [all cp ranks' tokens, NH/cp heads]; each rank attends its
// heads over the whole sequences, and a second all-to-all turns the output back. Key/value
// heads split the same way, NKV/cp each; where NKV < cp (cp a multiple of NKV) each rank
// receives the one key/value head its query heads read, replicated, and the backward sums the
// replicas' gradients (Megatron-Core's rule for GQA under Ulysses). Traffic per rank and
// layer: forward (cp−1)/cp of q, k, v and of out; backward the same again (and out, dout).
//
// a2a+ring (CpComm::kA2aRing; Megatron-Core's hierarchical a2a+p2p): cp = u·r, u the a2a
// degree (layout::cp_a2a_size: the largest u < cp dividing cp and NH), over consecutive cp
// ranks, then a ring over the r groups.
//
// One path runs the three: an all-to-all over groups of u consecutive ranks (u = 1 for ring:
// nothing moves; u = cp for Ulysses), after which a rank holds its heads' rows of its group's
// 2·u chunks, then the ring over the r = cp/u ranks of its a2a index (r = 1 for Ulysses: one
// step, every chunk pair), then the all-to-all back.
//
// On the seam (device/backend.hpp): every buffer is an array of the layer's backend and every
// op one of its views' (the fused attention over a key range and its merge, 2D copies, adds),
// so the core runs on the CPU or on a GPU over any transport of the cp group (MPI on host
// memory, host-staged or NCCL for device memory). The host forms (MatrixView, span) are the
// view forms on the CPU backend.
//
// Bad shapes are refused before any communication, from global sizes only, naming the values.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <utility>
#include <vector>

#include "comm/communicator.hpp"
#include "device/backend.hpp"
#include "layout/plan.hpp"
#include "ops/cpu_backend.hpp"
#include "tensor/tensor.hpp"

namespace meshtp::parallel {

struct ContextParallelShape {
  std::int64_t batch = 1;     // B sequences
  std::int64_t seq = 0;       // s tokens per sequence (whole, not this rank's share)
  std::int64_t heads = 1;     // NH
  std::int64_t kv_heads = 1;  // NKV
  std::int64_t head_dim = 1;  // HD
};

// The global row (b·s + position) of local row r on rank `rank` of `cp` (zigzag, chunk-major).
std::int64_t cp_global_row(const ContextParallelShape& shape, int cp, int rank, std::int64_t r);
// Rows this rank holds: 2·B·c = B·s/cp.
std::int64_t cp_local_rows(const ContextParallelShape& shape, int cp);
// The constructor's checks, without a group (every rank alike, before any communication).
void validate_context_parallel(const ContextParallelShape& shape, layout::CpComm comm_kind,
                               int cp);

class ContextParallelAttention {
 public:
  // Throws meshtp::Error naming the values unless s % (2·cp) == 0, NH % NKV == 0 and, for
  // an a2a degree u > 1, NH % u == 0 and NKV % u == 0 or u % NKV == 0 (a2a+ring: u > 1).
  // Collective over cp (it splits the a2a and ring groups). Its buffers and ops are
  // `backend`'s, whose arrays the cp group's transport moves.
  ContextParallelAttention(const ContextParallelShape& shape, layout::CpComm comm_kind,
                           comm::Communicator cp, device::Backend& backend = cpu_backend());

  std::int64_t local_rows() const;
  std::int64_t lse_size() const;  // floats of lse this rank keeps between forward and backward

  // out, lse (overwritten; lse fp32 1 × lse_size()) for this rank's rows of q, k, v: views of
  // the backend's memory. Collective over the cp group.
  void forward(const View& out, const View& lse, const View& q, const View& k, const View& v);
  // dq, dk, dv (added to, as ops/flash_attention) given dout and the forward's out and lse.
  void backward(const View& dq, const View& dk, const View& dv, const View& dout, const View& q,
                const View& k, const View& v, const View& out, const View& lse);

  // The host forms: the view forms on host memory (a layer on the CPU backend).
  void forward(MatrixView out, std::span<float> lse, ConstMatrixView q, ConstMatrixView k,
               ConstMatrixView v) {
    forward(host_view(out), host_view(std::span<const float>(lse)), host_view(q), host_view(k),
            host_view(v));
  }
  void backward(MatrixView dq, MatrixView dk, MatrixView dv, ConstMatrixView dout,
                ConstMatrixView q, ConstMatrixView k, ConstMatrixView v, ConstMatrixView out,
                std::span<const float> lse) {
    backward(host_view(dq), host_view(dk), host_view(dv), host_view(dout), host_view(q),
             host_view(k), host_view(v), host_view(out), host_view(lse));
  }

 private:
  void ring_forward(const View& out, const View& lse, const View& q, const View& k, const View& v);
  void ring_backward(const View& dq, const View& dk, const View& dv, const View& dout,
                     const View& q, const View& k, const View& v, const View& out, const View& lse);
  // An all-to-all over the a2a group of `rows` rows of `width` columns to each member, whose
  // block is pieces(j): views of `rows` rows each and the column they start at; returns
  // [u·rows, width], member i's block of this rank's share at rows [i·rows, (i+1)·rows).
  using Pieces = std::vector<std::pair<View, std::int64_t>>;
  device::Array exchange(std::int64_t rows, std::int64_t width,
                         const std::function<Pieces(int j)>& pieces);

  ContextParallelShape shape_;
  layout::CpComm kind_;
  comm::Communicator cp_;
  device::Backend* be_;
  int u_ = 1, r_ = 1;              // a2a degree, ring degree: cp = u·r
  comm::Communicator a2a_, ring_;  // u consecutive ranks; the r ranks of one a2a index
  std::int64_t chunk_ = 0;         // c
  std::int64_t heads_ = 0, kv_heads_ = 0;  // per rank after the all-to-all: NH/u, NKV/u or 1
  // Ring position p → the chunk ids (of 2·cp) its rank holds rows of after the all-to-all,
  // chunk-major: its a2a group's members' two each, in member order.
  std::vector<std::vector<std::int64_t>> ring_chunks_;
};

}  // namespace meshtp::parallel
