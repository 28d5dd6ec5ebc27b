// gpu_profile.hpp: measuring a GPU's GeMMs, memory bandwidth and launch cost.
#include "device/gpu_profile.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/adamw_step.hpp"
#include "core/error.hpp"
#include "core/stats.hpp"
#include "device/gpu_backend.hpp"
#include "device/gpu_ops.hpp"

namespace meshtp::gpu {

namespace {

// Uniform in [−1, 1) from a counter (splitmix64): reproducible and fast for 10⁸ values.
float uniform(std::uint64_t i) {
  std::uint64_t z = i + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(static_cast<double>(z >> 40) / static_cast<double>(1ull << 23) - 1.0);
}

std::vector<float> random_values(std::int64_t n, std::uint64_t seed, Element type) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const float x = uniform(seed * 0x100000000ull + static_cast<std::uint64_t>(i));
    v[static_cast<std::size_t>(i)] = type == Element::kBF16 ? round_to_bf16(x) : x;
  }
  return v;
}

}  // namespace

GemmMeasurement measure_gemm(Context& ctx, GemmShape s, Element type, int repeats) {
  MESHTP_CHECK(s.m > 0 && s.n > 0 && s.k > 0, "gpu gemm: m, n and k must be ≥ 1 (got {}x{}x{})",
               s.m, s.n, s.k);
  MESHTP_CHECK(repeats >= 1, "gpu gemm: repeats must be ≥ 1 (got {})", repeats);
  const std::vector<float> a = random_values(s.m * s.k, 1, type);
  const std::vector<float> b = random_values(s.k * s.n, 2, type);
  const Buffer da = ctx.upload_values(a, type);
  const Buffer db = ctx.upload_values(b, type);
  Buffer dc(ctx, static_cast<std::size_t>(s.m * s.n) * element_size(type));
  const View A = matrix_of(da, type, s.m, s.k), B = matrix_of(db, type, s.k, s.n),
                     C = matrix_of(dc, type, s.m, s.n);

  // Validate: 64 sampled entries against a double dot product of the same (rounded) inputs.
  // Tolerance: C's rounding (2⁻⁸ relative for bf16, 2⁻²³ for fp32, times 2) plus fp32
  // accumulation error, ~√k·2⁻²⁴ of Σ|aᵢbᵢ| (4σ: 2⁻²²).
  gemm(ctx, A, Trans::kNo, B, Trans::kNo, C);
  const std::vector<float> c = ctx.download_values(dc, type, s.m * s.n);
  GemmMeasurement result;
  result.shape = s;
  result.type = type;
  const double rounding = type == Element::kBF16 ? std::ldexp(1.0, -7) : std::ldexp(1.0, -22);
  for (int sample = 0; sample < 64; ++sample) {
    const std::int64_t i = static_cast<std::int64_t>(uniform(1000 + sample) * 0.5f * s.m + s.m / 2);
    const std::int64_t j = static_cast<std::int64_t>(uniform(2000 + sample) * 0.5f * s.n + s.n / 2);
    const std::int64_t ii = std::clamp<std::int64_t>(i, 0, s.m - 1);
    const std::int64_t jj = std::clamp<std::int64_t>(j, 0, s.n - 1);
    double ref = 0, magnitude = 0;
    for (std::int64_t p = 0; p < s.k; ++p) {
      const double term = static_cast<double>(a[static_cast<std::size_t>(ii * s.k + p)]) *
                          b[static_cast<std::size_t>(p * s.n + jj)];
      ref += term;
      magnitude += std::abs(term);
    }
    const double tolerance =
        rounding * std::abs(ref) +
        std::ldexp(1.0, -22) * std::sqrt(static_cast<double>(s.k)) * magnitude + 1e-30;
    const double got = c[static_cast<std::size_t>(ii * s.n + jj)];
    const double ratio = std::isfinite(got) ? std::abs(got - ref) / tolerance : INFINITY;
    result.max_error_ratio = std::max(result.max_error_ratio, ratio);
  }
  MESHTP_CHECK(result.max_error_ratio <= 1.0,
               "gpu gemm {}x{}x{} {}: the product is wrong (an entry is {:.3g}x its tolerance); "
               "not timing it",
               s.m, s.n, s.k, to_string(type), result.max_error_ratio);

  StreamTimer timer(ctx);
  for (int w = 0; w < 3; ++w) gemm(ctx, A, Trans::kNo, B, Trans::kNo, C);
  std::vector<double> ms;
  for (int r = 0; r < repeats; ++r) {
    timer.start();
    gemm(ctx, A, Trans::kNo, B, Trans::kNo, C);
    ms.push_back(timer.stop_ms());
  }
  result.repeats = repeats;
  result.median_ms = median(ms);
  result.min_ms = *std::min_element(ms.begin(), ms.end());
  result.tflops = 2.0 * static_cast<double>(s.m) * s.n * s.k / (result.median_ms * 1e-3) / 1e12;
  return result;
}

