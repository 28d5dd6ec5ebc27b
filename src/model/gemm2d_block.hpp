// Pre-LN GPT block under 2D-GeMM tensor parallelism (MeshSlice §2.3, §3.1) on
// DeviceMesh(Nr, Nc):
//
//   x_mid = x + proj(attention(qkv(ln1(x))))
//   y     = x_mid + mlp2(gelu(mlp1(ln2(x_mid))))
//
//   b batch, s sequence, h hidden, a heads, n = b·s tokens; (c0, c1) this rank's coordinates
//   nl = n/Nr local tokens (b/Nr whole sequences), hl = h/Nc local features
//
// Placements: every activation [n, ·] is [Shard(0), Shard(1)] — tokens over mesh rows (dim 0),
// features over mesh columns (dim 1); every linear's matrix is 2D-blocked as gemm2d_linear
// stores it (W [M, K] or V = Wᵀ [K, M], parallel/param_shard.hpp's kGemm2d* kinds); biases and
// LayerNorm parameters are split like the features over dim 1 and replicated over dim 0.
//
//   step        local in → out                 communication (forward / backward)
//   ln1         [nl, hl] → [nl, hl]            AR₁ row stats / AR₁ row sums
//   qkv         [nl, hl] → [nl, 3hl] + bias    gemm2d ×1 / gemm2d ×2 (data, weight)
//   attention   b/Nr sequences, a/Nc heads     —  (column block c1 is q|k|v of its heads)
//   proj        [nl, hl] → [nl, hl] + bias     gemm2d / gemm2d ×2
//   residual    x_mid = x + proj               —
//   ln2, mlp1 (→ [nl, 4hl]), gelu, mlp2 (→ [nl, hl]), residual: as above
//   biases, LN  dw, db = Σ over local rows     one AR₀ per block backward (all of them packed)
//
// Each linear runs its configured algorithm (Cannon, SUMMA, Collective, Wang, MeshSlice) with
// the stationary-preserving dataflow triple of gemm2d_linear: output stationary (forward OS,
// y = OS(x, V)), input stationary (forward LS, y = LS(x, W)), or auto, the larger
// activation. Weight stationary would hand transposed activations between layers and is
// rejected.
//
// The QKV weight's out index is permuted (π in param_shard.hpp) so output column block c1 is
// q | k | v of heads [c1·a/Nc, (c1+1)·a/Nc): the serial attention core then runs locally on
// those heads of this mesh row's whole sequences, and its [nl, hl] output is exactly the
// attention output's block (c0, c1) that proj consumes. Worked example, mesh (2, 2), b = 2,
// h = 4, a = 2: rank (c0, c1) holds sequence c0 and computes head c1, its qkv block being
// global QKV rows {2c1, 2c1+1, 4+2c1, 5+2c1, 8+2c1, 9+2c1} (q, k, v of head c1).
//
// llm.c conventions: forward saves what backward needs; backward runs the steps in reverse;
// parameter gradients +=, dx overwritten; x must stay untouched between forward and backward.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "layout/plan.hpp"
#include "mesh/device_mesh.hpp"
#include "model/layer_blocks.hpp"
#include "model/params.hpp"
#include "parallel/gemm2d/gemm2d_linear.hpp"

namespace meshtp::model {

// The four linears' plans (QKV, proj, mlp1, mlp2), validated on an nr × nc mesh.
struct Gemm2dBlockPlans {
  parallel::Gemm2dLinearPlan qkv, proj, mlp1, mlp2;
};

// Throws meshtp::Error naming the values unless the block runs on a mesh of this shape
// (batch % Nr, heads % Nc, every GeMM valid for the algorithm: Cannon square, S dividing …).
// Depends only on the config and the mesh shape: call before any collective.
Gemm2dBlockPlans plan_gemm2d_block(const BlockConfig& config, const std::vector<int>& mesh_shape);

// Sharding kind of every block parameter (BlockParam order) under these plans.
StackBlock::Shards gemm2d_param_shards(const Gemm2dBlockPlans& plans);

class Gemm2dBlock;

// Buffers one block needs only while it runs; one workspace serves every block of a stack.
class Gemm2dBlockWorkspace : public BlockWorkspaceBase {
 public:
  explicit Gemm2dBlockWorkspace(const Gemm2dBlock& block);

