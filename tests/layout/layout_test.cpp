// The vocabulary's names round-trip and reject unknown text listing the valid names; a Plan
// round-trips through JSON, and bad plan files fail naming the key, the value and the file.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "layout/plan.hpp"
#include "error_of.hpp"

namespace meshtp::layout {
namespace {

using meshtp::test_support::error_of;

template <typename E>
void expect_round_trip() {
  for (const E e : all<E>()) {
    EXPECT_EQ(parse<E>(name(e)), e) << name(e);
    std::ostringstream os;
    os << e;
    EXPECT_EQ(os.str(), name(e));
    EXPECT_EQ(fmt::format("{}", e), name(e));
  }
}

TEST(Vocabulary, NamesRoundTripAndUnknownNamesListTheValidOnes) {
  expect_round_trip<Algorithm>();
  expect_round_trip<Dataflow>();
  expect_round_trip<Stationary>();
  expect_round_trip<CollectiveKind>();
  expect_round_trip<Strategy>();
  expect_round_trip<Linear>();
  expect_round_trip<Recompute>();
  expect_round_trip<Attention>();
  expect_round_trip<Schedule>();
  EXPECT_EQ(error_of([] { parse_algorithm("fox"); }),
            "unknown 2D GeMM algorithm 'fox' (valid: cannon, summa, collective, wang, meshslice)");
  EXPECT_EQ(error_of([] { parse_dataflow("OS"); }), "unknown dataflow 'OS' (valid: os, ls, rs)");
  EXPECT_EQ(error_of([] { parse_schedule("pipedream"); }),
            "unknown schedule 'pipedream' (valid: gpipe, 1f1b, interleaved)");
}

TEST(Vocabulary, StrategiesAndAlgorithms) {
  for (const Strategy s : all<Strategy>()) {
    EXPECT_EQ(is_gemm2d(s),
              s != Strategy::kAtp && s != Strategy::kMegatron && s != Strategy::kTp1d);
    if (is_gemm2d(s)) {
      EXPECT_EQ(strategy_of(algorithm_of(s)), s);
    }
  }
  for (const Algorithm a : all<Algorithm>()) EXPECT_EQ(name(strategy_of(a)), name(a));
  EXPECT_NE(error_of([] { algorithm_of(Strategy::kAtp); }).find("atp"), std::string::npos);
}

TEST(Vocabulary, TheLargestOperandStaysTiesYThenXThenW) {
  EXPECT_EQ(choose_stationary(4096, 1024, 256, true), Stationary::kInput);
  EXPECT_EQ(choose_stationary(4096, 256, 1024, true), Stationary::kOutput);
  EXPECT_EQ(choose_stationary(4096, 512, 512, true), Stationary::kOutput);  // X = Y: Y
  EXPECT_EQ(choose_stationary(64, 4096, 4096, true), Stationary::kWeight);
  EXPECT_EQ(choose_stationary(64, 4096, 2048, false), Stationary::kInput);
  EXPECT_EQ(choose_stationary(64, 2048, 4096, false), Stationary::kOutput);
}

Plan meshslice_plan() {
  Plan p{.dp = 2,
         .mesh = {2, 4},
         .strategy = Strategy::kMeshSlice,
         .provenance = Provenance{
             .topology = "t", .model = "m", .predicted_step_s = 0.5, .predicted_comm_s = 0.25}};
  p.linears = {{{.stationary = Stationary::kOutput, .gemm2d = {.slices = 2}},
                {.algorithm = Algorithm::kSumma, .gemm2d = {.slices = 3}},
                {.stationary = Stationary::kInput},
                {.algorithm = Algorithm::kWang,
                 .stationary = Stationary::kOutput,
                 .gemm2d = {.slices = 1}}}};
  return p;
}

TEST(Plan, JsonRoundTrips) {
  for (const Plan& p :
       {Plan{}, Plan{.mesh = {4, 1}, .strategy = Strategy::kTp1d, .sequence_parallel = true},
        Plan{.dp = 2,
        .pp = 4,
        .microbatches = 8,
        .schedule = Schedule::kInterleaved,
        .virtual_stages = 2,
        .zero = 3,
        .recompute = Recompute::kSelective,
        .mesh = {2, 2},
        .chunks = 2},
        Plan{.mesh = {2, 1}, .attention = Attention::kFused},
        meshslice_plan()}) {
    EXPECT_EQ(plan_from_json(to_json(p), "test"), p) << to_json(p).dump();
  }
  // Fused attention is the ATP blocks'; a 2D GeMM plan with it is refused.
  EXPECT_EQ(error_of([] {
              Plan{.mesh = {2, 2}, .strategy = Strategy::kMeshSlice,
                   .attention = Attention::kFused}
                  .validate();
            }),
            "plan: attention=fused runs in the ATP blocks (atp, megatron, tp1d), not meshslice");
  // A plan holds a 2D GeMM's slice count only (the file's "slices"), nothing it cannot save.
  EXPECT_EQ(error_of([] {
              Plan q = meshslice_plan();
              q.linears[1].gemm2d.summa_packets = 4;
              q.validate();
            }),
            "plan: proj summa_packets=4 and wang_decomposed=horizontal are the planner's, not a "
            "plan's (a plan holds the slice count only)");
  const Plan p = meshslice_plan();
  EXPECT_EQ(p.algorithm(Linear::kQkv), Algorithm::kMeshSlice);
  EXPECT_EQ(p.algorithm(Linear::kProj), Algorithm::kSumma);
  EXPECT_EQ(p.ranks(), 16);
  std::ostringstream os;
  os << p;
  EXPECT_EQ(os.str(),
            "dp=2 mesh=2x4 meshslice qkv=meshslice/output/S2 proj=summa/auto/S3 "
            "mlp1=meshslice/input/S1 mlp2=wang/output/S1");
  // Missing keys take their defaults.
  EXPECT_EQ(plan_from_json(nlohmann::json::object(), "empty"), Plan{});
}

TEST(Plan, SaveAndLoadAFile) {
  const auto path = std::filesystem::temp_directory_path() / "meshtp_layout_test_plan.json";
  save_plan(path.string(), meshslice_plan());
  EXPECT_EQ(load_plan(path.string()), meshslice_plan());
  write_file_atomically(path.string(), "{\"mesh\": [2, 2],\n \"strategy\": \"fsdp\"}");
  const std::string e = error_of([&] { load_plan(path.string()); });
  EXPECT_NE(e.find("plan '" + path.string() + "': field 'strategy': unknown strategy 'fsdp'"),
            std::string::npos)
      << e;
  write_file_atomically(path.string(), "{\"mesh\": [2, 2],");
  EXPECT_NE(error_of([&] { load_plan(path.string()); }).find("malformed JSON"), std::string::npos);
  std::filesystem::remove(path);
}

TEST(Plan, BadJsonNamesTheKeyAndTheFile) {
  const auto bad = [](const char* text) {
    return error_of([&] { plan_from_json(nlohmann::json::parse(text), "'p.json'"); });
  };
  EXPECT_EQ(bad(R"({"mesh": [2, 2], "chunk": 2})"),
            "plan 'p.json': unknown field 'chunk' (allowed: dp, pp, microbatches, schedule, "
            "virtual_stages, zero, recompute, mesh, strategy, chunks, sequence_parallel, "
            "progress_splits, linears, provenance, cp, cp_comm, first_stage_layers, "
            "last_stage_layers, ep, etp, attention)");
  // Integers are range-checked as written, before narrowing: 2^32 + 1 is not 1.
  EXPECT_EQ(bad(R"({"dp": 4294967297})"),
            "plan 'p.json': dp=4294967297 must be between -2147483648 and 2147483647");
  EXPECT_EQ(bad(R"({"mesh": [4294967298, 1]})"),
            "plan 'p.json': mesh[0]=4294967298 must be between 1 and 2147483647");
  EXPECT_EQ(bad(R"({"progress_splits": 0})"),
            "plan 'p.json': plan: progress_splits=0 must be at least 1");
  EXPECT_EQ(bad(R"({"dp": "2"})"), "plan 'p.json': field 'dp' must be an integer, got \"2\"");
  EXPECT_EQ(bad(R"({"mesh": [2]})"),
            "plan 'p.json': field 'mesh' must be two integers like [2, 2], got [2]");
  EXPECT_EQ(bad(R"({"sequence_parallel": 1})"),
            "plan 'p.json': field 'sequence_parallel' must be true or false, got 1");
  EXPECT_EQ(bad(R"({"strategy": "summa", "linears": {"qkv": {"slice": 2}}})"),
            "plan 'p.json', linear qkv: unknown field 'slice' (allowed: algorithm, stationary, "
            "slices)");
  EXPECT_EQ(bad(R"({"strategy": "summa", "linears": {"fc3": {}}})"),
            "plan 'p.json', linears: unknown field 'fc3' (allowed: qkv, proj, mlp1, mlp2)");
  EXPECT_EQ(bad(R"({"strategy": "summa", "linears": {"qkv": {"stationary": "both"}}})"),
            "plan 'p.json', linear qkv: field 'stationary': unknown stationary operand 'both' "
            "(valid: input, output, weight)");
  EXPECT_EQ(bad(R"({"zero": 4})"), "plan 'p.json': plan: zero=4 must be 0, 1, 2 or 3");
  EXPECT_EQ(bad(R"({"mesh": [2, 2], "strategy": "megatron"})"),
            "plan 'p.json': plan: strategy megatron is 1D: mesh 2x2 needs a dim of 1 (atp for "
            "2D)");
  EXPECT_EQ(bad(R"({"strategy": "atp", "linears": {"qkv": {"slices": 2}}})"),
            "plan 'p.json': plan: per-linear settings (qkv=?/auto/S2) apply to the 2D GeMM "
            "strategies, not atp");
  EXPECT_EQ(bad(R"({"strategy": "cannon", "chunks": 2})"),
            "plan 'p.json': plan: chunks=2 / sequence_parallel=false apply to atp, megatron, "
            "tp1d, not cannon");
  EXPECT_EQ(bad(R"({"virtual_stages": 2})"),
            "plan 'p.json': plan: virtual_stages=2 needs schedule interleaved, not gpipe");
}

// The layout flags' (and the Python module's) text → Plan: the one conversion.
// The one check of a plan against the model about to run it (train, bench train, simulate
// --plan, meshtp.evaluate(plan=…)): other sizes or another vocabulary refuse it, another batch
// warns, a plan for the layers alone (vocab 0) or without sizes runs under any model.
TEST(Plan, CheckModelFitRefusesAnotherModelOrVocabulary) {
  const ModelShape made{.batch = 8, .seq = 64, .hidden = 64, .heads = 4, .layers = 2, .vocab = 256};
  Plan p;
  EXPECT_EQ(check_model_fit(p, made, "tiny", "--plan p.json"), "");  // hand-written: no sizes
  p.provenance = Provenance{.topology = "t", .model = "tiny", .shape = made};
  EXPECT_EQ(check_model_fit(p, made, "tiny", "--plan p.json"), "");
  ModelShape other = made;
  other.vocab = 512;
  EXPECT_EQ(error_of([&] { check_model_fit(p, other, "tiny-512", "--plan p.json"); }),
            "--plan p.json was made for model 'tiny', not this one 'tiny-512' (vocab 256 ≠ 512): "
            "make a plan for this model with `meshtp plan --out`");
  other = made;
  other.hidden = 128;
  EXPECT_EQ(model_fit(p, other).kind, ModelFit::kOther);
  other = made;
  other.batch = 4;
  EXPECT_EQ(check_model_fit(p, other, "tiny", "--plan p.json"),
            "--plan p.json was made for another batch (batch 8 ≠ 4): its layout runs, but was "
            "priced for that batch");
  other = made;
  other.vocab = 0;  // run on the layers alone (simulate --what layer)
  EXPECT_EQ(model_fit(p, other).kind, ModelFit::kSame);
  p.provenance->shape->vocab = 0;  // made for the layers alone
  other.vocab = 50257;
  EXPECT_EQ(model_fit(p, other).kind, ModelFit::kSame);
}

TEST(BuildPlan, SpelledOutLayouts) {
  const Plan p = build_plan(
      PlanSpelling{
          .dp = 2, .pp = 2, .microbatches = 4, .schedule = "interleaved:3", .strategy = "tp1d"},
      std::nullopt, 16, "the test");
  EXPECT_EQ(p.mesh, (std::array<int, 2>{4, 1}));  // no mesh: (ranks/(dp·pp), 1)
  EXPECT_EQ(p.schedule, Schedule::kInterleaved);
  EXPECT_EQ(p.virtual_stages, 3);
  EXPECT_TRUE(p.sequence_parallel);  // always for tp1d
  const Plan g = build_plan(
      PlanSpelling{.strategy = "meshslice", .stationary = "input", .gemm2d = {.slices = 2}},
      std::array<int, 2>{2, 2});
  EXPECT_EQ(g.linears[0].gemm2d.slices, 2);
  EXPECT_EQ(g.linears[3].stationary, Stationary::kInput);
}

TEST(BuildPlan, ErrorsNameTheValue) {
  EXPECT_EQ(error_of([] { build_plan(PlanSpelling{.dp = 3}, std::nullopt, 8, "the test"); }),
            "dp=3 × pp=1 does not divide the 8 ranks (the test)");
  EXPECT_EQ(error_of([] {
              build_plan(PlanSpelling{.schedule = "1f1b:2"}, {2, 1});
            }),
            "--schedule '1f1b:2': only interleaved takes virtual stages (interleaved:V)");
  EXPECT_EQ(error_of([] {
              build_plan(PlanSpelling{.gemm2d = {.slices = 2}}, {2, 1});
            }),
            "--stationary auto / --slices 2 apply to the 2D GeMM strategies, not --strategy atp");
  EXPECT_NE(error_of([] {
              build_plan(PlanSpelling{}, std::array<int, 2>{2, 2}, 8, "the test");
            }).find("= 4 ranks, but there are 8 (the test)"),
            std::string::npos);
}

}  // namespace
}  // namespace meshtp::layout
