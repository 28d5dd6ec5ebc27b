// GemmModel: how long one local GeMM takes on a device, by its shape. The planner prices every
// local product with it (plan/atp_cost, autotune, gemm2d_cost, layout_search's head) and the
// simulated build charges every `meshtp::gemm` call with it (core/simulation.hpp), so both
// pay the same for a slice, a chunk or a small tensor-parallel shard.
//
// Two forms. Flat (units = 0): 2·m·n·k / F with F = peak·efficiency, the same rate for every
// shape (the model before device profiles; a topology without `device.gemm` gets it from
// `device.tflops`). Tiled: a roofline over the waves of output tiles a GPU runs, after the
// wave-quantisation account of NVIDIA's "Matrix Multiplication Background User's Guide"
// (Deep Learning Performance documentation, "Wave quantization"; docs/references.md):
//
//   tiles  = batch·⌈m/tm⌉·⌈n/tn⌉             one output tile per unit (SM) at a time
//   split  = min(⌊units/tiles⌋, ⌊k/k_min⌋)   split-K when the tiles leave units idle (≥ 1)
//   waves  = ⌈tiles·split/units⌉
//   t_math = waves · 2·tm·tn·⌈k/split⌉ / (F/units)
//   t_mem  = e·batch·(m·k + k·n + m·n)/B  +  [split > 1] 2·split·m·n·4/B   (fp32 partials)
//   t      = t_kernel + max(t_math, t_mem)
//
// Worked example (A100, F = 0.82·312 TFLOP/s, 108 units, 128×256 tiles): Megatron's QKV
// GeMM at tp 8 for h = 6144 and 8192 tokens, m = 8192, n = 2304, k = 6144: 64·9 = 576 tiles
// = 5.33 waves, run as 6, so 2·m·n·k/t = 227 TFLOP/s where the flat model says 256.
#pragma once

namespace meshtp {

struct GemmModel {
  double peak_tflops = 0;  // dense peak in the model's precision (datasheet)
  double efficiency = 1;   // sustained fraction of the peak over whole waves
  int units = 0;           // parallel units (GPU SMs); 0: the flat form
  int tile_m = 128, tile_n = 256;
  int split_k_min = 256;    // the least k a split-K part keeps
  double kernel_us = 0;     // fixed cost of one kernel
  double memory_gbps = 0;   // the memory roofline's bandwidth; 0: none
  // The fused attention kernel's sustained rate in TFLOP/s, its FLOPs counted as
  // flash_attention_seconds counts them (the tiles it visits); 0: the GeMM rate
  // peak·efficiency. A GPU's attention kernels run below its GeMMs (FlashAttention-2 §4.1:
  // up to 335 TFLOP/s forward + backward on an H100 SXM5).
  double attention_tflops = 0;

  // The flat form at `flops_per_s` (what a topology's `tflops` alone describes). Implicit:
  // a rate is a (flat) model.
  GemmModel(double flops_per_s = 0);  // NOLINT(google-explicit-constructor)
  GemmModel(double peak, double efficiency, int units, double kernel_us, double memory_gbps);

  bool flat() const { return units == 0; }
  double flops_per_s() const { return peak_tflops * 1e12 * efficiency; }
  // Seconds for `batch` independent (m×k)·(k×n) products of `element_bytes`-byte values
  // (one batched kernel). Throws meshtp::Error for a model without a positive rate.
  double seconds(double m, double n, double k, int element_bytes, double batch = 1) const;
  // The same for work known only by its FLOPs (2·m·n·k summed): the flat rate.
  double flat_seconds(double flops) const;
  // The fused attention core's `flops`: at attention_tflops where set, else the flat rate.
  double attention_seconds(double flops) const;

  // Throws meshtp::Error naming the field (`where` names the input) for a non-positive peak
  // or efficiency > 1, a negative kernel cost, tile or unit counts below 1.
  void validate(const char* where) const;
  friend bool operator==(const GemmModel&, const GemmModel&) = default;
};

// The attention core's products for `pairs` (sequence, head) pairs of `seq` tokens and head
// dim `head_dim`, one batched kernel each: forward QKᵀ (s×s×d) and A·V (s×d×s); backward
// dS = dO·Vᵀ (s×s×d) and dV = Pᵀ·dO, dQ = dS·K, dK = dSᵀ·Q (s×d×s each). The full products
// (the causal blocks skip about half; both the planner and the simulator price them whole).
double attention_seconds(const GemmModel& gemm, double seq, double head_dim, double pairs,
                         int element_bytes, bool backward);

// The fused attention core (ops/flash_attention.hpp, causal, one sequence per call) for the
// same pairs: its products over the tiles it visits (core/op_costs.hpp flash_attention_flops,
// tiles kFlashBlockQ × kFlashBlockK) at the model's rate F = peak·efficiency, as the simulated
// build charges the op (core/simulation.hpp charge: FLOPs / F, no per-shape waves, no kernel
// cost; the planner at gemm.attention_tflops where a topology sets it). Its O(T) bytes are
// elementwise work (plan/elementwise.hpp "attention io").
double flash_attention_seconds(const GemmModel& gemm, double seq, double head_dim, double pairs,
                               bool backward);

}  // namespace meshtp