 private:
  friend class Gemm2dBlock;
  // In the block's backend's memory (BlockConfig::backend).
  device::Array proj_y, mlp2_y, dxmid, dgelu, dmlp1, dxn, dattn, dqkv, att_scratch, row_partial;
  device::Array att;         // selective recomputation: the running block's attention probabilities
  device::Array qkv;  // bf16 storage: the running block's q | k | v widened for the core's backward
  device::Array ln_scratch;  // fp64: the norms' sums in flight
  parallel::Gemm2dWorkspace gemm;
};

class Gemm2dBlock : public StackBlock {
 public:
  Gemm2dBlock(const mesh::DeviceMesh& mesh, const BlockConfig& config);

  const BlockConfig& config() const { return config_; }
  const Gemm2dBlockPlans& plans() const { return plans_; }
  // The residual stream: [nl, hl] contiguous, [Shard(0), Shard(1)].
  parallel::ChunkedLayout stream_layout() const override;
  parallel::ActivationShard stream_shard() const override;
  std::unique_ptr<BlockWorkspaceBase> make_workspace() const override {
    return std::make_unique<Gemm2dBlockWorkspace>(*this);
  }
  void forward(const parallel::ChunkedMatrix& y, const parallel::ChunkedMatrix& x,
               BlockWorkspaceBase& ws) override;
  void backward(const parallel::ChunkedMatrix& dx, const parallel::ChunkedMatrix& dy,
                BlockWorkspaceBase& ws) override;

 private:
  friend class Gemm2dBlockWorkspace;
  // A parameter (or its gradient) as a matrix, and as the 1 × n vector it is stored as.
  View weight(int p) const;
  View weight_grad(int p) const;
  View vector(int p) const;
  const device::Array& att(Gemm2dBlockWorkspace& ws) const { return att_.empty() ? ws.att : att_; }
  std::int64_t att_size() const;
  // An [nl, cols] or [1, n] array of the backend (fp32, or for a saved GeMM input the
  // operands' element), and its packed view.
  device::Array alloc(std::int64_t count) const;
  device::Array operand_alloc(std::int64_t count) const;
  View rows(const device::Array& a, std::int64_t cols) const { return a.view(nl_, cols); }

  BlockConfig config_;
  device::Backend* be_;  // config_.backend, or the CPU's
  Gemm2dBlockPlans plans_;
  std::int64_t nl_ = 0, hl_ = 0;

  // The element the saved GeMM inputs (xn1_, qkv_, attn_, xn2_, gelu_) are stored in: bf16
  // when built under bf16 precision (tensor/gemm.hpp saved_operand_element), else fp32. Each
  // is computed in fp32 into a workspace buffer the forward leaves free and rounded into place
  // by a copy; under bf16 a GeMM rounds its operands to exactly those values, so the step is
  // the step of fp32 storage bit for bit. FC1's output mlp1_ is stored alike (computed in
  // the free dmlp1), and GeLU's backward reads it rounded: the gradients then differ by
  // bf16's rounding of GeLU's input (model/block.hpp says why, as Megatron-LM keeps it).
  Element operands_ = Element::kF32;
  bool stores_bf16() const { return operands_ != Element::kF32; }

  // Saved for backward.
  View x_;
  device::Array ln1_mean_, ln1_rstd_, xn1_, qkv_, att_, attn_, xmid_, ln2_mean_, ln2_rstd_, xn2_,
      mlp1_, gelu_;
};

}  // namespace meshtp::model
