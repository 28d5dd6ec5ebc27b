#include "core/gemm_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/error.hpp"
#include "core/op_costs.hpp"

namespace meshtp {

GemmModel::GemmModel(double flops_per_s) : peak_tflops(flops_per_s / 1e12) {}

GemmModel::GemmModel(double peak, double efficiency_, int units_, double kernel_us_,
                     double memory_gbps_)
    : peak_tflops(peak),
      efficiency(efficiency_),
      units(units_),
      kernel_us(kernel_us_),
      memory_gbps(memory_gbps_) {}

double GemmModel::flat_seconds(double flops) const {
  const double rate = flops_per_s();
  MESHTP_CHECK(rate > 0, "GeMM rate {} FLOP/s must be positive", rate);
  return flops / rate;
}

double GemmModel::attention_seconds(double flops) const {
  if (attention_tflops > 0) return flops / (attention_tflops * 1e12);
  return flat_seconds(flops);
}

double GemmModel::seconds(double m, double n, double k, int element_bytes, double batch) const {
  if (m <= 0 || n <= 0 || k <= 0 || batch <= 0) return 0;
  if (flat()) return flat_seconds(2 * m * n * k * batch);
  const double rate = flops_per_s();
  MESHTP_CHECK(rate > 0, "GeMM rate {} FLOP/s must be positive", rate);
  const double tiles = batch * std::ceil(m / tile_m) * std::ceil(n / tile_n);
  double split = 1;
  if (tiles < units) {
    split = std::max(1.0, std::min(std::floor(units / tiles), std::floor(k / split_k_min)));
  }
  const double waves = std::ceil(tiles * split / units);
  const double math = waves * 2.0 * tile_m * tile_n * std::ceil(k / split) / (rate / units);
  double memory = 0;
  if (memory_gbps > 0) {
    const double bandwidth = memory_gbps * 1e9;
    memory = element_bytes * batch * (m * k + k * n + m * n) / bandwidth;
    if (split > 1) memory += 2 * split * m * n * 4 * batch / bandwidth;
  }
  return kernel_us * 1e-6 + std::max(math, memory);
}

double attention_seconds(const GemmModel& gemm, double seq, double head_dim, double pairs,
                         int element_bytes, bool backward) {
  const double scores = gemm.seconds(seq, seq, head_dim, element_bytes, pairs);
  const double values = gemm.seconds(seq, head_dim, seq, element_bytes, pairs);
  return scores + (backward ? 3 : 1) * values;
}

double flash_attention_seconds(const GemmModel& gemm, double seq, double head_dim, double pairs,
                               bool backward) {
  const auto t = static_cast<std::int64_t>(seq);
  const double flops = op_costs::flash_attention_flops(
      t, t, static_cast<std::int64_t>(head_dim), static_cast<std::int64_t>(op_costs::kFlashBlockQ),
      static_cast<std::int64_t>(op_costs::kFlashBlockK), 0, pairs, backward);
  return gemm.attention_seconds(flops);
}

void GemmModel::validate(const char* where) const {
  MESHTP_CHECK(std::isfinite(peak_tflops) && peak_tflops > 0, "{}: gemm peak_tflops={} must be "
               "positive", where, peak_tflops);
  MESHTP_CHECK(efficiency > 0 && efficiency <= 1, "{}: gemm efficiency={} must be in (0, 1]",
               where, efficiency);
  MESHTP_CHECK(units >= 0, "{}: gemm units={} must not be negative (0: the flat form)", where,
               units);
  MESHTP_CHECK(tile_m >= 1 && tile_n >= 1 && split_k_min >= 1,
               "{}: gemm tile {}x{} and split_k_min={} must be at least 1", where, tile_m, tile_n,
               split_k_min);
  MESHTP_CHECK(std::isfinite(kernel_us) && kernel_us >= 0, "{}: gemm kernel_us={} must be "
               "non-negative", where, kernel_us);
  MESHTP_CHECK(std::isfinite(memory_gbps) && memory_gbps >= 0, "{}: gemm memory_gbps={} must be "
               "non-negative", where, memory_gbps);
  MESHTP_CHECK(std::isfinite(attention_tflops) && attention_tflops >= 0 &&
                   attention_tflops <= peak_tflops,
               "{}: gemm attention_tflops={} must be in [0, peak_tflops={}] (0: the GeMM rate)",
               where, attention_tflops, peak_tflops);
}

}  // namespace meshtp
