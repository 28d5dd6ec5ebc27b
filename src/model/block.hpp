// Pre-LN GPT block under ATP tensor parallelism on DeviceMesh(d1, d2) (ATP §3.2.1):
//
//   x_mid = x + proj(attention(qkv(ln1(x))))
//   y     = x_mid + mlp2(gelu(mlp1(ln2(x_mid))))
//
// The Llama family (layout/model_shape.hpp fields) runs the same steps: ln1/ln2 RMSNorm
// (one N-double all-reduce of Σx² instead of LayerNorm's two sums; parallel/
// layernorm_sharded.hpp), qkv of g KV heads (kv_heads; each rank's piece q | k | v of its a/T
// query heads and their g/T KV heads, T = d1·d2, ParamShard::kQkvWeight's sections; for g < T,
// T % g == 0, a copy of the one KV head they read, its gradient summed over the copies by the
// stack: replica_grad), RoPE on
// the q and k columns of each chunk right after qkv (and on dq, dk right before its backward;
// theta 10000), the core grouped-query (fused: ops/flash_attention.hpp with NKV; unfused: the
// KV heads widened per sequence), and mlp1 of 2f columns [gate | up] of this rank's f/d1
// features (ParamShard::kSwigluWeight) → swiglu → mlp2 of f; SwiGLU models have no biases.
//
//   b batch, s sequence, h hidden, a heads (head dim hd = h/a), n = b·s tokens
//   c chunks of b/c whole sequences (nc = n/c rows);  (c0, c1) this rank's mesh coordinates
//   w = h/(d1·d2): the width of this rank's heads (a/(d1·d2) of them)
//
// Placements and communication, per chunk (AR/RS/AG = all-reduce / reduce-scatter /
// all-gather; the subscript is the mesh dim; a dim of size 1 communicates nothing):
//
//   step        layout in                   local out            forward       backward
//   ln1         x [R, S(1)] [nc, h/d2]      [nc, h/d2]           AR₁ row stats AR₁ row sums
//   qkv         column-first, scattered     [nc, 3w] own heads   RS₁ pieces    AG₁ dqkv, AR₀ dx
//   attention   own heads, all tokens       [nc, w]              —             —
//   proj        row-first, gathered input   [nc, h/d2]           AG₁, AR₀      RS₁ dx
//   residual    x_mid [R, S(1)]             [nc, h/d2]           —             —
//   ln2         as ln1                                           AR₁ stats     AR₁ sums
//   mlp1         column-first                [nc, 4h/d1] [S(1),R] AR₁           AR₀ dx
//   gelu        local on [S(1), R]          [nc, 4h/d1]          —             —
//   mlp2         row-first                   [nc, h/d2]           AR₀           AR₁ dx
//   residual    y [R, S(1)]                 [nc, h/d2]           —             —
//
// The attention core is fully sharded: QKV's Partial-over-dim-1 output is reduce-scattered
// along whole heads (never all-reduced), the core runs on a/(d1·d2) heads of every token, and
// the all-gather over dim 1 restores [nc, h/d1] for the row-first projection. Per layer and
// token, the all-reduce-equivalent volume is 3h/d1 + h/d1 over dim 1 and h/d2 over dim 0 for
// attention, 4h/d1 and h/d2 for the MLP: ATP Eq. 2's 7h/(d1·B2) + 2h/(d2·B1).
//
// Worked example, mesh (2, 2), h = 8, a = 4 (hd = w = 2: one head per rank), one chunk:
//   x on (c0, c1):        x[:, 4·c1 : 4·c1+4]                       hidden split over dim 1
//   qkv partial y_p:      [n, 12] = piece j ∈ {0, 1}: q|k|v of head 2·c0+j, summed over only
//                         this rank's 4 input features → Partial over dim 1
//   RS₁ {(c0,0),(c0,1)}:  (c0, c1) keeps piece c1, now complete: q|k|v of head 2·c0+c1 [n, 6]
//   attention core:       head 2·c0+c1 of every token → [n, 2]
//   AG₁:                  [n, 4] = heads 2·c0, 2·c0+1 (pieces 0, 1) = attn[:, 4·c0 : 4·c0+4]
//   proj y_p:             W_proj rows 4·c1.. (out), columns 4·c0.. (in) → [n, 4] Partial
//                         over dim 0
//   AR₀ {(0,c1),(1,c1)}:  proj(attn)[:, 4·c1 : 4·c1+4] = x's layout again, + x → x_mid
//
// Context parallelism (layout.cp > 1, BlockConfig::cp_group; Megatron-Core's CP, the Llama 3
// paper §3.3.2): the block holds b·s/cp token rows, this rank's zigzag share of each sequence,
// chunk-major per batch chunk (chunk r of every sequence, then chunk 2·cp−1−r). Every step but
// the attention core is token-local and runs on them unchanged; RoPE rotates each zigzag
// chunk by its true positions; the core is parallel/context_parallel.hpp's (ring, Ulysses
// all-to-all or both, over this rank's a/(d1·d2) heads), flash-style, so the layout's attention
// must be fused. The parameters' gradients are then partial over cp: the trainer sums them
// over dp·cp (train/pipeline_model.hpp). The layer allocates its transient buffers per call
// (the one exception to "forward and backward allocate nothing" below besides the comm
// layer's requests; plan::cp_layer_floats prices them).
//
// Sequence parallelism (mesh (N, 1), Megatron-SP): the stream is split over tokens instead,
// rank c0 holding rows [c0·nc/N, (c0+1)·nc/N) of every chunk (parallel/activation_shard.hpp);
// LayerNorm and the residuals run on those rows; the column-first linears all-gather their
// input over dim 0 and the row-first ones reduce-scatter their output over dim 0 (and the
// mirror images in backward). LayerNorm gradients are then partial over dim 0: the stack
// all-reduces them once per backward.
//
// Chunk-based overlap (ATP §4): forward and backward are a sequence of stage loops over the
// chunks; each stage waits for chunk i's incoming collective, computes, and starts chunk i's
// outgoing collective non-blocking, so chunk i's communication overlaps chunk i+1's compute
// (and the next stage's compute of chunk i−1). In backward, every linear starts all its
// chunks' dx reductions before its dW GeMM, which needs no communication. Results do not
// depend on c beyond fp32 reassociation.
//
// llm.c conventions: forward saves in the block what backward needs; backward runs the steps
// in exactly the reverse order; parameter gradients accumulate (+=), the input gradient dx is
// overwritten. x must stay untouched between forward and backward. Every buffer is sized in
// the constructor: forward and backward allocate nothing (the comm layer's Request is the one
// exception, a small handle per started collective).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "layout/vocabulary.hpp"
#include "mesh/device_mesh.hpp"
#include "model/layer_blocks.hpp"
#include "model/params.hpp"
#include "ops/cpu_backend.hpp"
#include "ops/rope.hpp"
#include "parallel/activation_shard.hpp"
#include "parallel/chunked.hpp"
#include "parallel/context_parallel.hpp"
#include "parallel/linear2d.hpp"
#include "parallel/moe.hpp"

