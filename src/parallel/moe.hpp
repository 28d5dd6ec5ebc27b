// A mixture-of-experts layer with expert parallelism (ep) and expert tensor parallelism (etp),
// the token flow of Megatron-Core's all-to-all dispatcher (Liu et al. 2025, "MoE Parallel
// Folding", §3; Megatron-Core moe/token_dispatcher.py), on the serial pieces of ops/moe.hpp.
//
//   E experts, El = E/ep of them on each ep rank (expert e on ep rank e/El), each expert's MLP
//   width F split over etp: Fl = F/etp columns of W1ᵀ and of W2 per rank. Every rank holds
//   its own N tokens x [N, h] (the layer knows nothing of where they came from: data, context
//   or sequence parallelism), the whole router W_r [E, h], and its experts' shards:
//     w1 [El·Fl, h]   local expert l's rows [l·Fl, (l+1)·Fl) = W1_e rows [t·Fl, (t+1)·Fl)
//     w2 [El·h, Fl]   local expert l's rows [l·h, (l+1)·h) = W2_e columns [t·Fl, (t+1)·Fl)
//   with e = ep_rank·El + l and t = etp_rank.
//
// Forward (backward is the mirror image, right to left):
//   route      ℓ = x·W_rᵀ, top-k, capacity (per rank: drops depend on the rank's tokens)
//   counts     c_e all-reduced over the token group (the aux loss's set)
//   permute    x → xp, rows grouped by expert, so by destination ep rank
//   counts     all_to_all over ep of the per-expert row counts (El per destination)
//   dispatch   all_to_allv over ep of the rows → rows from every source, (source, expert)
//   gather     over etp: every etp rank gets every etp peer's rows (an all_to_allv sending
//              the same block to each peer), so each computes its Fl shard of the same tokens
//   sort       to expert-major order; experts' MLPs as one grouped GeMM on the local shard
//              (ops/moe.hpp expert_mlp_forward): a partial sum over etp when etp > 1
//   scatter    over etp: each peer's rows back to it (all_to_allv), summed over the etp
//              partials: the reduce-scatter of Megatron-Core's etp path
//   combine    all_to_allv back over ep, then y = Σ_j g·yp
//
// Traffic per rank and layer (fp32 here): dispatch and combine each move the rank's kept
// assignments' rows, N·k·h values, (ep−1)/ep of them to other ranks; with etp > 1 the gather
// and the scatter move etp× the received rows. The same again in backward.
//
// Gradients: w1, w2 are complete for the local shard over the tokens every rank sent (sum
// them over the expert-data-parallel group, ranks holding the same shard, as data parallelism
// sums dense weights); the router's gradient is this rank's tokens' part (sum it over every
// rank holding the router). The aux loss returned by forward is this rank's part: the parts
// over the token group add up to the group's loss (ops/moe.hpp).
//
// On the seam (device/backend.hpp): the tokens, the experts' rows, their activations and the
// parameters are memory of the layer's backend, moved by its ops (the router's and experts'
// GeMMs on views, GeLU, rows gathered and scatter-added by index) and by the groups'
// transports; what routing decides is host data: the router's logits come to the host
// (N·E values a layer), top-k, capacity and the dispatch order are computed there, and the
// router's gradient goes back. So the layer runs on the CPU or on a GPU over any transport
// (Megatron-Core's all-to-all dispatcher, too, brings the token counts to the host). The host
// forms (MatrixView) are the view forms on the CPU backend.
//
// Bad shapes are refused before any collective, from global sizes only, naming the values.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "comm/communicator.hpp"
#include "device/backend.hpp"
#include "ops/cpu_backend.hpp"
#include "ops/moe.hpp"
#include "tensor/tensor.hpp"

namespace meshtp::parallel {

struct MoeConfig {
  std::int64_t hidden = 0;
  std::int64_t experts = 0;
  std::int64_t top_k = 0;
  std::int64_t ffn = 0;           // one expert's MLP width F
  double capacity_factor = 0.0;   // 0: dropless
  double aux_loss_coeff = 0.0;    // α
  bool force_balance = false;     // ops/moe.hpp's forced balance (a benchmark's routing)
};

// The groups the layer communicates on. ep and etp must be disjoint dimensions of the same
// ranks (a rank's (ep, etp) coordinates name its shard); tokens is the group over which the
// aux loss's counts are summed (ep × etp ranks, or more).
struct MoeGroups {
  comm::Communicator ep;
  comm::Communicator etp;
  comm::Communicator tokens;
};

class ExpertParallelMoe {
 public:
  // Throws meshtp::Error naming the values unless E % ep == 0, F % etp == 0, 1 ≤ k ≤ E.
  // Its buffers and ops are `backend`'s, whose memory the groups' transports move.
  ExpertParallelMoe(const MoeConfig& config, MoeGroups groups,
                    device::Backend& backend = cpu_backend());

