// meshtp gemm — one distributed 2D GeMM on global matrices, for checking from outside:
//
//   mpirun -np N meshtp gemm --a A.safetensors --b B.safetensors --mesh RxC
//          --algo meshslice|collective|wang|summa|cannon --dataflow os|ls|rs [--slices S]
//          --out C.safetensors [--check] [--dry-run] [--device cpu|cuda] [--collectives …]
//
// Every rank reads the two files (tensors `a` and `b`), checks the shapes chain for the
// dataflow and that the problem divides on the mesh (before any communication: every rank
// reaches the same verdict), keeps its [Shard(0), Shard(1)] blocks, runs the algorithm,
// gathers C and rank 0 writes it (tensor `c`, atomically). --check compares C with the
// serial meshtp::gemm on rank 0; --dry-run prints the problem, the local blocks and the
// cost, and stops.
//
// --device cuda runs the algorithm on the CUDA backend through the CUDA plugin (cuda_run.hpp):
// each rank uploads its blocks to its GPU, the mesh is built over the device-memory group
// (host-staged over the world, or NCCL: device_flags.hpp), and C is downloaded before the
// gather, so the file and --check are the CPU path's.
#include <fmt/format.h>

#include <map>
#include <optional>
#include <string>

#include "cli/commands.hpp"
#include "cli/cuda_run.hpp"
#include "cli/device_flags.hpp"
#include "cli/layout_flags.hpp"
#include "core/error.hpp"
#include "core/parse.hpp"
#include "mesh/dtensor.hpp"
#include "parallel/gemm2d/gemm2d.hpp"
#include "tensor/gemm.hpp"
#include "tensor/safetensors.hpp"

