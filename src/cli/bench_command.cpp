// meshtp bench collectives | gemm — measurements printed as a table, or JSON lines (--json).
#include <fmt/format.h>

#include <map>
#include <nlohmann/json.hpp>

#include "bench/collectives.hpp"
#include "bench/local_gemm.hpp"
#include "cli/commands.hpp"
#include "core/error.hpp"
#include "core/parse.hpp"
#include "mesh/device_mesh.hpp"

namespace meshtp::cli {
namespace {

struct CollectivesArgs {
  std::string mesh;   // empty: 1-D mesh of all ranks
  std::string sizes;  // empty: 8K … 64M
  double seconds = 0.2;
  bool json = false;
};

void print_collectives_table(const mesh::DeviceMesh& mesh,
                             const std::vector<bench::CollectiveSample>& samples) {
  std::ostream& os = out();
  os << fmt::format("{} ({} ranks): median over iterations of the max over ranks; "
                    "busbw as in nccl-tests\n",
                    mesh.to_string(), mesh.size());
  if (samples.empty()) {
    os << "no mesh dim has more than one rank: nothing to measure\n";
    return;
  }
  os << fmt::format("{:>4} {:>5} {:>6}", "dim", "ranks", "bytes");
  for (const auto c : bench::kAllCollectives) os << fmt::format(" | {:>26}", layout::name(c));
  os << '\n' << fmt::format("{:>17}", "");
  for (std::size_t i = 0; i < std::size(bench::kAllCollectives); ++i) {
    os << fmt::format(" | {:>11} {:>14}", "time us", "busbw GB/s");
  }
  os << '\n';
  // One row per (dim, bytes); columns per collective.
  std::map<std::pair<int, std::int64_t>, std::map<layout::CollectiveKind, bench::CollectiveSample>>
      rows;
  for (const auto& s : samples) rows[{s.mesh_dim, s.bytes}][s.collective] = s;
  for (const auto& [key, by_collective] : rows) {
    const auto& any = by_collective.begin()->second;
    os << fmt::format("{:>4} {:>5} {:>6}", key.first, any.group_size, format_byte_size(key.second));
    for (const auto c : bench::kAllCollectives) {
      const auto it = by_collective.find(c);
      if (it == by_collective.end()) {
        os << fmt::format(" | {:>26}", "-");
      } else {
        os << fmt::format(" | {:>11.1f} {:>14.3f}", it->second.median_seconds * 1e6,
                          it->second.busbw_gbps);
      }
    }
    os << '\n';
  }
}

void run_bench_collectives(const CollectivesArgs& args) {
  const std::vector<int> shape =
      args.mesh.empty() ? std::vector<int>{world().size()} : parse_mesh_shape(args.mesh);
  bench::CollectivesOptions options;
  if (!args.sizes.empty()) options.sizes = parse_byte_sizes(args.sizes);
  MESHTP_CHECK(args.seconds > 0 && args.seconds <= 60,
               "--seconds={} must be in (0, 60]", args.seconds);
  options.target_seconds_per_case = args.seconds;
  const mesh::DeviceMesh mesh(world(), shape);
  const auto samples = bench::run_collectives(mesh, options);
  if (!args.json) {
    print_collectives_table(mesh, samples);
    return;
  }
  for (const auto& s : samples) {
    const nlohmann::json line{{"bench", "collectives"},
                              {"mesh", shape},
                              {"mesh_dim", s.mesh_dim},
                              {"group_size", s.group_size},
                              {"collective", layout::name(s.collective)},
                              {"bytes", s.bytes},
                              {"iterations", s.iterations},
                              {"median_s", s.median_seconds},
                              {"algbw_gbps", s.algbw_gbps},
                              {"busbw_gbps", s.busbw_gbps}};
    out() << line.dump() << '\n';
  }
}

struct BenchGemmArgs {
  std::string shapes;  // "MxNxK,…"; empty: the defaults
  bool json = false;
};

std::vector<bench::GemmShape> parse_gemm_shapes(const std::string& text) {
  if (text.empty()) return bench::default_gemm_shapes();
  std::vector<bench::GemmShape> shapes;
  std::string_view rest = text;
  while (true) {
    const auto cut = rest.find(',');
    const std::string item(rest.substr(0, cut));
    std::vector<int> dims;
    try {
      dims = parse_mesh_shape(item);  // same "AxBxC" syntax
    } catch (const Error&) {
      dims.clear();
    }
    MESHTP_CHECK(dims.size() == 3, "bad --shapes item '{}': expected MxNxK, like 1024x1024x1024",
                 item);
    shapes.push_back({dims[0], dims[1], dims[2]});
    if (cut == std::string_view::npos) break;
    rest = rest.substr(cut + 1);
  }
  return shapes;
}

void run_bench_gemm(const BenchGemmArgs& args) {
  const auto shapes = parse_gemm_shapes(args.shapes);
  if (!args.json) {
    out() << "local GeMM, one rank, one BLAS thread: meshtp::gemm vs cblas_sgemm direct "
             "(medians, interleaved)\n"
          << fmt::format("{:>16} {:>6} {:>14} {:>14} {:>8}\n", "m x n x k", "iters",
                         "meshtp GF/s", "BLAS GF/s", "ratio");
  }
  for (const auto& shape : shapes) {
    // Every rank measures (they share the cores); rank 0 reports its own numbers.
    const bench::LocalGemmSample s = bench::time_local_gemm(shape);
    if (args.json) {
      out() << nlohmann::json{{"bench", "gemm"},
                              {"m", shape.m},
                              {"n", shape.n},
                              {"k", shape.k},
                              {"iterations", s.iterations},
                              {"meshtp_s", s.meshtp_seconds},
                              {"blas_s", s.blas_seconds},
                              {"meshtp_gflops", s.meshtp_gflops},
                              {"blas_gflops", s.blas_gflops},
                              {"ratio", s.ratio}}
                   .dump()
            << '\n';
    } else {
      out() << fmt::format("{:>16} {:>6} {:>14.2f} {:>14.2f} {:>8.3f}\n",
                           fmt::format("{}x{}x{}", shape.m, shape.n, shape.k), s.iterations,
                           s.meshtp_gflops, s.blas_gflops, s.ratio);
    }
  }
}

}  // namespace

void add_bench_command(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "Measure collectives, GeMM and layers");
  bench->require_subcommand(1);