CopyMeasurement measure_copy(Context& ctx, std::int64_t bytes, int repeats) {
  MESHTP_CHECK(bytes > 0 && repeats >= 1, "gpu copy: bytes and repeats must be ≥ 1");
  Buffer src(ctx, static_cast<std::size_t>(bytes)), dst(ctx, static_cast<std::size_t>(bytes));
  ctx.fill_bytes(src.data(), 1, static_cast<std::size_t>(bytes));
  StreamTimer timer(ctx);
  std::vector<double> ms;
  for (int r = 0; r < repeats + 2; ++r) {
    timer.start();
    convert(ctx, dst.data(), Element::kF32, src.data(), Element::kF32, bytes / 4);
    const double t = timer.stop_ms();
    if (r >= 2) ms.push_back(t);
  }
  std::vector<std::uint8_t> probe(4);
  ctx.download(probe.data(), static_cast<char*>(dst.data()) + bytes / 2, 4);
  MESHTP_CHECK(probe[0] == 1 && probe[3] == 1, "gpu copy: the copied bytes are wrong");
  CopyMeasurement result{bytes, median(ms), 0};
  result.gb_per_s = 2.0 * static_cast<double>(bytes) / (result.median_ms * 1e-3) / 1e9;
  return result;
}

double measure_launch_us(Context& ctx, int repeats) {
  Buffer x(ctx, 64), y(ctx, 64);
  ctx.fill_bytes(x.data(), 0, 64);
  StreamTimer timer(ctx);
  constexpr int kLaunches = 1000;
  std::vector<double> us;
  for (int r = 0; r < repeats; ++r) {
    timer.start();
    for (int i = 0; i < kLaunches; ++i) gelu_forward(ctx, Element::kF32, y.data(), x.data(), 1);
    us.push_back(timer.stop_ms() * 1e3 / kLaunches);
  }
  return median(us);
}

namespace {

// The AdamW constants of the timed updates: GPT-3's (Brown et al. 2020, Appendix B), at step
// 1's bias corrections; the values do not change the time.
constexpr AdamWStep kTimedAdamW{.lr = 1e-4f,
                                .beta1 = 0.9f,
                                .beta2 = 0.95f,
                                .eps = 1e-8f,
                                .decay = 0.1f,
                                .bias1 = 0.1f,
                                .bias2 = 0.05f};

// Median ms of `repeats` runs of f() after 2 warm-ups, timed on the stream.
template <typename F>
double median_ms(Context& ctx, int repeats, F&& f) {
  StreamTimer timer(ctx);
  for (int w = 0; w < 2; ++w) f();
  std::vector<double> ms;
  for (int r = 0; r < repeats; ++r) {
    timer.start();
    f();
    ms.push_back(timer.stop_ms());
  }
  return median(ms);
}

Buffer filled(Context& ctx, std::int64_t n, Element type, std::uint64_t seed) {
  return ctx.upload_values(random_values(n, seed, type), type);
}

}  // namespace

