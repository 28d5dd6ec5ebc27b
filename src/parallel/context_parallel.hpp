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
// [local tokens, all heads] into [all tokens, NH/cp heads]; each rank runs ordinary causal
// attention over the whole sequences for its heads, and a second all-to-all turns the output
// back. Key/value heads split the same way, NKV/cp each; where NKV < cp (cp a multiple of
// NKV) each rank receives the one key/value head its query heads read, replicated, and the
// backward sums the replicas' gradients (Megatron-Core's rule for GQA under Ulysses). Traffic
// per rank and layer: forward (cp−1)/cp of q, k, v and of out; backward the same again.
//
// Bad shapes are refused before any communication, from global sizes only, naming the values.
#pragma once

#include <cstdint>
#include <span>

#include "comm/communicator.hpp"
#include "layout/plan.hpp"
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

class ContextParallelAttention {
 public:
  // Throws meshtp::Error naming the values unless s % (2·cp) == 0, NH % NKV == 0 and, for
  // Ulysses, NH % cp == 0 and NKV % cp == 0 or cp % NKV == 0; a2a+ring is not run here.
  ContextParallelAttention(const ContextParallelShape& shape, layout::CpComm comm_kind,
                           comm::Communicator cp);

  std::int64_t local_rows() const;
  std::int64_t lse_size() const;  // floats of lse this rank keeps between forward and backward

  // out, lse (overwritten) for this rank's rows of q, k, v. Collective over the cp group.
  void forward(MatrixView out, std::span<float> lse, ConstMatrixView q, ConstMatrixView k,
               ConstMatrixView v);
  // dq, dk, dv (added to, as ops/flash_attention) given dout and the forward's out and lse.
  void backward(MatrixView dq, MatrixView dk, MatrixView dv, ConstMatrixView dout,
                ConstMatrixView q, ConstMatrixView k, ConstMatrixView v, ConstMatrixView out,
                std::span<const float> lse);

 private:
  void ring_forward(MatrixView out, std::span<float> lse, ConstMatrixView q, ConstMatrixView k,
                    ConstMatrixView v);
  void ring_backward(MatrixView dq, MatrixView dk, MatrixView dv, ConstMatrixView dout,
                     ConstMatrixView q, ConstMatrixView k, ConstMatrixView v,
                     ConstMatrixView out, std::span<const float> lse);
  void ulysses_forward(MatrixView out, std::span<float> lse, ConstMatrixView q, ConstMatrixView k,
                       ConstMatrixView v);
  void ulysses_backward(MatrixView dq, MatrixView dk, MatrixView dv, ConstMatrixView dout,
                        ConstMatrixView q, ConstMatrixView k, ConstMatrixView v,
                        ConstMatrixView out, std::span<const float> lse);

  ContextParallelShape shape_;
  layout::CpComm kind_;
  comm::Communicator cp_;
  std::int64_t chunk_ = 0;  // c
};

}  // namespace meshtp::parallel
