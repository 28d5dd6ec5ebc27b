// meshtp bench elementwise — the elementwise kernels against their naive references, per op:
// ms and GB/s of the reference loop, the portable kernels, AVX2 + FMA and AVX-512, and the
// speed-up of the kernels this CPU runs (bench/elementwise_kernels.hpp). Every rank runs the
// same cases at once; a time is the max over ranks.
//
//   meshtp bench elementwise --shape 4096x1024
#include <fmt/format.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "bench/elementwise_kernels.hpp"
#include "cli/commands.hpp"
#include "core/error.hpp"
#include "core/parse.hpp"
#include "ops/kernels.hpp"

namespace meshtp::cli {
namespace {

struct BenchElementwiseArgs {
  std::string shape = "4096x1024";
  double seconds = 0.2;
  bool json = false;
};

void run_bench_elementwise(const BenchElementwiseArgs& a) {
  const std::vector<int> dims = parse_mesh_shape(a.shape);
  MESHTP_CHECK(dims.size() == 2, "--shape '{}' must be ROWSxCOLS, like 4096x1024", a.shape);
  MESHTP_CHECK(a.seconds > 0 && a.seconds <= 60, "--seconds={} must be in (0, 60]", a.seconds);
  std::vector<bench::ElementwiseKernelSample> samples =
      bench::time_elementwise_kernels(dims[0], dims[1], a.seconds);
  for (auto& s : samples) {
    std::array<double, 4> t{s.reference_s, s.isa_s[0], s.isa_s[1], s.isa_s[2]};
    world().all_reduce(std::span<double>(t), comm::ReduceOp::kMax);
    s.reference_s = t[0];
    std::copy(t.begin() + 1, t.end(), s.isa_s.begin());
  }
  const auto selected = static_cast<std::size_t>(kernels::selected());
  std::ostream& os = out();
  const auto gbps = [](const bench::ElementwiseKernelSample& s, double t) {
    return t > 0 ? s.touches * 4.0 * static_cast<double>(s.elements) / t / 1e9 : 0.0;
  };
  if (a.json) {
    // "<isa>_s" per instruction set (0: the CPU lacks it); "kernels" names the one that runs
    for (const auto& s : samples) {
      nlohmann::json j{{"bench", "elementwise"}, {"op", s.op}, {"elements", s.elements},
                       {"touches", s.touches}, {"ranks", world().size()},
                       {"reference_s", s.reference_s}, {"kernels", kernels::fast().name},
                       {"max_relative_error", s.error}};
      for (const kernels::Isa isa : kernels::kIsas) {
        j[fmt::format("{}_s", kernels::to_string(isa))] = s.isa_s[static_cast<std::size_t>(isa)];
      }
      os << j.dump() << '\n';
    }
    return;
  }
  os << fmt::format("elementwise kernels on {}x{} fp32 per rank, {} rank(s) at once; this CPU "
                    "runs '{}' (median ms, max over ranks; GB/s of the bytes each op must move; "
                    "speedup: reference / '{}')\n",
                    dims[0], dims[1], world().size(), kernels::fast().name, kernels::fast().name);
  os << fmt::format("{:<14} {:>7} {:>16} {:>16} {:>16} {:>16} {:>8} {:>8}\n", "op", "touches",
                    "reference", "portable", "avx2", "avx512", "speedup", "error");
  for (const auto& s : samples) {
    const auto cell = [&](double t) {
      return t > 0 ? fmt::format("{:>6.2f} {:>6.1f}GB/s", t * 1e3, gbps(s, t)) : std::string("-");
    };
    os << fmt::format("{:<14} {:>7.1f} {:>16} {:>16} {:>16} {:>16} {:>7.2f}x {:>8.1e}\n", s.op,
                      s.touches, cell(s.reference_s), cell(s.isa_s[0]), cell(s.isa_s[1]),
                      cell(s.isa_s[2]), s.reference_s / s.isa_s[selected], s.error);
  }
}

}  // namespace

void add_bench_elementwise_command(CLI::App& app) {
  CLI::App* bench = app.get_subcommand("bench");  // registered by add_bench_command
  auto args = std::make_shared<BenchElementwiseArgs>();
  CLI::App* c = bench->add_subcommand(
      "elementwise", "Elementwise kernels (LayerNorm, GeLU, residual, cross-entropy, AdamW) vs "
                     "their naive references: ms, GB/s, speed-up");
  c->add_option("--shape", args->shape, "ROWSxCOLS of every buffer")->capture_default_str();
  c->add_option("--seconds", args->seconds, "Target time per op")->capture_default_str();
  c->add_flag("--json", args->json, "One JSON object per op");
  c->callback([args] { run_bench_elementwise(*args); });
}

}  // namespace meshtp::cli
