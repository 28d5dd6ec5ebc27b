// A layout as a framework's configuration (plan/emit.hpp): each framework's text carries the
// layout's degrees, batch sizes, schedule, recomputation and ZeRO stage in its own spelling;
// what a framework cannot run is named, and the best layout it can run is the planner's own
// search restricted to those layouts (the same as filtering the exhaustive ranking).
#include "plan/emit.hpp"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/text.hpp"
#include "plan/presets.hpp"

namespace meshtp::plan {
namespace {

using layout::Plan;
using layout::Schedule;

// 96 layers, batch 512 on 128 devices: dp 4 × pp 4 (v 2) × tp 8, 16 microbatches of 8.
ModelSpec model_96() {
  ModelSpec m = load_model("gpt3-175b");
  m.batch = 512;
  return m;
}

Plan plan_3d() {
  return Plan{.dp = 4,
              .pp = 4,
              .microbatches = 16,
              .schedule = Schedule::kInterleaved,
              .virtual_stages = 2,
              .zero = 1,
              .recompute = Recompute::kFull,
              .mesh = {8, 1},
              .strategy = Strategy::kTp1d,
              .sequence_parallel = true,
              .provenance = layout::Provenance{.predicted_step_s = 12.5}};
}

EmitRequest request_of(const Plan& p) {
  return {.plan = p, .model = model_96(), .topology = "dgx-a100-16x8"};
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// Megatron-LM's arguments: a bash file of comments, the environment Megatron-LM asserts and
// one array, "  --name value" or "  --flag" per line.
std::map<std::string, std::string> megatron_args(const std::string& text) {
  std::map<std::string, std::string> args;
  bool in_array = false, closed = false, exported = false;
  for (const std::string& raw : lines_of(text)) {
    if (!in_array) {
      if (raw.empty() || raw[0] == '#') continue;
      // Exported 1 (tensor parallelism's), or unset (Megatron-FSDP's: validate_args refuses 1).
      if (raw == "export CUDA_DEVICE_MAX_CONNECTIONS=1" ||
          raw == "unset CUDA_DEVICE_MAX_CONNECTIONS") {
        exported = true;
        continue;
      }
      EXPECT_EQ(raw, "MEGATRON_ARGS=(") << text;
      EXPECT_FALSE(closed) << text;
      in_array = true;
      continue;
    }
    if (raw == ")") {
      in_array = false;
      closed = true;
      continue;
    }
    EXPECT_EQ(raw.rfind("  --", 0), 0u) << raw;
    const std::string line = raw.substr(2);
    const std::size_t space = line.find(' ');
    const std::string name = line.substr(2, space == std::string::npos ? space : space - 2);
    EXPECT_EQ(args.count(name), 0u) << "given twice: " << name;
    args[name] = space == std::string::npos ? "" : line.substr(space + 1);
  }
  EXPECT_TRUE(closed && exported) << text;
  return args;
}

TEST(Emit, MegatronArgumentsCarryTheLayout) {
  const std::string text = emit(Framework::kMegatron, request_of(plan_3d()));
  const auto args = megatron_args(text);
  EXPECT_EQ(args.at("tensor-model-parallel-size"), "8");
  EXPECT_EQ(args.at("pipeline-model-parallel-size"), "4");
  EXPECT_EQ(args.at("num-layers-per-virtual-pipeline-stage"), "12");  // 96 / (4 · 2)
  EXPECT_EQ(args.at("sequence-parallel"), "");
  EXPECT_EQ(args.at("recompute-granularity"), "full");
  EXPECT_EQ(args.at("recompute-method"), "uniform");
  EXPECT_EQ(args.at("recompute-num-layers"), "1");
  EXPECT_EQ(args.at("use-distributed-optimizer"), "");
  EXPECT_EQ(args.at("micro-batch-size"), "8");  // 512 / (4 · 16)
  EXPECT_EQ(args.at("global-batch-size"), "512");
  EXPECT_EQ(args.at("num-layers"), "96");
  EXPECT_EQ(args.at("hidden-size"), "12288");
  EXPECT_EQ(args.at("num-attention-heads"), "96");
  EXPECT_EQ(args.at("seq-length"), "2048");
  EXPECT_EQ(args.at("fp16"), "");
  EXPECT_EQ(args.size(), 16u);
  EXPECT_NE(text.find("# data parallel 4 = 128 devices / (tensor 8 × pipeline 4): Megatron-LM "
                      "derives it"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("12.5 s per step predicted"), std::string::npos) << text;
  EXPECT_NE(text.find("# chosen, priced and memory-checked as Megatron-LM runs it (--runtime "
                      "megatron"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.rfind("# Megatron-LM configuration (Megatron-LM core_v0.15.0 spelling) for "
                       "gpt3-175b on dgx-a100-16x8 (128 devices): dp=4 mesh=8x1 tp1d pp=4",
                       0),
            0u)
      << text;
}

// Selective recomputation takes no method and no layer count (Megatron-LM refuses them);
// without ZeRO, sequence parallelism or a pipeline those arguments are absent, and at tensor
// parallelism 1 so is --sequence-parallel, which Megatron-LM would turn off.
// ZeRO-2 and -3 as Megatron-FSDP (core_v0.15.0): its flags, validate_args' checkpoint format
// for it, and CUDA_DEVICE_MAX_CONNECTIONS unset (validate_args asserts it is not 1).
TEST(Emit, MegatronZeroTwoAndThreeAreMegatronFsdp) {
  for (const int zero : {2, 3}) {
    Plan p = plan_3d();
    p.zero = zero;
    const std::string text = emit(Framework::kMegatron, request_of(p));
    const auto args = megatron_args(text);
    EXPECT_EQ(args.at("use-distributed-optimizer"), "");
    EXPECT_EQ(args.at("use-megatron-fsdp"), "");
    EXPECT_EQ(args.at("data-parallel-sharding-strategy"),
              zero == 3 ? "optim_grads_params" : "optim_grads");
    EXPECT_EQ(args.at("no-gradient-accumulation-fusion"), "");
    EXPECT_EQ(args.at("ckpt-format"), "fsdp_dtensor");
    EXPECT_NE(text.find("\nunset CUDA_DEVICE_MAX_CONNECTIONS\n"), std::string::npos) << text;
    EXPECT_EQ(text.find("export CUDA_DEVICE_MAX_CONNECTIONS"), std::string::npos) << text;
  }
  Plan one = plan_3d();
  one.zero = 1;
  const auto args = megatron_args(emit(Framework::kMegatron, request_of(one)));
  EXPECT_EQ(args.count("use-megatron-fsdp"), 0u);
  EXPECT_EQ(args.count("ckpt-format"), 0u);
}

TEST(Emit, MegatronSelectiveAndDefaults) {
  Plan p = plan_3d();
  p.recompute = Recompute::kSelective;
  p.zero = 0;
  p.pp = 1;
  p.virtual_stages = 1;
  p.schedule = Schedule::k1F1B;
  p.dp = 16;
  p.microbatches = 4;
  EmitRequest r = request_of(p);
  r.runtime = layout::Runtime::kMegatron;
  r.model.precision = Precision::kBf16;
  auto args = megatron_args(emit(Framework::kMegatron, r));
  EXPECT_EQ(args.at("recompute-granularity"), "selective");
  EXPECT_EQ(args.count("recompute-method") + args.count("recompute-num-layers"), 0u);
  EXPECT_EQ(args.count("use-distributed-optimizer"), 0u);
  EXPECT_EQ(args.count("num-layers-per-virtual-pipeline-stage"), 0u);
  EXPECT_EQ(args.at("pipeline-model-parallel-size"), "1");
  EXPECT_EQ(args.at("micro-batch-size"), "8");  // 512 / (16 · 4): 4 accumulation steps
  EXPECT_EQ(args.count("fp16"), 0u);
  EXPECT_EQ(args.at("bf16"), "");

  p.mesh = {1, 1};
  p.strategy = Strategy::kMegatron;
  p.sequence_parallel = false;
  p.dp = 128;
  p.microbatches = 1;
  r = request_of(p);
  args = megatron_args(emit(Framework::kMegatron, r));
  EXPECT_EQ(args.at("tensor-model-parallel-size"), "1");
  EXPECT_EQ(args.count("sequence-parallel"), 0u);
  EXPECT_EQ(args.at("micro-batch-size"), "4");
}

TEST(Emit, TorchtitanTomlCarriesTheLayout) {
  Plan p = plan_3d();  // ZeRO-1 beside a pipeline: FSDP, no resharding after the forward
  const auto contains = [](const std::string& text, const std::vector<std::string>& parts) {
    for (const std::string& part : parts) {
      EXPECT_NE(text.find(part), std::string::npos) << part << "\nnot in\n" << text;
    }
  };
  contains(emit(Framework::kTorchtitan, request_of(p)),
           {"\n[training]\nlocal_batch_size = 128\nglobal_batch_size = 512\nseq_len = 2048\n"
            "mixed_precision_param = \"bfloat16\"\n",
            "\n[parallelism]\ndata_parallel_replicate_degree = 1\ndata_parallel_shard_degree = 4\n"
            "fsdp_reshard_after_forward = \"never\"\ntensor_parallel_degree = 8\n"
            "pipeline_parallel_degree = 4\npipeline_parallel_schedule = \"Interleaved1F1B\"\n"
            "pipeline_parallel_microbatch_size = 8\npipeline_parallel_layers_per_stage = 12\n"
            "pipeline_parallel_first_stage_less_layers = 0\n"
            "pipeline_parallel_last_stage_less_layers = 0\ncontext_parallel_degree = 1\n",
            "\n[activation_checkpoint]\nmode = \"full\"\n",
            "# fp16: torchtitan's mixed precision is bfloat16",
            "# ZeRO-1 as FSDP without resharding after the forward",
            // The launcher, as v0.2.2's run_train.sh runs it: every device a process.
            "# launch: torchrun with 128 processes in all (--nnodes × --nproc-per-node) "
            "-m torchtitan.train --job.config_file FILE"});
  // Without a pipeline, microbatches are accumulation steps (local = B/(dp·m)): ZeRO-3 is FSDP
  // that reshards after each forward.
  p.pp = 1;
  p.virtual_stages = 1;
  p.schedule = Schedule::k1F1B;
  p.dp = 16;
  p.microbatches = 4;
  p.zero = 3;
  p.recompute = Recompute::kNone;
  const std::string flat = emit(Framework::kTorchtitan, request_of(p));
  contains(flat, {"local_batch_size = 8\nglobal_batch_size = 512\n",
                  "data_parallel_replicate_degree = 1\ndata_parallel_shard_degree = 16\n"
                  "fsdp_reshard_after_forward = \"always\"\n",
                  "pipeline_parallel_degree = 1\n", "mode = \"none\"\n"});
  EXPECT_EQ(flat.find("pipeline_parallel_schedule"), std::string::npos) << flat;
  // Data parallelism alone without ZeRO: DDP.
  p = Plan{.dp = 128, .mesh = {1, 1}, .strategy = Strategy::kMegatron};
  contains(emit(Framework::kTorchtitan, request_of(p)),
           {"local_batch_size = 4\n",
            "data_parallel_replicate_degree = 128\n"
            "data_parallel_shard_degree = 1\ntensor_parallel_degree"});
}

TEST(Emit, DeepSpeedJsonCarriesTheLayout) {
  Plan p = plan_3d();
  p.mesh = {1, 1};
  p.strategy = Strategy::kMegatron;
  p.sequence_parallel = false;
  p.dp = 32;
  p.virtual_stages = 1;
  p.schedule = Schedule::k1F1B;
  const auto j = nlohmann::json::parse(emit(Framework::kDeepSpeed, request_of(p)));
  EXPECT_EQ(j.at("train_batch_size"), 512);
  EXPECT_EQ(j.at("train_micro_batch_size_per_gpu"), 1);  // 512 / (32 · 16)
  EXPECT_EQ(j.at("gradient_accumulation_steps"), 16);
  EXPECT_EQ(j.at("zero_optimization").at("stage"), 1);
  EXPECT_EQ(j.at("fp16").at("enabled"), true);
  EXPECT_FALSE(j.contains("tensor_parallel"));
  EXPECT_EQ(j.at("_meshtp").at("dp"), 32);
  EXPECT_EQ(j.at("_meshtp").at("pp"), 4);
  EXPECT_EQ(j.at("_meshtp").at("tp"), 1);
  EXPECT_NE(j.at("_meshtp").at("comment").dump().find("num_stages=4"), std::string::npos);
  // DeepSpeed's batch rule: train_batch_size = micro · accumulation · data-parallel ranks.
  EXPECT_EQ(j.at("train_batch_size").get<int>(),
            j.at("train_micro_batch_size_per_gpu").get<int>() *
                j.at("gradient_accumulation_steps").get<int>() *
                j.at("_meshtp").at("dp").get<int>());

  // Tensor parallelism without a pipeline: AutoTP.
  p.mesh = {8, 1};
  p.pp = 1;
  p.dp = 16;
  p.zero = 2;
  const auto tp = nlohmann::json::parse(emit(Framework::kDeepSpeed, request_of(p)));
  EXPECT_EQ(tp.at("tensor_parallel").at("autotp_size"), 8);
  EXPECT_EQ(tp.at("zero_optimization").at("stage"), 2);
  // Without an mpu deepspeed.initialize checks the batch against the world (128 ranks):
  // micro 2 (512 / (16 · 16)) × 16 accumulation steps × 128.
  EXPECT_EQ(tp.at("train_micro_batch_size_per_gpu"), 2);
  EXPECT_EQ(tp.at("train_batch_size"), 2 * 16 * 128);
  const std::string said = tp.at("_meshtp").at("comment").dump();
  EXPECT_NE(said.find("deepspeed.tp_model_init"), std::string::npos) << said;
  EXPECT_NE(said.find("no mpu is given"), std::string::npos) << said;
  EXPECT_NE(said.find("launch: deepspeed with 128 processes in all (--num_nodes × --num_gpus) "
                      "YOUR_SCRIPT.py --deepspeed --deepspeed_config FILE"),
            std::string::npos)
      << said;
  EXPECT_EQ(said.find("splits the model's linears"), std::string::npos) << said;
}

// What each framework lacks, named; a layout every one runs.
TEST(Emit, InexpressibleNamesWhatTheFrameworkLacks) {
  const auto why = [](Framework f, const Plan& p, Precision precision = Precision::kFp16) {
    return inexpressible(f, p, precision).value_or("runs");
  };
  Plan atp = plan_3d();
  atp.mesh = {2, 4};
  atp.strategy = Strategy::kAtp;
  atp.sequence_parallel = false;
  for (const Framework f : layout::all<Framework>()) {
    EXPECT_NE(why(f, atp).find("ATP's 2D tensor parallelism on the 2x4 mesh"), std::string::npos)
        << why(f, atp);
    Plan g = atp;
    g.strategy = Strategy::kMeshSlice;
    EXPECT_NE(why(f, g).find("meshslice runs every linear as a 2D GeMM on the 2x4 mesh"),
              std::string::npos);
  }
  Plan p = plan_3d();
  EXPECT_EQ(why(Framework::kMegatron, p), "runs");
  EXPECT_EQ(why(Framework::kTorchtitan, p), "runs");
  EXPECT_NE(why(Framework::kDeepSpeed, p).find("sequence parallelism"), std::string::npos);
  p.zero = 2;
  EXPECT_EQ(why(Framework::kMegatron, p), "runs");  // Megatron-FSDP
  EXPECT_NE(why(Framework::kTorchtitan, p).find("ZeRO-2 beside a pipeline"), std::string::npos);
  p.zero = 0;
  EXPECT_EQ(why(Framework::kTorchtitan, p), "runs");
  p.recompute = Recompute::kSelective;
  EXPECT_NE(why(Framework::kTorchtitan, p).find("selective recomputation"), std::string::npos);
  p.recompute = Recompute::kFull;
  {
    Plan flat = p;  // accumulation: torchtitan syncs every microbatch unless ZeRO-3
    flat.pp = 1;
    flat.virtual_stages = 1;
    flat.dp = 16;
    EXPECT_NE(why(Framework::kTorchtitan, flat).find("ZeRO-0 over 16 accumulated microbatches"),
              std::string::npos);
    flat.zero = 3;
    EXPECT_EQ(why(Framework::kTorchtitan, flat), "runs");
    flat.microbatches = 1;
    flat.zero = 0;
    EXPECT_EQ(why(Framework::kTorchtitan, flat), "runs");
  }
  p.zero = 3;
  p.strategy = Strategy::kMegatron;
  p.sequence_parallel = false;
  EXPECT_NE(why(Framework::kTorchtitan, p).find("without sequence parallelism"), std::string::npos);
  EXPECT_NE(why(Framework::kDeepSpeed, p).find("AutoTP does not run under its pipeline"),
            std::string::npos);
  p.mesh = {1, 1};
  EXPECT_NE(why(Framework::kDeepSpeed, p).find("ZeRO-3 with pipeline parallelism"),
            std::string::npos);
  p.zero = 1;
  EXPECT_NE(why(Framework::kDeepSpeed, p).find("2 interleaved virtual stages"), std::string::npos);
  p.virtual_stages = 1;
  p.schedule = Schedule::kGpipe;
  EXPECT_NE(why(Framework::kDeepSpeed, p).find("GPipe"), std::string::npos);
  EXPECT_NE(why(Framework::kMegatron, p).find("GPipe"), std::string::npos);
  p.schedule = Schedule::k1F1B;
  EXPECT_EQ(why(Framework::kDeepSpeed, p), "runs");
  // One replica shards nothing: its ZeRO stage is no obstacle.
  Plan one{.zero = 2, .mesh = {8, 1}, .strategy = Strategy::kTp1d, .sequence_parallel = true};
  EXPECT_EQ(why(Framework::kMegatron, one), "runs");
  EXPECT_EQ(why(Framework::kTorchtitan, one, Precision::kFp32), "runs");
  // torchtitan v0.2.2 applies 2-byte mixed precision beside TP or PP only through FSDP.
  EXPECT_NE(why(Framework::kTorchtitan, one).find("trains in fp32"), std::string::npos)
      << why(Framework::kTorchtitan, one);
  EXPECT_NE(why(Framework::kTorchtitan, one, Precision::kBf16).find("only through FSDP"),
            std::string::npos);
  one.chunks = 2;
  one.strategy = Strategy::kMegatron;
  one.sequence_parallel = false;
  EXPECT_NE(why(Framework::kMegatron, one).find("chunks=2"), std::string::npos);
}

TEST(Emit, ALayoutTheFrameworkCannotRunGivesWayToTheFallback) {
  Plan atp = plan_3d();
  atp.mesh = {2, 4};
  atp.strategy = Strategy::kAtp;
  atp.sequence_parallel = false;
  EmitRequest r = request_of(atp);
  try {
    emit(Framework::kMegatron, r);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Megatron-LM cannot run the layout dp=4 mesh=2x4 atp"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("no layout it can run fits"), std::string::npos);
  }
  r.fallback = plan_3d();
  r.fallback->provenance->predicted_step_s = 13.25;
  r.notes = {"does not fit: 90 GiB"};  // about r.plan: said of it, beside the first line
  const std::string text = emit(Framework::kMegatron, r);
  const std::vector<std::string> lines = lines_of(text);
  EXPECT_EQ(
      lines.at(0).rfind("# Megatron-LM cannot run the planner's layout (dp=4 mesh=2x4 atp", 0), 0u)
      << text;
  EXPECT_NE(lines.at(0).find("12.5 s per step predicted): ATP's 2D tensor parallelism on the "
                             "2x4 mesh"),
            std::string::npos)
      << lines.at(0);
  EXPECT_EQ(lines.at(1), "# that layout: does not fit: 90 GiB");
  EXPECT_NE(lines.at(2).find("dp=4 mesh=8x1 tp1d"), std::string::npos) << lines.at(2);
  EXPECT_NE(lines.at(2).find("13.25 s per step"), std::string::npos) << lines.at(2);
  EXPECT_EQ(text.find("\n# does not fit"), std::string::npos) << text;
  EXPECT_EQ(megatron_args(text).at("tensor-model-parallel-size"), "8");
  // A fallback the framework cannot run either is refused.
  r.fallback = atp;
  EXPECT_THROW(emit(Framework::kMegatron, r), Error);
}

TEST(Emit, ALayoutThatDoesNotSplitTheModelIsAnError) {
  Plan p = plan_3d();
  p.microbatches = 3;
  try {
    emit(Framework::kMegatron, request_of(p));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("batch=512 of 'gpt3-175b' does not split into dp=4 × "
                                         "microbatches=3"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(layout::parse<Framework>("fsdp"), Error);
  try {
    layout::parse<Framework>("fsdp");
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "unknown framework 'fsdp' (valid: megatron, torchtitan, deepspeed)");
  }
}

// The restricted search equals the exhaustive ranking filtered: the same layouts in the same
// order, the first feasible one best_expressible's, never faster than the unrestricted best.
TEST(Emit, BestExpressibleIsTheSearchFilteredToTheFramework) {
  LayoutRequest r{.topology = load_topology("ib-2x8xa100"), .model = load_model("small")};
  r.model.layers = 8;
  r.devices = r.topology.device_count();
  r.strategies = {Strategy::kAtp, Strategy::kTp1d};
  const Precision precision = r.model.precision;
  for (const Framework f : layout::all<Framework>()) {
    r.runtime = runtime_of(f);  // megatron, or deepspeed for DeepSpeed
    const std::vector<LayoutCandidate> all = search_layouts(r);
    LayoutRequest restricted = r;
    restricted.accepts = [f, precision](const Plan& p) {
      return !inexpressible(f, p, precision).has_value();
    };
    const LayoutSearch filtered = search_layouts(restricted, 0);
    std::vector<const LayoutCandidate*> expected;
    for (const LayoutCandidate& c : all) {
      if (!inexpressible(f, c.plan, precision)) expected.push_back(&c);
    }
    ASSERT_EQ(filtered.ranked.size(), expected.size()) << layout::name(f);
    ASSERT_LT(expected.size(), all.size()) << layout::name(f);
    EXPECT_EQ(filtered.searched, static_cast<std::int64_t>(expected.size()));
    for (std::size_t i = 0; i < expected.size(); ++i) {
      EXPECT_EQ(filtered.ranked[i].plan, expected[i]->plan) << layout::name(f) << " row " << i;
      EXPECT_EQ(filtered.ranked[i].t_step_s, expected[i]->t_step_s);
    }
    // Bounded (keep 1): the same first layout.
    const std::optional<Plan> best = best_expressible(f, r);
    ASSERT_TRUE(best.has_value()) << layout::name(f);
    ASSERT_TRUE(expected.front()->feasible);
    Plan first = expected.front()->plan;
    EXPECT_EQ(best->provenance->predicted_step_s, expected.front()->t_step_s);
    first.provenance = best->provenance;
    EXPECT_EQ(*best, first) << layout::name(f);
    EXPECT_GE(best->provenance->predicted_step_s, all.front().t_step_s);
    EXPECT_FALSE(inexpressible(f, *best, precision).has_value());
  }
}

// 2D: ATP §5.3's PCIe calibration makes atp 2x4 the best; each framework gets the first
// feasible row of the same table it can run.
TEST(Emit, BestExpressible2dIsTheFirstRowTheFrameworkRuns) {
  PlanRequest r{
      .topology = load_topology("pcie-8xa100"), .model = load_model("atp-m4"), .devices = 8};
  const PlanResult result = plan(r);
  ASSERT_NE(result.best_candidate(), nullptr);
  ASSERT_EQ(result.best_candidate()->strategy, Strategy::kAtp);
  for (const Framework f : layout::all<Framework>()) {
    const Precision precision = r.model.precision;
    EXPECT_TRUE(inexpressible(f, layout_of(*result.best_candidate(), r.model), precision)
                    .has_value());
    const std::optional<Plan> best = best_expressible(f, r);
    if (f == Framework::kTorchtitan) {
      // One replica on 8 devices is tensor parallelism without FSDP: torchtitan would train
      // the fp16 model in fp32, so no 2D layout of it runs as priced.
      EXPECT_FALSE(best.has_value()) << *best;
      continue;
    }
    ASSERT_TRUE(best.has_value()) << layout::name(f);
    EXPECT_FALSE(inexpressible(f, *best, precision).has_value()) << *best;
    EXPECT_EQ(best->mesh, (std::array<int, 2>{8, 1})) << *best;
    EXPECT_GT(best->provenance->predicted_step_s, result.best_candidate()->t_step_s);
  }
}

// A name that holds a line break or quotes stays inside its comment line (core/text.hpp): the
// strings of issue 48's sweep put no argument, table or key of their own into any file.
TEST(Emit, NamesAreEscapedIntoEveryConfiguration) {
  for (const std::string name : {"gpt\n--tensor-model-parallel-size 64\n", "x\"]\n[evil]\nk = 1"}) {
    EmitRequest r = request_of(plan_3d());
    r.model.name = name;
    r.topology = name;
    const std::string megatron = emit(Framework::kMegatron, r);
    EXPECT_EQ(megatron_args(megatron).at("tensor-model-parallel-size"), "8");
    for (const Framework f : {Framework::kMegatron, Framework::kTorchtitan}) {
      const std::string text = emit(f, r);
      for (const std::string& line : lines_of(text)) {
        EXPECT_NE(line.rfind("--tensor-model-parallel-size 64", 0), 0u) << text;
        EXPECT_NE(line.rfind("[evil]", 0), 0u) << text;
        EXPECT_NE(line.rfind("k = 1", 0), 0u) << text;
      }
    }
    Plan flat = plan_3d();  // one DeepSpeed runs: no tensor parallelism, one stage per rank
    flat.mesh = {1, 1};
    flat.strategy = Strategy::kMegatron;
    flat.sequence_parallel = false;
    flat.dp = 32;
    flat.virtual_stages = 1;
    flat.schedule = Schedule::k1F1B;
    r.plan = flat;
    const auto j = nlohmann::json::parse(emit(Framework::kDeepSpeed, r));
    EXPECT_FALSE(j.contains("evil"));
    EXPECT_NE(j.at("_meshtp").at("comment").at(0).get<std::string>().find(escape_text(name)),
              std::string::npos)
        << j.dump();
  }
}

}  // namespace
}  // namespace meshtp::plan
