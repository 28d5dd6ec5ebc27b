// The BLAS baseline of the layer and training benchmarks: one rank's cblas_sgemm on the
// GeMMs a single-rank step of the same model makes, timed back to back on this rank.
//
//   n = tokens (b·s), h = hidden, V = vocabulary (0: no LM head)
//   per linear (in → out), as nn.Linear stores W [out, in]:
//     forward          y  = x·Wᵀ     n×out×in   (NT)
//     data gradient    dx = dy·W     n×in×out   (NN)
//     weight gradient  dW = dyᵀ·x    out×in×n   (TN)
//   linears of a block: qkv h → 3h, proj h → h, mlp1 h → 4h, mlp2 4h → h; the LM head h → V
//   FLOPs per pass = Σ 3·2·n·in·out = 72·n·h² (+ 6·n·h·V with the head)
//
// GFLOP/s = FLOPs per pass / seconds per pass. It is the rate at which this machine's BLAS
// does the step's linear algebra when nothing else is in the way (no attention, no
// elementwise ops, no communication, no sharding), so a step's "ratio to BLAS" — its model
// FLOP/s per rank over this — says how much of a BLAS-speed step the framework delivers.
// The benchmarks time one pass between their own steps (interleaved: load drift hits both
// alike) on every rank at once, so memory bandwidth is shared as in the step.
//
// On a device (--device cuda) the baseline is the device's own GeMM library on the same
// shapes: the backend's GeMM (cuBLASLt), timed to the backend's synchronize().
#pragma once

#include <cstdint>
#include <vector>

#include "device/backend.hpp"
#include "tensor/tensor.hpp"

namespace meshtp::bench {

class BlasReference {
 public:
  // Throws meshtp::Error for non-positive sizes. Allocates the largest operands once (on
  // `device`, a backend whose GeMM is the baseline; null: the host's cblas).
  BlasReference(std::int64_t tokens, std::int64_t hidden, std::int64_t vocab = 0,
                device::Backend* device = nullptr);

  double flops() const { return flops_; }  // per pass
  // One pass over every shape; returns its wall-clock seconds.
  double time_pass();

 private:
  struct Linear {
    std::int64_t in = 0, out = 0;
  };
  std::int64_t n_ = 0;
  std::vector<Linear> linears_;
  double flops_ = 0.0;
  Tensor x_, w_, y_;
  device::Backend* device_ = nullptr;
  device::Array dx_, dw_, dy_;  // on the device
};

}  // namespace meshtp::bench
