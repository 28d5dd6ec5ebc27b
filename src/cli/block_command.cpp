// meshtp block — run a GPT block stack once, forward and backward, on the current ranks, for
// checking from outside (e.g. against PyTorch):
//
//   mpirun -np 4 meshtp block --weights W.safetensors --input X.safetensors
//       --grad-output DY.safetensors --mesh 2x2 [--chunks 2] [--heads 8] --out OUT.safetensors
//   mpirun -np 4 meshtp block … --mesh 2x2 --strategy meshslice [--dataflow auto|os|ls]
//       [--slices 2]
//
// --strategy atp (the default) runs the ATP block (model/block.hpp; --chunks,
// --sequence-parallel); the others run every linear as that 2D GeMM algorithm
// (model/gemm2d_block.hpp: tokens over mesh dim 0, features over mesh dim 1; --dataflow is
// the forward dataflow, --slices MeshSlice's S or SUMMA's panels per block).
//
// Inputs are global tensors: W holds every parameter of the table in model/params.hpp
// (layers.{i}.ln1.weight …, PyTorch names and layouts; the layer count is read from the
// names, the head count from --heads or W's "heads" metadata), X holds x [b, s, h] and DY
// holds dy [b, s, h]. OUT receives the global y, dx and every parameter gradient under its
// name prefixed with "grad.". Without --grad-output only y is computed and written.
#include <fmt/format.h>

#include <set>

#include "cli/commands.hpp"
#include "core/error.hpp"
#include "core/parse.hpp"
#include "mesh/device_mesh.hpp"
#include "model/gemm2d_stack.hpp"
#include "model/stack.hpp"
#include "tensor/safetensors.hpp"