namespace meshtp::model {

// Throws meshtp::Error naming the values ("heads=12 is not divisible by d1·d2=8 (mesh 4x2)")
// unless the block runs on a mesh of this shape. Depends only on the config and the mesh
// shape, so every rank reaches the same verdict before any collective.
void validate_atp_block(const BlockConfig& config, const std::vector<int>& mesh_shape);

class Block;

// Buffers one block needs only while it runs (forward temporaries, every backward buffer):
// one workspace serves every block of a stack.
class BlockWorkspace : public BlockWorkspaceBase {
 public:
  explicit BlockWorkspace(const Block& block);

 private:
  friend class Block;
  // In the block's backend's memory (BlockConfig::backend); an array the layout does not need
  // is empty.
  device::Array qkv_p, attn, proj_p, proj_y, mlp2_p, mlp2_y;  // forward
  device::Array moe_out;  // shared experts: the routed experts' output, then their input gradient
  device::Array dyg, dgelu, dmlp1, dxn_p, dxn, dxmid, dxmid_g;  // backward
  device::Array datt_p, datt, dqkv, dqkv_g, att_scratch;
  device::Array att;  // selective recomputation: the attention probabilities of the running block
  device::Array qkv_mha, dqkv_mha;  // grouped-query, unfused core: one sequence's widened q | k | v
  device::Array ln_scratch;         // fp64: the norms' sums in flight
  // Under bf16 storage: the running block's q | k | v in fp32 (the forward's, or in backward
  // its saved bf16 copy widened), what RoPE and the attention core read; and its attention
  // output in fp32: where the core writes it before it is rounded into its saved bf16 array
  // (and where selective recomputation's re-run writes it again), and what a fused core's
  // backward reads, widened from the saved copy.
  device::Array qkv, attn_f32;
};

class Block : public StackBlock {
 public:
  Block(const mesh::DeviceMesh& mesh, const BlockConfig& config);