std::vector<OpMeasurement> measure_ops(Context& ctx, Element type, int repeats) {
  const std::int64_t rows = 8192, hidden = 4096, vocab = 51200;
  const std::int64_t B = 1, T = 2048, NH = 32, HD = 128;
  const double es = static_cast<double>(element_size(type));
  std::vector<OpMeasurement> out;
  auto add = [&](std::string op, std::string shape, double ms, double bytes, double flops) {
    OpMeasurement m{std::move(op), std::move(shape), type, repeats, ms, bytes, 0, flops, 0};
    m.gb_per_s = bytes / (ms * 1e-3) / 1e9;
    m.tflops = flops / (ms * 1e-3) / 1e12;
    out.push_back(m);
  };
  const std::string ln_shape = std::to_string(rows) + "x" + std::to_string(hidden);
  {
    const std::int64_t n = rows * hidden;
    const Buffer x = filled(ctx, n, type, 11), dy = filled(ctx, n, type, 12);
    const Buffer w = filled(ctx, hidden, Element::kF32, 13);
    const Buffer b = filled(ctx, hidden, Element::kF32, 14);
    Buffer y(ctx, static_cast<std::size_t>(n * es)), dx(ctx, static_cast<std::size_t>(n * es));
    Buffer mean(ctx, rows * 4), rstd(ctx, rows * 4), dw(ctx, hidden * 4), db(ctx, hidden * 4);
    ctx.fill_bytes(dx.data(), 0, dx.bytes());
    ctx.fill_bytes(dw.data(), 0, dw.bytes());
    ctx.fill_bytes(db.data(), 0, db.bytes());
    add("layernorm_forward", ln_shape,
        median_ms(ctx, repeats,
                  [&] {
                    layernorm_forward(ctx, type, y.data(), mean.as<float>(), rstd.as<float>(),
                                      x.data(), w.as<float>(), b.as<float>(), rows, hidden);
                  }),
        2.0 * n * es, 0);
    add("layernorm_backward", ln_shape,
        median_ms(ctx, repeats,
                  [&] {
                    layernorm_backward(ctx, type, dx.data(), dw.as<float>(), db.as<float>(),
                                       dy.data(), x.data(), w.as<float>(), mean.as<float>(),
                                       rstd.as<float>(), rows, hidden);
                  }),
        4.0 * n * es, 0);  // reads dy, x, dx; writes dx
    add("residual", ln_shape,
        median_ms(ctx, repeats,
                  [&] { residual_forward(ctx, type, y.data(), x.data(), dy.data(), n); }),
        3.0 * n * es, 0);
  }
  {
    const std::int64_t n = rows * 4 * hidden;
    const Buffer x = filled(ctx, n, type, 15);
    Buffer y(ctx, static_cast<std::size_t>(n * es));
    add("gelu_forward", std::to_string(rows) + "x" + std::to_string(4 * hidden),
        median_ms(ctx, repeats, [&] { gelu_forward(ctx, type, y.data(), x.data(), n); }),
        2.0 * n * es, 0);
  }
  {
    const std::int64_t n = rows * vocab;
    const Buffer logits = filled(ctx, n, type, 16);
    Buffer lse(ctx, rows * 4);
    std::vector<std::int32_t> targets(static_cast<std::size_t>(rows));
    for (std::int64_t r = 0; r < rows; ++r)
      targets[static_cast<std::size_t>(r)] = static_cast<std::int32_t>((r * 7919) % vocab);
    add("cross_entropy_forward", std::to_string(rows) + "x" + std::to_string(vocab),
        median_ms(ctx, repeats,
                  [&] {
                    cross_entropy_forward(ctx, type, lse.as<float>(), logits.data(), targets, rows,
                                          vocab, vocab);
                  }),
        1.0 * n * es, 0);
  }
  {
    const std::int64_t C = NH * HD;
    const Buffer qkv = filled(ctx, B * T * 3 * C, type, 17),
                 dout = filled(ctx, B * T * C, type, 18);
    Buffer out_(ctx, static_cast<std::size_t>(B * T * C * es));
    Buffer att(ctx, static_cast<std::size_t>(B * NH * T * T * es));
    Buffer scratch(ctx, static_cast<std::size_t>(attention_scratch_elements(B, T, NH) * es));
    Buffer dqkv(ctx, static_cast<std::size_t>(B * T * 3 * C * es));
    ctx.fill_bytes(dqkv.data(), 0, dqkv.bytes());
    const std::string shape = "B1 T2048 NH32 HD128";
    // FLOPs of the full (unmasked) products, as the kernels compute them: 2 products forward,
    // 4 backward, 2·T·T·HD each per head.
    const double product = 2.0 * B * NH * T * T * HD;
    add("attention_forward", shape,
        median_ms(ctx, repeats,
                  [&] {
                    attention_forward(ctx, type, out_.data(), att.data(), qkv.data(), B, T, NH, HD);
                  }),
        (3.0 * B * T * C + B * T * C + 2.0 * B * NH * T * T) * es, 2 * product);
    add("attention_backward", shape,
        median_ms(ctx, repeats,
                  [&] {
                    attention_backward(ctx, type, dqkv.data(), scratch.data(), dout.data(),
                                       qkv.data(), att.data(), B, T, NH, HD);
                  }),
        (3.0 * B * T * C * 3 + B * T * C + 3.0 * B * NH * T * T) * es, 4 * product);
  }
  {
    const std::int64_t n = 100'000'000;
    Buffer p(ctx, n * 4), g(ctx, n * 4), m(ctx, n * 4), v(ctx, n * 4);
    for (Buffer* b : {&p, &g, &m, &v}) ctx.fill_bytes(b->data(), 0, b->bytes());
    const AdamWTensor t{p.as<float>(), g.as<float>(), m.as<float>(), v.as<float>(), n, nullptr};
    const double ms = median_ms(ctx, repeats, [&] { adamw_update(ctx, {&t, 1}, kTimedAdamW); });
    add("adamw", "1e8 fp32", ms, 28.0 * n, 0);  // reads p, g, m, v; writes p, m, v
    out.back().type = Element::kF32;
  }
  return out;
}

