// AdamW (Loshchilov & Hutter) over this rank's parameter shards, and global-norm clipping,
// on the backend that holds them (docs/seam.md): the update is core/adamw_step.hpp's formula,
// run by Backend::adamw_update (on the CPU ops/adamw.hpp's, on a GPU its multi-tensor
// kernel), with decay = λ = weight_decay, 0 for LayerNorm and biases, and bias1, bias2 =
// 1−β1ᵗ, 1−β2ᵗ; the norm's sums and the clipping's scale are Backend::sum_of_squares and
// Backend::scale. The moments live beside the parameters, in the backend's memory.
//
// The update is elementwise, so running it on shards equals running it on the global
// tensor. Gradient clipping is not: ‖g‖ must count every global element exactly once,
// although replicated shards hold copies. Each parameter therefore carries its replication
// count r (how many ranks hold each of its elements), and
//   ‖g‖² = all_reduce_sum over ranks of Σ_params (1/r)·Σ g²
// is the same number on every rank and for every layout.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "core/adamw_step.hpp"
#include "device/backend.hpp"
#include "tensor/tensor.hpp"

namespace meshtp::train {

struct AdamWConfig {
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;

  // The constants of update number t (1-based) at learning rate lr: the bias corrections
  // 1 − βᵗ (computed in double), and λ for a parameter that decays, 0 for one that does not.
  AdamWStep at(float lr, std::int64_t t, bool decays) const {
    const auto steps = static_cast<double>(t);
    return {.lr = lr,
            .beta1 = beta1,
            .beta2 = beta2,
            .eps = eps,
            .decay = decays ? weight_decay : 0.0f,
            .bias1 = static_cast<float>(1.0 - std::pow(beta1, steps)),
            .bias2 = static_cast<float>(1.0 - std::pow(beta2, steps))};
  }
};

// A parameter's local shard and its gradient: fp32 arrays of one backend.
struct ParamRef {
  std::string name;
  device::Array* value = nullptr;
  device::Array* grad = nullptr;
  bool decay = true;     // false for LayerNorm weights/biases and all biases
  int replicas = 1;      // ranks holding a copy of each element (for the global norm)
  // Where elements have different numbers of copies (replicated KV heads): each local
  // element's share of the norm (1/copies on the tensor-parallel mesh), divided by replicas
  // too; null: 1 each.
  const Tensor* norm_weight = nullptr;
};

class AdamW {
 public:
  // Every parameter an fp32 array of `backend`, which allocates the moments (zeroed).
  AdamW(device::Backend& backend, std::vector<ParamRef> params, AdamWConfig config);

  void step(float lr);  // one update with this learning rate; advances the step count
  std::int64_t steps() const { return steps_; }
  void set_steps(std::int64_t steps) { steps_ = steps; }  // when resuming

  const std::vector<ParamRef>& params() const { return params_; }
  device::Backend& backend() const { return *backend_; }
  // First and second moments, parallel to params(): the optimizer state of a checkpoint, in
  // the backend's memory.
  std::vector<device::Array>& first_moments() { return m_; }
  std::vector<device::Array>& second_moments() { return v_; }

 private:
  device::Backend* backend_;
  std::vector<ParamRef> params_;
  AdamWConfig config_;
  std::vector<device::Array> m_;
  std::vector<device::Array> v_;
  std::int64_t steps_ = 0;
};

// One update of many tensors on `backend`: each parameter's constants from `config` at
// (lr, t, decays), one Backend::adamw_update per kind (decaying or not). The parameters are
// p, g, m, v of AdamWParam, their compute copies p itself.
struct AdamWTensor {
  device::Array p, g, m, v;
  bool decays = true;
};
void adamw_update(device::Backend& backend, std::span<const AdamWTensor> tensors,
                  const AdamWConfig& config, float lr, std::int64_t t);

// One parameter's gradient (or a piece of it, `g`: its elements from `offset` of the
// parameter) as a share of the global norm: each element weighted by its share where the
// parameter holds copies (ParamRef::norm_weight, on the host), divided by `replicas`.
struct NormShare {
  device::Array g;
  int replicas = 1;
  const Tensor* norm_weight = nullptr;
  std::int64_t offset = 0;
};
// Σ over the shares of their weighted Σ g²: the unweighted ones in one batched backend call
// (Backend::sums_of_squares: one wait for a device, not one per parameter), the weighted on
// the host.
double squared_norm_shares(device::Backend& backend, std::span<const NormShare> shares);

// √(Σ over the global gradient of g²), identical on every rank of `world`. Collective.
double global_grad_norm(device::Backend& backend, const std::vector<ParamRef>& params,
                        const comm::Communicator& world);

// Scales every gradient by min(1, max_norm / norm) and returns that factor (1 if max_norm ≤ 0).
double clip_gradients(device::Backend& backend, const std::vector<ParamRef>& params, double norm,
                      double max_norm);

}  // namespace meshtp::train