  const BlockConfig& config() const { return config_; }
  // The residual stream: [R, S(1)], or token rows under SP.
  parallel::ChunkedLayout stream_layout() const override;
  parallel::ActivationShard stream_shard() const override;
  bool partial_grad(int k) const override;
  bool replica_grad(int k) const override;
  std::unique_ptr<BlockWorkspaceBase> make_workspace() const override {
    return std::make_unique<BlockWorkspace>(*this);
  }
  void forward(const parallel::ChunkedMatrix& y, const parallel::ChunkedMatrix& x,
               BlockWorkspaceBase& ws) override;
  void backward(const parallel::ChunkedMatrix& dx, const parallel::ChunkedMatrix& dy,
                BlockWorkspaceBase& ws) override;

 private:
  friend class BlockWorkspace;
  using Chunked = parallel::ChunkedMatrix;
  static Chunked view(const device::Array& a, const parallel::ChunkedLayout& l) {
    return Chunked(a.data(), a.type(), l);
  }
  // An fp32 array of n elements of the block's backend (empty for n = 0); operand_buffer:
  // one of operands_ (a saved GeMM input).
  device::Array buffer(std::int64_t n) const;
  device::Array operand_buffer(std::int64_t n) const;
  // Where an op writes chunk i of a saved GeMM input: the input itself when it is fp32, else
  // the fp32 `stage` (a backward buffer of the workspace, free during the forward: dxn_p for
  // the norms' outputs, dgelu for the activation's), which store_operand rounds into place.
  View operand_out(const Chunked& m, int i, const device::Array& stage) const;
  void store_operand(const Chunked& m, int i, const View& written) const;

  void attention_forward_chunk(int i, BlockWorkspace& ws);
  const device::Array& att(BlockWorkspace& ws) const { return att_.empty() ? ws.att : att_; }
  // The attention core's output, the projection's input before its all-gather: the
  // workspace's buffer, or with fused attention a saved one (its backward reads the output);
  // without a gather, the projection's saved input itself. core_out: where the core writes
  // it, that array itself or under bf16 storage the workspace's fp32 one (attn_f32).
  const device::Array& attn_out(BlockWorkspace& ws) const {
    return attn_out_.empty() ? ws.attn : attn_out_;
  }
  Chunked attn_local(BlockWorkspace& ws) const;
  Chunked core_out(BlockWorkspace& ws) const;
  bool fused() const { return config_.layout.attention == layout::Attention::kFused; }
  bool rms() const { return config_.shape.norm == layout::Norm::kRmsNorm; }
  bool swiglu() const { return config_.shape.activation == layout::Activation::kSwiglu; }
  // A MoE block with shared experts; whether the block runs the dense MLP (mlp1_, mlp2_): a
  // dense block's, or the shared experts' beside the routed ones.
  bool shared() const { return config_.shape.shared_experts > 0; }
  bool dense_mlp() const { return !config_.shape.is_moe() || shared(); }
  // The running block's fp32 q | k | v: qkv_out_ itself, or under bf16 storage the
  // workspace's (BlockWorkspace::qkv).
  Chunked qkv_fp32(BlockWorkspace& ws) const;
  // The running block's fp32 FC1 output (with its bias) in the forward: mlp1_y_ itself, or
  // under bf16 storage the workspace's dmlp1, which the forward leaves free.
  Chunked mlp1_fp32(BlockWorkspace& ws) const;
  // qkv itself, or (grouped-query, unfused) its KV heads widened into the workspace.
  View qkv_mha(BlockWorkspace& ws, const View& qkv) const;
  void rope_chunk(int i, const Chunked& qkv, bool backward);
  void attention_backward_chunk(int i, BlockWorkspace& ws);
  void bound() override;
  // Chunk i's rows of a per-row statistic (1 × rows), as a 1 × chunk_rows view.
  View rows_of(const device::Array& per_row, int i) const;
  // A parameter (or gradient) as the 1 × n vector it is stored as; empty if it has none.
  static View vec(std::span<float> p) { return p.empty() ? View{} : host_view(p); }