std::vector<GemmShape> calibration_shapes() {
  std::vector<GemmShape> shapes;
  for (std::int64_t m : {512, 2048, 8192})
    for (std::int64_t n : {1024, 4096, 12288})
      for (std::int64_t k : {1024, 4096, 12288}) shapes.push_back({m, n, k});
  return shapes;
}

GpuProfile calibrate(Context& ctx, const std::vector<GemmShape>& shapes, int repeats,
                     const std::string& measured_by) {
  GpuProfile profile;
  profile.device = ctx.info();
  profile.measured_by = measured_by;
  for (Element type : {Element::kBF16, Element::kF32})
    for (const GemmShape& s : shapes) {
      profile.gemm.push_back(measure_gemm(ctx, s, type, repeats));
      if (type == Element::kBF16)
        profile.bf16_ceiling_tflops =
            std::max(profile.bf16_ceiling_tflops, profile.gemm.back().tflops);
    }
  profile.ops = measure_ops(ctx, Element::kBF16, repeats);
  profile.copy = measure_copy(ctx, std::int64_t{1} << 30, repeats);
  profile.launch_us = measure_launch_us(ctx, repeats);
  return profile;
}

nlohmann::json to_json(const DeviceInfo& d) {
  return {{"name", d.name},
          {"compute_capability",
           std::to_string(d.compute_major) + "." + std::to_string(d.compute_minor)},
          {"multiprocessors", d.multiprocessors},
          {"memory_bytes", d.memory_bytes},
          {"l2_bytes", d.l2_bytes},
          {"clock_mhz", d.clock_mhz},
          {"memory_clock_mhz", d.memory_clock_mhz},
          {"memory_bus_bits", d.memory_bus_bits},
          {"driver_version", d.driver_version},
          {"runtime_version", d.runtime_version},
          {"devices_visible", d.devices_visible}};
}

nlohmann::json to_json(const GemmMeasurement& g) {
  return {{"m", g.shape.m},
          {"n", g.shape.n},
          {"k", g.shape.k},
          {"type", to_string(g.type)},
          {"repeats", g.repeats},
          {"median_ms", g.median_ms},
          {"min_ms", g.min_ms},
          {"tflops", g.tflops},
          {"max_error_ratio", g.max_error_ratio}};
}

nlohmann::json to_json(const OpMeasurement& o) {
  return {{"op", o.op},
          {"shape", o.shape},
          {"type", to_string(o.type)},
          {"repeats", o.repeats},
          {"median_ms", o.median_ms},
          {"bytes", o.bytes},
          {"gb_per_s", o.gb_per_s},
          {"flops", o.flops},
          {"tflops", o.tflops}};
}

nlohmann::json to_json(const GpuProfile& p) {
  nlohmann::json gemm = nlohmann::json::array();
  for (const auto& g : p.gemm) gemm.push_back(to_json(g));
  nlohmann::json ops = nlohmann::json::array();
  for (const auto& o : p.ops) ops.push_back(to_json(o));
  return {
      {"device", to_json(p.device)},
      {"measured_by", p.measured_by},
      {"gemm", gemm},
      {"bf16_ceiling_tflops", p.bf16_ceiling_tflops},
      {"copy",
       {{"bytes", p.copy.bytes}, {"median_ms", p.copy.median_ms}, {"gb_per_s", p.copy.gb_per_s}}},
      {"launch_us", p.launch_us}};
}

}  // namespace meshtp::gpu
