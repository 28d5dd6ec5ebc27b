// meshtp block — run a GPT block stack once, forward and backward, on the current ranks, for
// checking from outside (e.g. against PyTorch):
//
//   mpirun -np 4 meshtp block --weights W.safetensors --input X.safetensors
//       --grad-output DY.safetensors --mesh 2x2 [--chunks 2] [--heads 8] --out OUT.safetensors
//   mpirun -np 4 meshtp block … --mesh 2x2 --strategy meshslice [--stationary auto|input|output]
//       [--slices 2]
//   mpirun -np 4 meshtp block … --plan plan.json
//
// --strategy atp (the default) runs the ATP block (model/block.hpp; --chunks,
// --sequence-parallel); the others run every linear as that 2D GeMM algorithm
// (model/gemm2d_block.hpp: tokens over mesh dim 0, features over mesh dim 1; --stationary
// the operand kept, --slices MeshSlice's S or SUMMA's panels per block). --plan takes the
// whole layout from a plan file instead (per-linear settings included).
//
// Inputs are global tensors: W holds every parameter of the table in model/params.hpp
// (layers.{i}.ln1.weight …, PyTorch names and layouts; the layer count is read from the
// names, the head count from --heads or W's "heads" metadata), X holds x [b, s, h] and DY
// holds dy [b, s, h]. OUT receives the global y, dx and every parameter gradient under its
// name prefixed with "grad.". Without --grad-output only y is computed and written.
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <set>

#include "cli/commands.hpp"
#include "cli/cuda_run.hpp"
#include "cli/device_flags.hpp"
#include "cli/flag_checks.hpp"
#include "cli/layout_flags.hpp"
#include "core/error.hpp"
#include "core/parse.hpp"
#include "mesh/device_mesh.hpp"
#include "model/gpt.hpp"
#include "tensor/safetensors.hpp"

namespace meshtp::cli {
namespace {

struct BlockArgs {
  std::string weights, input, grad_output, out;
  std::int64_t heads = 0;  // 0: from the weights' metadata
  LayoutFlags layout;
  DeviceFlags device;
};

// --plan's layout or the one the flags spell out: one replica of one stage on every rank.
layout::Plan plan_of(const BlockArgs& args) {
  const layout::Plan plan = args.layout.resolve(world().size());
  MESHTP_CHECK(plan.dp == 1 && plan.pp == 1,
               "block runs one replica of one stage: plan {} has dp={} pp={}",
               args.layout.plan_file, plan.dp, plan.pp);
  return plan;
}

// y, dx and every "grad.<parameter>" of one forward (+ backward) of the stack.
std::map<std::string, Tensor> run_stack(model::Stack& stack, const SafetensorsFile& weights,
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
  args.device.check();
  const layout::Plan plan = plan_of(args);
  const SafetensorsFile weights = load_safetensors(args.weights);
  const SafetensorsFile input = load_safetensors(args.input);
  const Tensor& x = require(input, "x");
  MESHTP_CHECK(x.ndim() == 3, "tensor 'x' in {} has shape {}, expected [batch, seq, hidden]",
               args.input, to_string(x.shape()));
  const model::GptConfig config{.shape = {.batch = x.dim(0),
                                          .seq = x.dim(1),
                                          .hidden = x.dim(2),
                                          .heads = heads_of(args, weights),
                                          .layers = count_layers(weights),
                                          .vocab = model::kByteVocab},
                                .layout = plan};
  // The files are read first: a bad one is refused before any GPU is opened.
  const RunDevice device = open_run_device(world(), args.device);
  const mesh::DeviceMesh mesh(*device.group, {plan.mesh[0], plan.mesh[1]});
  model::GptConfig on_device = config;
  on_device.backend = device.backend;
  // Validates: heads / hidden / batch against the mesh, chunks, the 2D GeMMs.
  const std::map<std::string, Tensor> result =
      run_stack(*model::make_stack(mesh, on_device), weights, x, args.grad_output);
  const std::map<std::string, std::string> metadata{{"mesh", format_mesh_shape(mesh.shape())},
                                                    {"plan", layout::to_json(plan).dump()}};
  if (mesh.rank() == 0) save_safetensors(args.out, result, metadata);
  world().barrier();
  out() << fmt::format(
      "block stack: {} layers, b={} s={} h={} a={} on {} ({}): wrote {} ({} tensors)\n",
      config.shape.layers, config.shape.batch, config.shape.seq, config.shape.hidden,
      config.shape.heads, mesh.to_string(), fmt::streamed(plan), args.out, result.size());
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
  c->add_option("--heads", args->heads, "Attention heads (default: the weights' metadata)")
      ->check(integer_at_least(1));
  args->layout.add_to(c);
  args->device.add_to(c);
  c->callback([args] { run_block(*args); });
}

}  // namespace meshtp::cli
