// meshtp gpu — the GPU backend's probe and measurements:
//
//   meshtp gpu probe [--json]              the first GPU (or why there is none; exit 0 either way)
//   meshtp gpu gemm [--m M --n N --k K] [--type bf16|fp32] [--repeats R] [--json]
//                                          one cuBLASLt GeMM, validated, then timed (median)
//   meshtp gpu calibrate --out FILE [--repeats R] [--quick]
//                                          GeMM time by shape (bf16 and fp32), memory bandwidth
//                                          and launch cost: the GPU's device profile, as JSON
//
// Flags are checked before the GPU is opened, so bad input gets its message on any machine.
// `gpu step` and `gpu train` ran a second, serial GPT; the tensor-parallel runtime runs on the
// GPU now (`bench train --device cuda`, `train --device cuda`), and the two say so.
#include "cli/gpu_command.hpp"

#include <fmt/format.h>

#include <ctime>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "device/gpu.hpp"
#include "device/gpu_profile.hpp"

namespace meshtp::cli {
namespace {

Element parse_type(const std::string& text) {
  if (text == "bf16") return Element::kBF16;
  if (text == "fp32") return Element::kF32;
  fail("--type: '{}' is not an element type (bf16, fp32)", text);
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return text;
}

void print_measurement(const gpu::GemmMeasurement& g) {
  std::cout << fmt::format(
      "{:>6} {:>6} {:>6}  {:<4}  {:>9.4f} ms  {:>7.1f} TFLOP/s  (median of {})\n", g.shape.m,
      g.shape.n, g.shape.k, gpu::to_string(g.type), g.median_ms, g.tflops, g.repeats);
}

}  // namespace

void add_gpu_subcommands(CLI::App& parent) {
  {
    auto json = std::make_shared<bool>(false);
    CLI::App* probe = parent.add_subcommand("probe", "Report the first GPU, or why there is none");
    probe->add_flag("--json", *json, "Print one JSON object");
    probe->callback([json] {
      std::string why;
      const auto info = gpu::probe(&why);
      if (*json) {
        nlohmann::json j = {{"compiled_with_cuda", gpu::compiled_with_cuda()}};
        j["gpu"] = info ? gpu::to_json(*info) : nlohmann::json(nullptr);
        if (!info) j["why_not"] = why;
        std::cout << j.dump(2) << "\n";
        return;
      }
      if (!info) {
        std::cout << "GPU: none (" << why << ")\n";
        return;
      }
      std::cout << fmt::format(
          "GPU: {} (compute {}.{}, {} SMs, {:.1f} GiB, L2 {:.0f} MiB, SM clock {} MHz; driver "
          "{}.{}, runtime {}.{}; {} visible)\n",
          info->name, info->compute_major, info->compute_minor, info->multiprocessors,
          static_cast<double>(info->memory_bytes) / (1 << 30),
          static_cast<double>(info->l2_bytes) / (1 << 20), info->clock_mhz,
          info->driver_version / 1000, info->driver_version % 1000 / 10,
          info->runtime_version / 1000, info->runtime_version % 1000 / 10, info->devices_visible);
    });
  }
  {
    struct Args {
      std::int64_t m = 8192, n = 8192, k = 8192;
      std::string type = "bf16";
      int repeats = 20;
      bool json = false;
    };
    auto args = std::make_shared<Args>();
    CLI::App* gemm = parent.add_subcommand(
        "gemm", "Time one cuBLASLt GeMM C = A·B (validated first; median of the repeats)");
    gemm->add_option("--m", args->m, "Rows of A and C (default 8192)");
    gemm->add_option("--n", args->n, "Columns of B and C (default 8192)");
    gemm->add_option("--k", args->k, "Columns of A, rows of B (default 8192)");
    gemm->add_option("--type", args->type, "Element type of A, B, C: bf16 or fp32 (default bf16)");
    gemm->add_option("--repeats", args->repeats, "Timed runs (default 20)");
    gemm->add_flag("--json", args->json, "Print one JSON object");
    gemm->callback([args] {
      MESHTP_CHECK(args->m >= 1 && args->n >= 1 && args->k >= 1,
                   "--m, --n, --k must be ≥ 1 (got {}, {}, {})", args->m, args->n, args->k);
      MESHTP_CHECK(args->repeats >= 1, "--repeats must be ≥ 1 (got {})", args->repeats);
      const Element type = parse_type(args->type);
      gpu::Context ctx;
      const gpu::GemmMeasurement g =
          gpu::measure_gemm(ctx, {args->m, args->n, args->k}, type, args->repeats);
      if (args->json) {
        nlohmann::json j = gpu::to_json(g);
        j["device"] = ctx.info().name;
        std::cout << j.dump(2) << "\n";
      } else {
        std::cout << "GPU: " << ctx.info().name << "\n";
        print_measurement(g);
      }
    });
  }
  for (const auto& [name, instead] :
       {std::pair{"step",
                  "time a training step on the GPU with `meshtp bench train --device cuda`"},
        std::pair{"train", "train on a GPU with `meshtp train --device cuda`"}}) {
    parent.add_subcommand(name, std::string("Gone: ") + instead)
        ->allow_extras()
        ->callback([name, instead] { fail("meshtp gpu {} is gone: {}", name, instead); });
  }
  {
    struct Args {
      std::string out;
      int repeats = 10;
      bool quick = false;
    };
    auto args = std::make_shared<Args>();
    CLI::App* cal = parent.add_subcommand(
        "calibrate", "Measure the GPU's device profile (GeMM time by shape, bandwidth, launch)");
    cal->add_option("--out", args->out, "Write the profile here (JSON, atomically)")->required();
    cal->add_option("--repeats", args->repeats, "Timed runs per measurement (default 10)");
    cal->add_flag("--quick", args->quick, "Only the shapes with m = 512 (a smoke test)");
    cal->callback([args] {
      MESHTP_CHECK(args->repeats >= 1, "--repeats must be ≥ 1 (got {})", args->repeats);
      // Before minutes of measuring: what is at --out may be replaced, and its folder exists.
      check_output_path(args->out);
      const std::filesystem::path folder = std::filesystem::absolute(args->out).parent_path();
      MESHTP_CHECK(std::filesystem::is_directory(folder), "--out {}: the folder {} does not exist",
                   args->out, folder.string());
      gpu::Context ctx;
      std::vector<gpu::GemmShape> shapes = gpu::calibration_shapes();
      if (args->quick) std::erase_if(shapes, [](const gpu::GemmShape& s) { return s.m > 512; });
      const gpu::GpuProfile profile =
          gpu::calibrate(ctx, shapes, args->repeats,
                         fmt::format("meshtp gpu calibrate --repeats {}{} on {}", args->repeats,
                                     args->quick ? " --quick" : "", utc_now()));
      std::cout << "GPU: " << ctx.info().name << "\n";
      for (const auto& g : profile.gemm) print_measurement(g);
      for (const auto& o : profile.ops)
        std::cout << fmt::format("{:<22} {:<20} {:<4} {:>9.4f} ms  {:>7.0f} GB/s{}\n", o.op,
                                 o.shape, gpu::to_string(o.type), o.median_ms, o.gb_per_s,
                                 o.flops > 0 ? fmt::format("  {:>6.1f} TFLOP/s", o.tflops) : "");
      std::cout << fmt::format(
          "bf16 GeMM ceiling {:.1f} TFLOP/s; device copy {:.0f} GB/s (read + write, {} MiB); "
          "kernel launch {:.2f} us\n",
          profile.bf16_ceiling_tflops, profile.copy.gb_per_s, profile.copy.bytes >> 20,
          profile.launch_us);
      write_file_atomically(args->out, gpu::to_json(profile).dump(2) + "\n");
      std::cout << "wrote " << args->out << "\n";
    });
  }
}

}  // namespace meshtp::cli