  auto collectives = std::make_shared<CollectivesArgs>();
  CLI::App* c = bench->add_subcommand(
      "collectives", "Latency and bandwidth of all_reduce, all_gather, reduce_scatter and "
                     "broadcast on each mesh dim");
  c->add_option("--mesh", collectives->mesh, "Mesh shape, e.g. 2x2 (default: all ranks in 1-D)");
  c->add_option("--sizes", collectives->sizes,
                "Comma-separated message sizes, e.g. 8K,1M,64M (default: 8K to 64M, x4 steps)");
  c->add_option("--seconds", collectives->seconds, "Target time per case (default 0.2)");
  c->add_flag("--json", collectives->json, "Print one JSON object per measurement");
  c->callback([collectives] { run_bench_collectives(*collectives); });

  auto gemm = std::make_shared<BenchGemmArgs>();
  CLI::App* g = bench->add_subcommand(
      "gemm", "Local GeMM GFLOP/s: meshtp::gemm against OpenBLAS called directly");
  g->add_option("--shapes", gemm->shapes, "Comma-separated MxNxK (default: 256^3 … 2048^3, "
                                          "4096x1024x1024, 1024x4096x1024)");
  g->add_flag("--json", gemm->json, "Print one JSON object per shape");
  g->callback([gemm] { run_bench_gemm(*gemm); });
}

}  // namespace meshtp::cli