namespace meshtp::cli {
namespace {

using layout::Dataflow;

struct GemmArgs {
  std::string a_path, b_path, out_path;
  std::string algo = "meshslice";
  std::string dataflow = "os";
  std::string mesh;
  layout::Gemm2dParams params{};  // --slices: params.slices
  std::int64_t block = 0;
  bool check = false;
  bool dry_run = false;
  DeviceFlags device;
};

const Tensor& require_matrix(const SafetensorsFile& file, const std::string& name) {
  const Tensor& t = require(file, name);
  MESHTP_CHECK(t.ndim() == 2, "tensor '{}' in {} has shape {}; meshtp gemm needs a matrix", name,
               file.path, to_string(t.shape()));
  return t;
}

// m, n, k (and the dataflow) from the global operands; throws unless they chain for the dataflow.
parallel::Gemm2dShape problem_shape(Dataflow dataflow, const Tensor& a, const Tensor& b) {
  const std::int64_t ar = a.dim(0), ac = a.dim(1), br = b.dim(0), bc = b.dim(1);
  switch (dataflow) {
    case Dataflow::kOS:
      MESHTP_CHECK(ac == br,
                   "A {} and B {} do not chain for os (C = A·B): A has {} columns, "
                   "B has {} rows",
                   to_string(a.shape()), to_string(b.shape()), ac, br);
      return {.dataflow = dataflow, .m = ar, .n = bc, .k = ac};
    case Dataflow::kLS:
      MESHTP_CHECK(ac == bc,
                   "A {} and B {} do not chain for ls (C = A·Bᵀ): A has {} columns, "
                   "B has {} columns",
                   to_string(a.shape()), to_string(b.shape()), ac, bc);
      return {.dataflow = dataflow, .m = ar, .n = br, .k = ac};
    case Dataflow::kRS:
      MESHTP_CHECK(ar == br,
                   "A {} and B {} do not chain for rs (C = Aᵀ·B): A has {} rows, "
                   "B has {} rows",
                   to_string(a.shape()), to_string(b.shape()), ar, br);
      return {.dataflow = dataflow, .m = ac, .n = bc, .k = ar};
  }
  fail("unknown dataflow");
}

// This rank's block of C on the GPU: A's and B's blocks uploaded, the algorithm run on the
// CUDA backend over the device-memory group, C downloaded.
Tensor local_c_on_gpu(const GemmArgs& args, const std::vector<int>& shape, const Tensor& a_local,
                      const Tensor& b_local, const Shape& c_shape,
                      const parallel::Gemm2dOptions& options) {
  CudaRun run = open_cuda_run(world(), args.device);
  out() << "device " << run.header << '\n';
  device::Backend& be = run.device->backend();
  const auto upload = [&be](const Tensor& t) {
    device::Array array = be.alloc(t.numel(), Element::kF32);
    be.upload(array, t.values());
    return array;
  };
  Tensor c_local(c_shape);
  {
    const device::Array a = upload(a_local), b = upload(b_local);
    device::Array c = be.alloc(c_local.numel(), Element::kF32);
    const mesh::DeviceMesh mesh(*run.group, shape);
    parallel::Gemm2dWorkspace ws(be);
    parallel::gemm2d(mesh, a.view(a_local.dim(0), a_local.dim(1)),
                     b.view(b_local.dim(0), b_local.dim(1)), c.view(c_shape[0], c_shape[1]),
                     options, ws);
    const std::vector<float> got = be.download(c);
    std::copy(got.begin(), got.end(), c_local.values().begin());
  }  // device memory back before the device goes
  return c_local;
}

void run_gemm(const GemmArgs& args) {
  args.device.check();  // before any file is read or GPU opened
  const parallel::Gemm2dOptions options{.algo = layout::parse_algorithm(args.algo),
                                        .dataflow = layout::parse_dataflow(args.dataflow),
                                        .params = args.params,
                                        .block = args.block};
  const auto [nr, nc] = mesh_2d("--mesh", args.mesh, world().size());
  const std::vector<int> shape{nr, nc};
  const SafetensorsFile file_a = load_safetensors(args.a_path);
  std::optional<SafetensorsFile> own_b;
  if (args.b_path != args.a_path) own_b = load_safetensors(args.b_path);
  const Tensor& a = require_matrix(file_a, "a");
  const Tensor& b = require_matrix(own_b ? *own_b : file_a, "b");
  const parallel::Gemm2dShape s = problem_shape(options.dataflow, a, b);
  const layout::Gemm2dTraffic cost = parallel::gemm2d_traffic(nr, nc, s, options);  // validates
  if (args.dry_run) {
    out() << fmt::format(
        "gemm2d {} {} on mesh {}x{}: C [{}, {}] = {}; local blocks A [{}, {}], B [{}, {}], "
        "C [{}, {}]\nper rank: {:.3g} FLOP, {:.0f} bytes along the row, {:.0f} along the "
        "column, {} comm calls, {} sync steps\n",
        layout::name(options.algo), layout::name(options.dataflow), nr, nc, s.m, s.n,
        options.dataflow == Dataflow::kOS   ? "A·B"
        : options.dataflow == Dataflow::kLS ? "A·Bᵀ"
                                            : "Aᵀ·B",
        a.dim(0) / nr, a.dim(1) / nc, b.dim(0) / nr, b.dim(1) / nc, s.m / nr, s.n / nc,
        cost.flops_per_rank, cost.horizontal.bytes_per_rank, cost.vertical.bytes_per_rank,
        cost.launches(), cost.steps());
    return;
  }
  const mesh::DeviceMesh mesh(world(), shape);
  const mesh::ShardingSpec spec{mesh::Shard{0}, mesh::Shard{1}};
  const auto da = mesh::DTensor::distribute(a, mesh, spec);
  const auto db = mesh::DTensor::distribute(b, mesh, spec);
  Tensor c_local({s.m / nr, s.n / nc});
  if (args.device.device == "cuda") {
    c_local = local_c_on_gpu(args, shape, da.local(), db.local(), c_local.shape(), options);
  } else {
    parallel::Gemm2dWorkspace ws;
    parallel::gemm2d(mesh, da.local().matrix(), db.local().matrix(), c_local.matrix(), options,
                     ws);
  }
  const Tensor c = mesh::DTensor(mesh, spec, {s.m, s.n}, std::move(c_local)).full();
  if (world().rank() == 0) {
    save_safetensors(args.out_path, std::map<std::string, const Tensor*>{{"c", &c}},
                     {{"algo", std::string(layout::name(options.algo))},
                      {"dataflow", std::string(layout::name(options.dataflow))},
                      {"mesh", format_mesh_shape(shape)},
                      {"slices", std::to_string(options.params.slices)}});
  }
  out() << fmt::format("wrote c [{}, {}] to {} ({} {} on mesh {}x{}, slices={})\n", s.m, s.n,
                       args.out_path, layout::name(options.algo), layout::name(options.dataflow),
                       nr, nc, options.params.slices);
  if (args.check && world().rank() == 0) {
    Tensor want({s.m, s.n});
    gemm(a.matrix(), options.dataflow == Dataflow::kRS ? Trans::kYes : Trans::kNo, b.matrix(),
         options.dataflow == Dataflow::kLS ? Trans::kYes : Trans::kNo, want.matrix());
    const double err = max_relative_error(c.values(), want.values());
    out() << fmt::format("check: max relative error {:.3g} against serial gemm\n", err);
    MESHTP_CHECK(err <= 1e-5, "check failed: max relative error {:.3g} > 1e-5", err);
  }
  world().barrier();  // the file exists when the command returns on any rank
}

}  // namespace

void add_gemm_command(CLI::App& app) {
  auto args = std::make_shared<GemmArgs>();
  CLI::App* g =
      app.add_subcommand("gemm",
                         "One distributed 2D GeMM (Cannon, SUMMA, Collective, Wang, MeshSlice) on "
                         "global matrices read from safetensors files");
  g->add_option("--a", args->a_path, "File holding tensor 'a'")->required();
  g->add_option("--b", args->b_path, "File holding tensor 'b' (may be the same file)")->required();
  g->add_option("--mesh", args->mesh, "Mesh RxC; R·C must equal the number of ranks")->required();
  g->add_option("--algo", args->algo,
                "meshslice | collective | wang | summa | cannon (default meshslice)");
  g->add_option("--dataflow", args->dataflow,
                "os (C = A·B) | ls (C = A·Bᵀ) | rs (C = Aᵀ·B) (default os)");
  g->add_option("--slices", args->params.slices, "MeshSlice slice count S / SUMMA panel factor");
  g->add_option("--block", args->block, "MeshSlice slicing block (default: automatic)");
  g->add_option("--out", args->out_path, "Output file; C is written as tensor 'c'");
  g->add_flag("--check", args->check, "Compare with the serial GeMM (rank 0) and fail if off");
  g->add_flag("--dry-run", args->dry_run, "Print the problem and its cost, then stop");
  args->device.add_to(g);
  g->callback([args] {
    MESHTP_CHECK(args->dry_run || !args->out_path.empty(), "--out is required (or --dry-run)");
    run_gemm(*args);
  });
}

}  // namespace meshtp::cli
