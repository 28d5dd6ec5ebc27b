// What meshtp measures of a GPU for the planner (`meshtp gpu calibrate`): GeMM time by shape
// and element type on cuBLASLt, device-memory bandwidth, and the time of a kernel launch.
// Every timing is validated first (sampled entries of the product against a host dot product
// in double) and is the median of repeated runs timed with CUDA events on the compute stream.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "device/gpu.hpp"
#include "layout/model_shape.hpp"

namespace meshtp::gpu {

struct GemmShape {
  std::int64_t m = 0, n = 0, k = 0;
};

struct GemmMeasurement {
  GemmShape shape;
  Element type = Element::kBF16;
  int repeats = 0;
  double median_ms = 0, min_ms = 0;
  double tflops = 0;           // 2·m·n·k / median
  double max_error_ratio = 0;  // max over sampled entries of |error| / tolerance (≤ 1 passes)
};

// C = A·B (all row-major, all of `type`, fp32 accumulation) with A, B uniform in [−1, 1):
// validated, then timed `repeats` times after 3 warm-ups. Throws if validation fails.
GemmMeasurement measure_gemm(Context& ctx, GemmShape shape, Element type, int repeats);

struct CopyMeasurement {
  std::int64_t bytes = 0;
  double median_ms = 0;
  double gb_per_s = 0;  // (read + written) bytes / median, 1e9 bytes per GB
};
CopyMeasurement measure_copy(Context& ctx, std::int64_t bytes, int repeats);

// Median microseconds per launch of a one-element kernel, launched back to back (the stream
// keeps up, so this is the launch's cost to the stream, not the host's).
double measure_launch_us(Context& ctx, int repeats);

// One of the other ops, timed on a shape of a GPT layer (hidden 4096, 2048 tokens): its
// median time, the bytes it must move at least (each input read once, each output written
// once) and the rate that makes, and its FLOPs where it has products (attention).
struct OpMeasurement {
  std::string op;     // "layernorm_forward", …
  std::string shape;  // "8192x4096"
  Element type = Element::kBF16;
  int repeats = 0;
  double median_ms = 0;
  double bytes = 0, gb_per_s = 0;
  double flops = 0, tflops = 0;
};
// LayerNorm forward and backward, GeLU forward, residual, cross-entropy forward (vocab
// 51200), attention forward and backward (32 heads of 128, T 2048), AdamW (10⁸ fp32 values).
// The ops' results are checked by gpu_ops_test, not here.
std::vector<OpMeasurement> measure_ops(Context& ctx, Element type, int repeats);

// The shapes `gpu calibrate` measures: tokens m ∈ {512, 2048, 8192} × (n, k) ∈
// {1024, 4096, 12288}² — the GeMMs of a transformer layer of hidden 1K–12K split over 1–8
// devices, small to large.
std::vector<GemmShape> calibration_shapes();

struct GpuProfile {
  DeviceInfo device;
  std::string measured_by;  // the command and date
  std::vector<GemmMeasurement> gemm;
  std::vector<OpMeasurement> ops;
  CopyMeasurement copy;
  double launch_us = 0;
  double bf16_ceiling_tflops = 0;  // the best bf16 rate measured
};

GpuProfile calibrate(Context& ctx, const std::vector<GemmShape>& shapes, int repeats,
                     const std::string& measured_by);
nlohmann::json to_json(const GpuProfile& profile);
nlohmann::json to_json(const DeviceInfo& info);
nlohmann::json to_json(const GemmMeasurement& m);
nlohmann::json to_json(const OpMeasurement& m);

}  // namespace meshtp::gpu