  BlockConfig config_;
  device::Backend* be_;                 // config_.backend, or the CPU's
  const comm::Communicator* ln_group_;  // mesh dim 1 (hidden split), null under SP
  std::int64_t local_heads_ = 0, head_width_ = 0;  // a/(d1·d2) heads of w columns
  std::int64_t local_kv_ = 0, kv_width_ = 0;       // g/(d1·d2) KV heads of their columns
  device::Array rope_;  // position rope's cos, sin of 0 … s−1 (RopeTable::cos_sin), or empty
  // Context parallelism (config.cp_group): the attention core over the cp ranks, one per
  // batch chunk's b/chunks sequences, on the block's backend; RoPE's tables of this rank's two
  // zigzag chunks.
  std::unique_ptr<parallel::ContextParallelAttention> cp_;
  std::array<device::Array, 2> cp_rope_{};
  parallel::Linear2D qkv_, proj_, mlp1_, mlp2_;
  parallel::Progress progress_;
  // A mixture-of-experts block (shape.num_experts > 0): its MLP is this layer, experts over
  // mesh dim 0 (each rank's own tokens under sequence parallelism: Megatron-Core's folding of
  // expert parallelism onto the tensor-parallel ranks); mlp1_/mlp2_ then only name layouts.
  std::unique_ptr<parallel::ExpertParallelMoe> moe_;

  // The element of the saved GeMM inputs — the norms' outputs (gathered too, where a linear
  // gathers them), q | k | v (after RoPE), the attention output (the projection's input,
  // gathered too), and the dense MLP's activation output — which GeMMs read (forward, the
  // weight gradients' in backward, the unfused attention core's products): bf16 for a block
  // built under bf16 precision (tensor/gemm.hpp saved_operand_element()), so they take the
  // two bytes the memory model prices (plan/memory.hpp), else fp32. RoPE and the attention core
  // run on fp32 copies in the workspace (BlockWorkspace::qkv, attn_f32); the norms and the
  // activation compute in fp32, into operand_out's stage. A bf16 operand multiplies as the
  // fp32 one rounded to it, so the step is the same, bit for bit, as with fp32 storage under
  // bf16 precision — but for the fused core, whose backward reads its output O in
  // D = rowsum(dO ∘ O) and then reads it rounded, as FlashAttention's bf16 O is. A MoE
  // block's ln2 output (the router's GeMM input and the rows its experts get) and its shared
  // experts' MLP are stored alike; the routed experts store their own (parallel/moe.hpp).
  // FC1's output (mlp1_y_), which no GeMM reads, is stored in the same element too, as
  // Megatron-LM keeps it in the model's precision: the forward's activation reads it in fp32
  // (mlp1_fp32) and the backward's reads the rounded copy (Backend::gelu_backward takes a
  // bf16 input), so the loss is the same bit for bit and the gradients differ by bf16's
  // rounding of GeLU's (SwiGLU's) input.
  Element operands_ = Element::kF32;

  // Saved for backward.
  Chunked x_;
  device::Array ln1_mean_, ln1_rstd_, xn1_, xn1g_, qkv_out_, att_, attn_g_;
  device::Array lse_, attn_out_;  // fused attention: each row's log-sum-exp, the core's output
  device::Array xmid_, ln2_mean_, ln2_rstd_, xn2_, xn2g_, mlp1_y_, gelu_;
};

}  // namespace meshtp::model