namespace meshtp::cli {
namespace {

struct BlockArgs {
  std::string weights, input, grad_output, out;
  std::string mesh;
  int chunks = 1;
  std::int64_t heads = 0;  // 0: from the weights' metadata
  bool sequence_parallel = false;
  int progress_splits = 4;
  std::string strategy = "atp";  // atp or a Gemm2dAlgo name
  std::string dataflow = "auto";
  int slices = 1;
};

// y, dx and every "grad.<parameter>" of one forward (+ backward) of either stack.
template <typename StackT>
std::map<std::string, Tensor> run_stack(StackT& stack, const SafetensorsFile& weights,
                                        const Tensor& x, const std::string& grad_output) {
  stack.load(weights);
  stack.set_input(x);
  stack.forward();
  std::map<std::string, Tensor> result{{"y", stack.gather_output()}};
  if (!grad_output.empty()) {
    const SafetensorsFile grad = load_safetensors(grad_output);
    stack.set_grad_output(require(grad, "dy", x.shape()));
    stack.zero_grads();
    stack.backward();
    result.emplace("dx", stack.gather_grad_input());
    for (auto& [name, g] : stack.gather_grads()) result.emplace("grad." + name, std::move(g));
  }
  return result;
}

// Layers 0 … L−1 from the tensor names "layers.{i}.…".
int count_layers(const SafetensorsFile& w) {
  std::set<int> seen;
  for (const auto& [name, t] : w.tensors) {
    int layer = -1;
    if (std::sscanf(name.c_str(), "layers.%d.", &layer) == 1 && layer >= 0) seen.insert(layer);
  }
  MESHTP_CHECK(!seen.empty(), "{} holds no 'layers.{{i}}.…' tensors", w.path);
  const int layers = *seen.rbegin() + 1;
  MESHTP_CHECK(static_cast<int>(seen.size()) == layers,
               "{} has tensors of {} layers numbered up to {}: a layer is missing", w.path,
               seen.size(), layers - 1);
  return layers;
}

std::int64_t heads_of(const BlockArgs& args, const SafetensorsFile& w) {
  if (args.heads > 0) return args.heads;
  const auto it = w.metadata.find("heads");
  MESHTP_CHECK(it != w.metadata.end(),
               "--heads not given and {} has no \"heads\" metadata: pass --heads", w.path);
  try {
    return std::stoll(it->second);
  } catch (const std::exception&) {
    fail("{}: metadata heads='{}' is not a number", w.path, it->second);
  }
}

void run_block(const BlockArgs& args) {
  const mesh::DeviceMesh mesh(world(), parse_mesh_shape(args.mesh));
  const SafetensorsFile weights = load_safetensors(args.weights);
  const SafetensorsFile input = load_safetensors(args.input);
  const Tensor& x = require(input, "x");
  MESHTP_CHECK(x.ndim() == 3, "tensor 'x' in {} has shape {}, expected [batch, seq, hidden]",
               args.input, to_string(x.shape()));
  const bool atp = args.strategy == "atp";
  if (atp) {
    MESHTP_CHECK(args.dataflow == "auto" && args.slices == 1,
                 "--dataflow {} / --slices {} apply to the 2D GeMM strategies, not --strategy atp",
                 args.dataflow, args.slices);
  } else {
    MESHTP_CHECK(args.chunks == 1 && !args.sequence_parallel,
                 "--chunks {} / --sequence-parallel apply to --strategy atp only, not {}",
                 args.chunks, args.strategy);
  }
  const model::StackConfig config{
      .block = {.batch = x.dim(0),
                .seq = x.dim(1),
                .hidden = x.dim(2),
                .heads = heads_of(args, weights),
                .chunks = args.chunks,
                .sequence_parallel = args.sequence_parallel,
                .progress_splits = args.progress_splits},
      .layers = count_layers(weights)};
  std::map<std::string, Tensor> result;
  std::string how;
  if (atp) {
    model::Stack stack(mesh, config);  // validates: heads / hidden / batch vs mesh and chunks
    result = run_stack(stack, weights, x, args.grad_output);
    how = fmt::format("atp, chunks {}{}", args.chunks,
                      args.sequence_parallel ? ", sequence parallel" : "");
  } else {
    const bool auto_dataflow = args.dataflow == "auto";
    const model::Gemm2dStackConfig g{
        .block = {.batch = config.block.batch,
                  .seq = config.block.seq,
                  .hidden = config.block.hidden,
                  .heads = config.block.heads,
                  .algo = parallel::parse_gemm2d_algo(args.strategy),
                  .auto_dataflow = auto_dataflow,
                  .dataflow = auto_dataflow ? parallel::Dataflow::kOS
                                            : parallel::parse_dataflow(args.dataflow),
                  .slices = args.slices,
                  .progress_chunks = args.progress_splits},
        .layers = config.layers};
    model::Gemm2dStack stack(mesh, g);  // validates: batch % Nr, heads % Nc, the GeMMs
    result = run_stack(stack, weights, x, args.grad_output);
    how = fmt::format("2D GeMM {}, dataflow {} (qkv {}), slices {}", args.strategy, args.dataflow,
                      parallel::to_string(stack.plans().qkv.forward.dataflow), args.slices);
  }
  const std::map<std::string, std::string> metadata{
      {"mesh", format_mesh_shape(mesh.shape())},
      {"strategy", args.strategy},
      {"chunks", std::to_string(args.chunks)},
      {"sequence_parallel", args.sequence_parallel ? "1" : "0"}};
  if (mesh.rank() == 0) save_safetensors(args.out, result, metadata);
  world().barrier();
  out() << fmt::format(
      "block stack: {} layers, b={} s={} h={} a={} on {} ({}): wrote {} ({} tensors)\n",
      config.layers, config.block.batch, config.block.seq, config.block.hidden,
      config.block.heads, mesh.to_string(), how, args.out, result.size());
}

}  // namespace

void add_block_command(CLI::App& app) {
  auto args = std::make_shared<BlockArgs>();
  CLI::App* c = app.add_subcommand(
      "block", "Run a GPT block stack forward + backward on global safetensors inputs");
  c->add_option("--weights", args->weights, "Parameters (layers.{i}.…), global tensors")
      ->required();
  c->add_option("--input", args->input, "File holding x [batch, seq, hidden]")->required();
  c->add_option("--grad-output", args->grad_output,
                "File holding dy [batch, seq, hidden] (omit: forward only)");
  c->add_option("--out", args->out, "Output file: y, dx, grad.<parameter>")->required();
  c->add_option("--mesh", args->mesh, "Mesh d1xd2, e.g. 2x2 (d1·d2 = ranks)")->required();
  c->add_option("--chunks", args->chunks, "Batch chunks for overlap (default 1)");
  c->add_option("--heads", args->heads, "Attention heads (default: the weights' metadata)");
  c->add_flag("--sequence-parallel", args->sequence_parallel,
              "Sequence parallelism (mesh Nx1 only)");
  c->add_option("--strategy", args->strategy,
                "atp (default) or a 2D GeMM algorithm: meshslice, collective, wang, summa, cannon")
      ->check(CLI::IsMember({"atp", "meshslice", "collective", "wang", "summa", "cannon"}));
  c->add_option("--dataflow", args->dataflow,
                "2D GeMM forward dataflow: auto (default; keep the larger activation), os, ls")
      ->check(CLI::IsMember({"auto", "os", "ls", "rs"}));
  c->add_option("--slices", args->slices, "2D GeMM: MeshSlice's S, SUMMA's panels (default 1)");
  c->add_option("--progress-splits", args->progress_splits,
                "GeMM panels between MPI progress pokes (default 4)");
  c->callback([args] { run_block(*args); });
}

}  // namespace meshtp::cli
