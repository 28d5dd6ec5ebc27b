// meshtp-gpu train (also `meshtp gpu train`) — `meshtp train` on one device with no mesh:
//
//   meshtp-gpu train [--model tiny|small|FILE] [--batch B --seq S --hidden H --heads A
//                    --layers L] [--device gpu|cpu]
//                    [--precision fp32|bf16] [the optimizer, data and log flags of train]
//
// The loop is train/single_device.hpp: the same init, data, clipping, AdamW and schedule as
// `meshtp train`, so on the CPU it reproduces `meshtp train -np 1`'s losses and on the GPU
// it is the same run within the precision's tolerance. This binary links no MPI, so it runs
// on a GPU machine with none installed (scripts/gpu-check.sh).
#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <string>

#include "cli/gpu_command.hpp"
#include "cli/model_flags.hpp"
#include "cli/train_flags.hpp"
#include "core/error.hpp"
#include "core/parse.hpp"
#include "device/gpu.hpp"
#include "device/gpu_backend.hpp"
#include "ops/cpu_backend.hpp"
#include "train/byte_corpus.hpp"
#include "train/single_device.hpp"

namespace meshtp::cli {

namespace {

struct GpuTrainArgs {
  ModelFlags shape{"tiny"};
  std::string device = "gpu";
  std::string precision = "fp32";
  train::TrainConfig config;
};

void run_gpu_train(GpuTrainArgs& args) {
  train::TrainConfig& c = args.config;
  MESHTP_CHECK(args.device == "gpu" || args.device == "cpu",
               "--device: '{}' is not a device (gpu, cpu)", args.device);
  c.precision = parse_precision(args.precision, "--precision");
  MESHTP_CHECK(args.device == "gpu" || c.precision == Precision::kFp32,
               "--device cpu --precision {}: the CPU backend computes in fp32 only (`meshtp "
               "train --precision {}` is the CPU's mixed precision)",
               args.precision, args.precision);
  const plan::ModelSpec spec = args.shape.runtime_model();
  c.model.shape = spec;
  c.model.shape.validate(fmt::format("model '{}'", spec.name));
  if (c.data.empty()) c.data = train::kDefaultCorpus;
  train::check_flags(c);  // before a GPU is opened: bad flags get their message anywhere

  std::unique_ptr<gpu::Context> ctx;
  std::unique_ptr<device::Backend> backend;
  if (args.device == "gpu") {
    ctx = std::make_unique<gpu::Context>();
    backend = std::make_unique<device::GpuBackend>(*ctx);
  } else {
    backend = std::make_unique<CpuBackend>();
  }
  const layout::ModelShape& m = c.model.shape;
  const bool resized = args.shape.hidden > 0 || args.shape.heads > 0 || args.shape.layers > 0;
  std::cout << fmt::format("model   {}{} — {} layers, hidden {}, {} heads, seq {}, vocab {}\n",
                           spec.name, resized ? " (resized)" : "", m.layers, m.hidden, m.heads,
                           m.seq, m.vocab)
            << fmt::format("batch   {} sequences × {} tokens per step\n", m.batch, m.seq)
            << fmt::format("device  {}, no mesh\n", backend->name())
            << fmt::format(
                   "optim   AdamW lr {:g}→{:g} (warmup {}, cosine), betas {:g}/{:g}, wd "
                   "{:g}, clip {:g}, seed {}\n",
                   c.lr, c.final_lr(), c.warmup, c.adamw.beta1, c.adamw.beta2, c.adamw.weight_decay,
                   c.grad_clip, c.seed)
            << fmt::format("dtype   {}\n", args.device == "gpu" && c.precision == Precision::kBf16
                                               ? "bf16 mixed precision: bf16 weights' copies and "
                                                 "activations, fp32 accumulation, master weights, "
                                                 "gradients and AdamW"
                                               : train::describe_precision(c.precision))
            << fmt::format("data    {} (validation: last {:.0f}%)\n", c.data,
                           100 * c.validation_fraction)
            << std::flush;
  train::TrainHooks hooks;
  hooks.notice = [](const std::string& text) {
    std::cout.flush();
    std::cerr << "warning: " << text << std::endl;
  };
  hooks.on_step = [&](const train::StepReport& r) {
    std::cout << step_line(r, c.steps) << std::endl;
  };
  const train::TrainSummary summary = train::train_on_device(*backend, c, hooks);
  std::cout << fmt::format("done    steps 1–{}", summary.last_step);
  if (summary.validation_loss)
    std::cout << fmt::format(", validation loss {:.4f}", *summary.validation_loss);
  std::cout << fmt::format(" ({:.2f}M parameters)\n",
                           static_cast<double>(summary.parameters) / 1e6);
  if (!c.metrics_path.empty()) std::cout << "metrics " << c.metrics_path << '\n';
  if (summary.skipped_steps > 0) {
    std::cout << fmt::format("skipped {} step{} with a non-finite loss or gradient norm\n",
                             summary.skipped_steps, summary.skipped_steps > 1 ? "s" : "");
  }
}

}  // namespace

void add_gpu_train_command(CLI::App& parent) {
  auto args = std::make_shared<GpuTrainArgs>();
  CLI::App* t = parent.add_subcommand(
      "train", "Train a byte-level GPT on one device (the GPU, or the CPU backend), no mesh");
  args->shape.add_to(t,
                     ModelFlags::kBatch | ModelFlags::kSeq | ModelFlags::kHidden |
                         ModelFlags::kHeads | ModelFlags::kLayers,
                     "Model preset (tiny, small, …) or JSON file");
  t->add_option("--device", args->device, "gpu, or cpu: the CPU backend")->capture_default_str();
  t->add_option("--precision", args->precision,
                "fp32, or bf16 mixed precision (on the GPU: bf16 weights' copies and "
                "activations, fp32 accumulation, masters and optimizer)")
      ->capture_default_str();
  add_training_flags(t, args->config);
  t->callback([args] { run_gpu_train(*args); });
}

}  // namespace meshtp::cli
