// The blocks of a stack, one per layer — or, under full activation recomputation, ONE block
// object serving every layer: a block's saved activations are its members, so L blocks keep
// L sets and one block keeps one. Each layer's parameter and gradient spans are recorded, and
// at(i) binds layer i's into the shared block (a few span assignments).
//
//   full recomputation (Chen et al. 2016; Korthikanti et al. 2022 §4), per step:
//     forward   for i in 0 … L−1: at(i).forward(x_{i+1}, x_i)       activations overwritten
//     backward  for i in L−1 … 0: at(i).forward(x_{i+1}, x_i)       the same code on the same
//                                 at(i).backward(dx_i, dx_{i+1})    inputs: bit-identical
//   memory: the L+1 streams x_i plus ONE block's activations, for L−1 extra block forwards.
// The recomputed forward writes x_{i+1} again with the values it already holds (block i+1's
// backward, its only other reader, is done).
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "layout/vocabulary.hpp"

namespace meshtp::model {

template <typename BlockT>
class LayerBlocks {
 public:
  using Spans = std::vector<std::span<float>>;
  // make() builds one block; called once per layer, or once under full recomputation.
  template <typename Make>
  LayerBlocks(int layers, layout::Recompute recompute, Make&& make)
      : full_(recompute == layout::Recompute::kFull) {
    for (int l = 0; l < (full_ ? 1 : layers); ++l) blocks_.push_back(make());
    values_.resize(static_cast<std::size_t>(layers));
    grads_.resize(static_cast<std::size_t>(layers));
  }
  void bind(int layer, Spans values, Spans grads) {
    const auto u = static_cast<std::size_t>(layer);
    values_[u] = std::move(values);
    grads_[u] = std::move(grads);
    if (!full_) blocks_[u]->bind(values_[u], grads_[u]);
  }
  bool full() const { return full_; }
  const BlockT& front() const { return *blocks_.front(); }
  // Layer i's block, its parameters bound.
  BlockT& at(int layer) {
    const auto u = static_cast<std::size_t>(layer);
    if (!full_) return *blocks_[u];
    blocks_.front()->bind(values_[u], grads_[u]);
    return *blocks_.front();
  }

 private:
  bool full_;
  std::vector<std::unique_ptr<BlockT>> blocks_;
  std::vector<Spans> values_, grads_;
};

}  // namespace meshtp::model
