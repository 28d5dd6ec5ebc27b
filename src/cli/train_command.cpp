// meshtp train: plan (or take) a layout, then train a byte-level GPT on this job's ranks.
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "cli/commands.hpp"
#include "cli/cuda_run.hpp"
#include "cli/device_flags.hpp"
#include "cli/flag_checks.hpp"
#include "cli/layout_flags.hpp"
#include "cli/stop_signals.hpp"
#include "cli/train_flags.hpp"
#include "core/error.hpp"
#include "core/parse.hpp"
#include "core/text.hpp"
#include "layout/pipeline_schedule.hpp"
#include "model/gpt.hpp"
#include "plan/layout_search.hpp"
#include "plan/memory.hpp"
#include "plan/planner.hpp"
#include "plan/presets.hpp"
#include "tensor/memory.hpp"
#include "train/byte_corpus.hpp"
#include "train/checkpoint_dir.hpp"
#include "train/pipeline_model.hpp"
#include "train/trainer.hpp"

namespace meshtp::cli {
namespace {

struct TrainArgs {
  ModelFlags shape{"tiny"};
  LayoutFlags layout;
  DeviceFlags device;
  bool dry_run = false;
  std::string precision = "fp32";
  train::TrainConfig config;
};

// --mesh auto: the planner's fastest feasible layout on `topology` with as many devices as
// ranks, over every strategy, that the runtime accepts. Returns why it chose it.
std::string plan_layout(TrainArgs& args, const plan::ModelSpec& spec) {
  const LayoutFlags& flags = args.layout;
  MESHTP_CHECK(!flags.topology.empty(),
               "--mesh auto needs --topology NAME|FILE (a preset, or the file `meshtp calibrate` "
               "writes for these ranks)");
  MESHTP_CHECK(!flags.from_file(), "--mesh auto conflicts with --plan {}", flags.plan_file);
  for (const CLI::Option* o : flags.spelled_out) {
    MESHTP_CHECK(o->count() == 0 || o->get_name() == "--mesh" || o->get_name() == "--tp",
                 "{} conflicts with --mesh auto: the planner chooses the layout", o->get_name());
  }
  plan::PlanRequest request{
      .topology = plan::load_topology(flags.topology), .model = spec, .devices = world().size()};
  if (!flags.strategies.empty()) request.strategies = plan::parse_strategies(flags.strategies);
  const plan::PlanResult result = plan::plan(request);
  // The planner ranks the layers; the step also runs the embedding, the head and the loss
  // (whose collectives depend on the layout) and the optimizer: every runnable candidate's
  // layers are topped up with those parts as `plan --3d --evaluate` prices them (one replica,
  // one stage, one microbatch: the step is their sum), and the fastest step wins.
  const plan::LayoutRequest whole{
      .topology = request.topology, .model = spec, .devices = request.devices};
  std::optional<std::pair<plan::Candidate, plan::LayoutCandidate>> best;
  for (const plan::Candidate& c : result.candidates) {
    if (!c.valid || !c.feasible) continue;
    train::TrainConfig trial = args.config;
    trial.model.layout = plan::to_plan(c);
    try {
      train::validate(trial, world().size());
    } catch (const Error&) {
      continue;  // the runtime cannot run this one (e.g. chunks vs the per-replica batch)
    }
    plan::LayoutCandidate step = plan::evaluate_layout(whole, trial.model.layout);
    step.t_step_s = c.t_step_s + step.t_head_s + step.t_optimizer_s;
    if (!best || step.t_step_s < best->second.t_step_s) {
      best.emplace(c, std::move(step));
      args.config = trial;
    }
  }
  MESHTP_CHECK(best.has_value(),
               "the planner found no feasible layout the runtime can run for this model on {} "
               "ranks",
               world().size());
  const auto& [c, step] = *best;
  return fmt::format(
      "the planner's choice on '{}': predicted {:.3g} s/step — the layers {:.3g} s (their "
      "communication {:.3g} s, as if nothing overlapped), embedding, head and loss {:.3g} s "
      "({:.3g} s of it communication), optimizer {:.3g} s — the fastest of {} candidates{}",
      request.topology.name, step.t_step_s, c.t_step_s, c.t_comm_s, step.t_head_s,
      step.t_head_comm_s, step.t_optimizer_s, result.candidates.size(),
      flags.strategies.empty() ? "" : fmt::format(" (--strategies {})", flags.strategies));
}

// Per rank: the planner's memory model (plan/memory.hpp: the tensors this rank's pipeline
// stage allocates) beside the measured high-water mark of tensor storage and the peak
// resident set. Collective.
// on_gpu: the summary's peak is the GPU allocator's (train::TrainSummary::tensor_peak_bytes).
void print_memory(std::ostream& os, const plan::ModelSpec& spec, const layout::Plan& p,
                  const train::TrainSummary& summary, bool on_gpu) {
  // The rank grid [tp, cp, pp, dp] (train/pipeline_model.hpp).
  const int pipeline_rank = world().rank() / (p.mesh[0] * p.mesh[1] * p.cp) % p.pp;
  // A cp rank runs s/cp tokens of each sequence (plan/memory.hpp).
  const plan::MemoryEstimate predicted =
      plan::rank_memory(plan::cp_rank_model(spec, p), p.as_runtime_runs(spec), pipeline_rank);
  const std::array<double, 3> mine{predicted.total_bytes(),
                                   static_cast<double>(summary.tensor_peak_bytes),
                                   static_cast<double>(summary.max_rss_bytes)};
  std::vector<double> all(3 * static_cast<std::size_t>(world().size()));
  world().all_gather(std::span<const double>(mine), std::span<double>(all));
  constexpr double kMiB = 1024.0 * 1024.0;
  os << fmt::format("memory  predicted {:.1f} MiB on rank 0 (params {:.1f}, grads {:.1f}, "
                    "optimizer {:.1f}, activations {:.1f}, buffers {:.1f})\n",
                    predicted.total_bytes() / kMiB, predicted.params_bytes / kMiB,
                    predicted.grads_bytes / kMiB, predicted.optimizer_bytes / kMiB,
                    predicted.activations_bytes / kMiB, predicted.workspace_bytes / kMiB);
  for (int r = 0; r < world().size(); ++r) {
    const double* row = all.data() + 3 * static_cast<std::size_t>(r);
    os << fmt::format(
        "memory  rank {}: {} peak {:.1f} MiB (predicted {:.1f}, "
        "predicted/measured {:.3f}), max RSS {:.1f} MiB\n",
        r, on_gpu ? "GPU" : "tensors", row[1] / kMiB, row[0] / kMiB, row[0] / std::max(row[1], 1.0),
        row[2] / kMiB);
  }
}

// The layout: --plan FILE, --mesh auto, or the layout flags (cli/layout_flags.hpp).
std::string choose_layout(TrainArgs& args, const plan::ModelSpec& spec) {
  const LayoutFlags& flags = args.layout;
  if (flags.planned()) return plan_layout(args, spec);
  MESHTP_CHECK(flags.strategies.empty(),
               "--strategies {} needs --mesh auto: it says which strategies the planner may "
               "choose from",
               flags.strategies);
  args.config.model.layout = flags.resolve(world().size(), "the world", &spec);
  layout::Plan& p = args.config.model.layout;
  std::string cp_note;
  if (p.cp > 1 && p.attention == layout::Attention::kUnfused && !flags.given("--attention") &&
      !layout::is_gemm2d(p.strategy)) {
    // The context-parallel core is flash-style (model/block.hpp); an explicit --attention
    // unfused is refused by the block's check instead.
    p.attention = layout::Attention::kFused;
    cp_note = fmt::format(" (cp={}: the fused attention core, context parallelism's)", p.cp);
  }
  if (flags.from_file()) return "layout from " + flags.plan_file + cp_note;
  if (flags.mesh.empty()) {
    return "no --mesh given: Megatron 1D over every rank of a pipeline stage" + cp_note;
  }
  return "layout given with --mesh/--dp/--pp" + std::string(p.cp > 1 ? "/--cp" : "") + cp_note;
}

// Refuses a run whose per-rank memory (the planner's model: parameters, gradients, AdamW,
// activations, plus the LM head's buffers) exceeds what this node has available for its
// ranks — a second's arithmetic instead of minutes of swapping towards the OOM killer.
// Returns the estimate line printed in the header.
// On --device cuda the GPU's memory (device_bytes_per_rank ≥ 0: its share for this rank) is
// what must hold it.
std::string check_memory(const train::TrainConfig& c, plan::ModelSpec spec, bool enforce,
                         double device_bytes_per_rank) {
  spec.batch = c.model.shape.batch;
  const plan::MemoryEstimate m = plan::peak_rank_memory(plan::cp_rank_model(spec, c.model.layout),
                                                        c.model.layout.as_runtime_runs(spec));
  const double need = m.total_bytes();
  const bool gpu = device_bytes_per_rank >= 0;
  const int local = gpu ? 1 : world().ranks_on_this_node();
  const double available = gpu ? device_bytes_per_rank : available_memory_bytes();
  constexpr double kGiB = kBytesPerGiB;
  const std::string line = fmt::format(
      "~{:.2f} GiB per rank (params+grads+AdamW {:.2f}, activations {:.2f}, buffers "
      "{:.2f}); {:.1f} GiB available {} for {} rank{}",
      need / kGiB, (m.params_bytes + m.grads_bytes + m.optimizer_bytes) / kGiB,
      m.activations_bytes / kGiB, m.workspace_bytes / kGiB, available / kGiB,
      gpu ? "on its GPU" : "here", local, local > 1 ? "s" : "");
  MESHTP_CHECK(!enforce || available <= 0 || need * local <= available,
               "model '{}' with --batch={} --seq={} (hidden {}, {} layers) on {} needs {}: lower "
               "--batch or --seq, choose a smaller --model, or use more ranks",
               spec.name, spec.batch, spec.seq, spec.hidden, spec.layers, train::layout_string(c),
               line);
  return line;
}

void run_train(TrainArgs& args) {
  const plan::ModelSpec spec = args.shape.runtime_model(
      ModelFlags::Experts::kAllowed, ModelFlags::Layers::kFamily);
  args.device.check();
  train::TrainConfig& c = args.config;
  c.model.shape = spec;
  c.precision = parse_precision(args.precision, "--precision");
  // A model file's "precision" is what the planner prices; train runs --precision. Said once,
  // so a file saying fp16 is not taken for a 2-byte run.
  if (root() && std::filesystem::is_regular_file(args.shape.model)) {
    std::ifstream in(args.shape.model);
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_object() && j.contains("precision") && j["precision"].is_string() &&
        j["precision"].get<std::string>() != name(c.precision)) {
      std::cerr << fmt::format(
          "note: model file '{}' says precision {}, which the planner prices; train runs "
          "--precision {} (fp32 or bf16)\n",
          escape_text(args.shape.model), escape_text(j["precision"].get<std::string>()),
          name(c.precision));
    }
  }
  if (c.data.empty()) c.data = train::kDefaultCorpus;
  const std::string why = choose_layout(args, spec);
  train::validate(c, world().size());
  // The backend and the groups the run computes on; made after every check of the flags.
  RunDevice device = open_run_device(world(), args.device);
  c.model.backend = device.backend;

