// meshtp block — run a GPT block stack once, forward and backward, on the current ranks, for
// checking from outside (e.g. against PyTorch):
//
//   mpirun -np 4 meshtp block --weights W.safetensors --input X.safetensors
//       --grad-output DY.safetensors --mesh 2x2 [--chunks 2] [--heads 8] --out OUT.safetensors
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
};

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
  const model::StackConfig config{
      .block = {.batch = x.dim(0),
                .seq = x.dim(1),
                .hidden = x.dim(2),
                .heads = heads_of(args, weights),
                .chunks = args.chunks,
                .sequence_parallel = args.sequence_parallel,
                .progress_splits = args.progress_splits},
      .layers = count_layers(weights)};
  model::Stack stack(mesh, config);  // validates: heads / hidden / batch vs mesh and chunks
  stack.load(weights);
  stack.set_input(x);
  stack.forward();
  std::map<std::string, Tensor> result{{"y", stack.gather_output()}};
  if (!args.grad_output.empty()) {
    const SafetensorsFile grad = load_safetensors(args.grad_output);
    stack.set_grad_output(require(grad, "dy", x.shape()));
    stack.zero_grads();
    stack.backward();
    result.emplace("dx", stack.gather_grad_input());
    for (auto& [name, g] : stack.gather_grads()) result.emplace("grad." + name, std::move(g));
  }
  const std::map<std::string, std::string> metadata{
      {"mesh", format_mesh_shape(mesh.shape())},
      {"chunks", std::to_string(args.chunks)},
      {"sequence_parallel", args.sequence_parallel ? "1" : "0"}};
  if (mesh.rank() == 0) save_safetensors(args.out, result, metadata);
  world().barrier();
  out() << fmt::format(
      "block stack: {} layers, b={} s={} h={} a={} on {} (chunks {}{}): wrote {} ({} tensors)\n",
      config.layers, config.block.batch, config.block.seq, config.block.hidden,
      config.block.heads, mesh.to_string(), args.chunks,
      args.sequence_parallel ? ", sequence parallel" : "", args.out, result.size());
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
  c->add_option("--progress-splits", args->progress_splits,
                "GeMM panels between MPI progress pokes (default 4)");
  c->callback([args] { run_block(*args); });
}

}  // namespace meshtp::cli