  // Copies this rank's shards out of the whole parameters: router [E, h], W1 [E·F, h],
  // W2 [E·h, F] (ops/moe.hpp's layouts), into the storage bound — or, where none is, into
  // the layer's own (allocated then: the tensors below). On the host: a layer whose backend's
  // memory is the host's.
  void load(const Tensor& router, const Tensor& w1, const Tensor& w2);

  // The parameters and gradients in someone else's storage (a block stack's, in the backend's
  // memory), sized as the layer's own tensors below; empty gradients are allowed for a forward
  // only.
  struct Storage {
    std::span<float> router, w1, w2;
  };
  void bind(Storage values, Storage grads);

  // y [N, h] (overwritten, fp32) for x [N, h] (fp32, or bf16: a block's stored ln2 output,
  // which the router's GeMM and the experts' rows read as they are), views of the backend's
  // memory; returns this rank's part of the aux loss α·(…). Collective over every group. x
  // must stay untouched until backward.
  double forward(const View& y, const View& x);
  // dx (overwritten); parameter gradients accumulate. aux_weight = ∂L/∂aux.
  void backward(const View& dx, const View& dy, const View& x, double aux_weight);
  // The host forms: the view forms on host memory (a layer on the CPU backend).
  double forward(MatrixView y, ConstMatrixView x) { return forward(host_view(y), host_view(x)); }
  void backward(MatrixView dx, ConstMatrixView dy, ConstMatrixView x, double aux_weight) {
    backward(host_view(dx), host_view(dy), host_view(x), aux_weight);
  }

  const MoeConfig& config() const { return config_; }
  std::int64_t local_experts() const { return local_experts_; }
  std::int64_t local_ffn() const { return local_ffn_; }

  // This rank's parameters and their gradients (accumulated) when the layer holds its own
  // (load without bind); empty when bound to a stack's storage, which holds them once.
  Tensor router, w1, w2;
  Tensor router_grad, w1_grad, w2_grad;

 private:
  // Rows received by this rank from each (source, local expert), and the move to and from
  // expert-major order after the etp gather.
  struct Exchange {
    std::vector<std::int64_t> send_rows;   // [ep] rows this rank dispatches to each ep rank
    std::vector<std::int64_t> recv_rows;   // [ep] rows it receives from each
    std::vector<std::int64_t> peer_rows;   // [etp] rows each etp peer received (gather)
    std::vector<std::int64_t> sorted_of;   // gathered row → its row in expert-major order
    std::vector<std::int64_t> gathered_of;  // the inverse: expert-major row → gathered row
    std::vector<std::int64_t> offsets;     // [El + 1] expert-major offsets
  };
  Exchange plan_exchange(const MoeDispatch& dispatch) const;
  // Rows of (source, expert) order (an array of rows × h) → gathered over etp, sorted
  // expert-major.
  device::Array dispatch_rows(const device::Array& rows_in_dispatch_order) const;
  // The inverse: expert-major rows, partial over etp → summed, back in this rank's dispatch
  // order.
  device::Array combine_rows(const device::Array& expert_major) const;
  // The experts' MLPs on the expert-major rows (ops/moe.hpp expert_mlp_forward/backward, one
  // GeMM per local expert on its band of rows).
  void experts_forward(const View& y, const View& pre, const View& act, const View& x) const;
  void experts_backward(const View& dx, const View& dy, const View& x, const View& pre,
                        const View& act) const;

  void own_storage();
  device::Array alloc(std::int64_t rows, std::int64_t cols) const {
    return be_->alloc(rows * cols, Element::kF32);
  }
  static View matrix(std::span<float> s, std::int64_t rows, std::int64_t cols) {
    return View::packed(s.data(), Element::kF32, rows, cols);
  }
  View router_v() const { return matrix(values_.router, config_.experts, config_.hidden); }
  View w1_v() const { return matrix(values_.w1, local_experts_ * local_ffn_, config_.hidden); }
  View w2_v() const { return matrix(values_.w2, local_experts_ * config_.hidden, local_ffn_); }

  MoeConfig config_;
  MoeGroups groups_;
  device::Backend* be_;
  std::int64_t local_experts_ = 0, local_ffn_ = 0;
  Storage values_, grads_;

  // Saved by forward for backward.
  MoeRouting routing_;
  MoeDispatch dispatch_;
  Exchange exchange_;
  std::vector<std::int64_t> global_counts_;
  std::int64_t global_tokens_ = 0;
  std::vector<float> gate_of_row_;  // [dispatched rows] the gate of each kept assignment
  // The experts' saved GeMM inputs — their dispatched rows xq_ and the activation act_, which
  // only GeMMs read — in operands_ (tensor/gemm.hpp saved_operand_element(): bf16 for a layer
  // built under bf16 precision, else fp32), so the step is the same bit for bit; GeLU's input
  // pre_ and the combine's yp_ stay fp32.
  Element operands_ = Element::kF32;
  device::Array xq_, pre_, act_, yp_;
};

}  // namespace meshtp::parallel