  std::ostream& os = out();
  const std::int64_t replica_batch = c.model.shape.batch / c.model.layout.dp;
  const std::string memory = check_memory(c, spec, !args.dry_run, device.device_bytes_per_rank);
  std::string seed = std::to_string(c.seed);
  if (c.resume) {
    // A resumed run continues the checkpoint's data stream, whatever --seed says.
    if (const auto state = train::peek_newest_checkpoint(c.checkpoint_dir)) {
      seed = fmt::format("{} (the checkpoint's{})", state->seed,
                         state->seed != c.seed ? fmt::format("; --seed {} is not used", c.seed)
                                               : "");
    }
  }
  // The Llama family's fields where they are not GPT's (layout/model_shape.hpp).
  const std::string kv = spec.kv() != spec.heads ? fmt::format(" ({} KV)", spec.kv()) : "";
  const std::string family =
      spec.is_gpt() ? ""
                    : fmt::format("; {} {}, {}, {} positions{}", spec.activation, spec.ffn(),
                                  spec.norm, spec.position,
                                  spec.tie_embeddings ? "" : ", untied head");
  os << fmt::format(
            "model   {} — {} layers, hidden {}, {} heads{}, seq {}, vocab {}{} ({:.2f}M "
            "parameters)\n",
            spec.name, spec.layers, spec.hidden, spec.heads, kv, spec.seq, spec.vocab, family,
            spec.total_params() / 1e6)
     << fmt::format("memory  {}\n", memory)
     << fmt::format("batch   {} sequences × {} tokens per step ({} per replica)\n", spec.batch,
                    spec.seq, replica_batch)
     << fmt::format("layout  {} on {} ranks — {}\n", fmt::streamed(c.model.layout), world().size(),
                    why)
     << fmt::format(
            "optim   AdamW lr {:g}→{:g} (warmup {}, cosine), betas {:g}/{:g}, wd {:g}, "
            "clip {:g}, seed {}\n",
            c.lr, c.final_lr(), c.warmup, c.adamw.beta1, c.adamw.beta2, c.adamw.weight_decay,
            c.grad_clip, seed)
     << fmt::format("device  {}\n", device.header)
     << fmt::format("dtype   {}\n", train::describe_precision(c.precision))
     << fmt::format("data    {} (validation: last {:.0f}%)\n", c.data, 100 * c.validation_fraction);
  for (const std::string& line : train::describe_layout(c.model.layout, spec.layers)) {
    os << "groups  " << line << '\n';
  }
  if (!c.checkpoint_dir.empty()) {
    os << fmt::format("ckpt    {}/checkpoint.safetensors ({}keeping the last {})\n",
                      c.checkpoint_dir, c.resume ? "resuming; " : "", c.keep);
  }
  if (args.dry_run) {
    os << "dry run: stopping before training\n";
    return;
  }
  os << std::flush;
  install_stop_handlers(world().rank());
  train::TrainHooks hooks;
  hooks.stop_signal = stop_signal;
  hooks.notice = [](const std::string& text) {
    std::cout.flush();
    std::fprintf(stderr, "warning: %s\n", text.c_str());
    std::fflush(stderr);
  };
  hooks.on_step = [&](const train::StepReport& r) { os << step_line(r, c.steps) << std::endl; };
  const train::TrainSummary summary = train::train(*device.group, c, hooks);
  if (!summary.resumed_from.empty()) os << "resumed " << summary.resumed_from << '\n';
  os << fmt::format("{} steps {}–{}", summary.stop_signal ? "stopped" : "done   ",
                    summary.first_step + 1, summary.last_step);
  if (summary.validation_loss) os << fmt::format(", validation loss {:.4f}", *summary.validation_loss);
  os << '\n';
  if (!summary.checkpoint.empty()) os << "ckpt    written: " << summary.checkpoint << '\n';
  if (!c.metrics_path.empty()) os << "metrics " << c.metrics_path << '\n';
  if (!summary.trace.empty()) {
    os << "trace   " << summary.trace << " (open in https://ui.perfetto.dev or chrome://tracing)\n";
  }
  plan::ModelSpec priced = spec;  // the run's precision: bf16 stores the saved GeMM inputs so
  priced.precision = c.precision;
  print_memory(os, priced, c.model.layout, summary, device.cuda.has_value());
  if (summary.skipped_steps > 0) {
    os << fmt::format("skipped {} step{} with a non-finite loss or gradient norm\n",
                      summary.skipped_steps, summary.skipped_steps > 1 ? "s" : "");
  }
  if (summary.stop_signal != 0) {
    os << std::flush;
    if (world().rank() == 0) {
      std::fprintf(stderr, "error: stopped by SIG%s after step %lld%s\n",
                   sigabbrev_np(summary.stop_signal), static_cast<long long>(summary.last_step),
                   summary.checkpoint.empty()
                       ? "; no --checkpoint-dir, so nothing was saved"
                       : fmt::format("; checkpoint written to {} — continue with --resume",
                                     summary.checkpoint).c_str());
    }
    set_exit_status(128 + summary.stop_signal);
  }
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  train::TrainConfig& c = args->config;
  CLI::App* t = app.add_subcommand(
      "train", "Train a byte-level GPT with tensor, pipeline and data parallelism");
  args->shape.add_to(t, ModelFlags::kBatch | ModelFlags::kSeq | ModelFlags::kMoeForceBalance,
                     "Model preset (tiny, small, …) or JSON file");
  add_training_flags(t, c);
  args->layout.add_to(t, LayoutFlags::kMeshAuto | LayoutFlags::kReplicas | LayoutFlags::kPipeline |
                             LayoutFlags::kTpAlias | LayoutFlags::kExperts |
                             LayoutFlags::kContext);
  args->device.add_to(t);
  t->add_option("--precision", args->precision,
                "fp32, or bf16 mixed precision: GeMM operands in bf16, fp32 accumulation, "
                "master weights and optimizer")
      ->capture_default_str();
  t->add_option("--checkpoint-dir", c.checkpoint_dir, "Directory of checkpoint.safetensors");
  t->add_option("--checkpoint-every", c.checkpoint_every, "Checkpoint every N steps (0: at the end)")
      ->capture_default_str();
  t->add_option("--keep", c.keep, "Checkpoints kept in --checkpoint-dir (the newest K)")
      ->capture_default_str();
  t->add_flag("--resume", c.resume,
              "Continue from the newest intact checkpoint in --checkpoint-dir (any layout)");
  t->add_option("--trace", c.trace_path, "Chrome trace-event file of a few steps");
  t->add_option("--trace-steps", c.trace_steps, "Steps traced")->capture_default_str();
  t->add_flag("--dry-run", args->dry_run, "Print the resolved configuration and plan, then stop");
  t->callback([args] { run_train(*args); });
}

}  // namespace meshtp::cli
