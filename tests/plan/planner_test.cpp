// Enumeration, labelling, ranking and the plan's JSON.
#include <gtest/gtest.h>

#include <set>
#include <sstream>

#include "core/error.hpp"
#include "plan/planner.hpp"
#include "plan/presets.hpp"

namespace meshtp::plan {
namespace {

PlanRequest request(const std::string& topology, const std::string& model, int devices) {
  PlanRequest r;
  r.topology = load_topology(topology);
  r.model = load_model(model);
  r.devices = devices;
  return r;
}

const Candidate* find(const PlanResult& p, Strategy s, int d1, int d2, int chunks = 1) {
  for (const Candidate& c : p.candidates) {
    if (c.strategy == s && c.mesh[0] == d1 && c.mesh[1] == d2 && c.chunks == chunks) return &c;
  }
  return nullptr;
}

TEST(Planner, EnumeratesEveryTwoDimensionalMesh) {
  using M = std::vector<std::array<int, 2>>;
  EXPECT_EQ(enumerate_meshes(8), (M{{8, 1}, {4, 2}, {2, 4}, {1, 8}}));
  EXPECT_EQ(enumerate_meshes(12).size(), 6u);
  EXPECT_EQ(enumerate_meshes(256).size(), 9u);
  EXPECT_EQ(enumerate_meshes(1), (M{{1, 1}}));
  EXPECT_EQ(enumerate_meshes(7), (M{{7, 1}, {1, 7}}));
}

TEST(Planner, EveryCandidateOnceAndMegatronLabelled) {
  const PlanResult p = plan(request("nvswitch-8xa100", "atp-m4", 8));
  // 4 meshes × 3 chunk counts (atp/megatron) + tp1d on 8x1 + 4 meshes × 5 2D algorithms.
  EXPECT_EQ(p.candidates.size(), 4u * 3 + 1 + 4 * 5);
  std::set<std::tuple<std::string, int, int, int>> seen;
  for (const Candidate& c : p.candidates) {
    EXPECT_TRUE(
        seen.insert({std::string(name(c.strategy)), c.mesh[0], c.mesh[1], c.chunks}).second);
    const bool one_dim = c.mesh[0] == 1 || c.mesh[1] == 1;
    if (c.strategy == Strategy::kAtp) {
      EXPECT_FALSE(one_dim);
    }
    if (c.strategy == Strategy::kMegatron) {
      EXPECT_TRUE(one_dim);
    }
    EXPECT_NO_THROW(c.validate());
  }
  ASSERT_NE(find(p, Strategy::kMegatron, 8, 1), nullptr);
  ASSERT_NE(find(p, Strategy::kAtp, 4, 2, 2), nullptr);
  // Cannon only runs on square meshes: none of these.
  const Candidate* cannon = find(p, Strategy::kCannon, 4, 2);
  ASSERT_NE(cannon, nullptr);
  EXPECT_FALSE(cannon->valid);
  EXPECT_NE(cannon->reason.find("Cannon's algorithm needs a square mesh, got 4x2"), std::string::npos)
      << cannon->reason;
}

TEST(Planner, RankedFeasibleFirstThenByStepTime) {
  const PlanResult p = plan(request("ib-2x8xa100", "atp-m3", 16));
  ASSERT_TRUE(p.best.has_value());
  EXPECT_EQ(*p.best, 0u);
  int klass = 0;
  double last = 0;
  for (const Candidate& c : p.candidates) {
    const int k = c.feasible ? 0 : c.valid ? 1 : 2;
    EXPECT_GE(k, klass);
    if (k != klass) last = 0;
    klass = k;
    if (c.valid) {
      EXPECT_GE(c.t_step_s, last);
      last = c.t_step_s;
      EXPECT_GE(c.t_step_s + 1e-12, std::max(c.t_compute_s, 0.0));
    }
  }
}

TEST(Planner, ModelThatDoesNotShardMarksCandidatesInvalid) {
  PlanRequest r = request("nvlink-network-6", "atp-m1", 6);
  r.model.hidden = 1000;
  r.model.heads = 8;
  r.model.batch = 6;
  const PlanResult p = plan(r);
  const Candidate* c = find(p, Strategy::kAtp, 2, 3);
  ASSERT_NE(c, nullptr);
  EXPECT_FALSE(c->valid);
  EXPECT_FALSE(c->feasible);
  EXPECT_EQ(c->reason, "hidden=1000 is not divisible by d2=3 (mesh 2x3)");
  const Candidate* ms = find(p, Strategy::kMeshSlice, 3, 2);
  ASSERT_NE(ms, nullptr);
  EXPECT_EQ(ms->reason, "hidden=1000 is not divisible by mesh dim 0 (size 3)");
  // Every mesh of 6 devices has a dim of size 3 or 6, so nothing is valid: still a plan
  // (every candidate listed with its reason), just no best.
  EXPECT_EQ(p.candidates.size(), 4u * 3 + 1 + 4 * 5);
  for (const Candidate& x : p.candidates) EXPECT_FALSE(x.valid) << x;
  EXPECT_FALSE(p.best.has_value());
}

TEST(Planner, InfeasibleCandidatesAreKeptWithTheirReason) {
  PlanRequest r = request("nvswitch-8xa100", "atp-m4", 8);
  r.topology.memory_gib = 4;
  const PlanResult p = plan(r);
  EXPECT_EQ(p.candidates.size(), 33u);
  EXPECT_FALSE(p.best.has_value());
  const Candidate* c = find(p, Strategy::kMegatron, 8, 1);
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(c->valid);
  EXPECT_FALSE(c->feasible);
  EXPECT_NE(c->reason.find("GiB per rank but the device has 4 GiB"), std::string::npos)
      << c->reason;
  EXPECT_TRUE(to_json(p)["best"].is_null());
}

TEST(Planner, PlansPrintThemselves) {
  PlanRequest r = request("nvswitch-8xa100", "atp-m1", 8);
  r.strategies = {Strategy::kAtp};
  r.chunks = {1};
  std::ostringstream req, res;
  req << r;
  res << plan(r);
  EXPECT_NE(req.str().find("model atp-m1"), std::string::npos) << req.str();
  EXPECT_NE(req.str().find("strategies atp, chunks 1"), std::string::npos) << req.str();
  EXPECT_NE(res.str().find("megatron 8x1 chunks=1: step"), std::string::npos) << res.str();
  EXPECT_NE(res.str().find("\nbest: "), std::string::npos) << res.str();
}

TEST(Planner, DeviceCountMustMatchTheTopology) {
  try {
    plan(request("pcie-8xa100", "atp-m1", 16));
    FAIL() << "accepted 16 devices on an 8-device topology";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "topology 'pcie-8xa100' has 8 devices but --devices is 16");
  }
}

TEST(Planner, PcieChoosesAtp2x4OverMegatron) {
  // ATP §5.3: on IC1 the calibrated model prefers DeviceMesh(2,4) to (8,1).
  PlanRequest r = request("pcie-8xa100", "atp-m4", 8);
  r.strategies = {Strategy::kAtp};
  r.chunks = {1};
  const PlanResult p = plan(r);
  const Candidate* a = find(p, Strategy::kAtp, 2, 4);
  const Candidate* m = find(p, Strategy::kMegatron, 8, 1);
  ASSERT_TRUE(a && m);
  EXPECT_LT(a->t_comm_s, m->t_comm_s);
  EXPECT_LT(a->t_step_s, m->t_step_s);
  ASSERT_TRUE(m->allreduce_gbps[0].has_value());
  EXPECT_NEAR(*m->allreduce_gbps[0], 0.97, 1e-9);
  EXPECT_FALSE(m->allreduce_gbps[1].has_value());
  EXPECT_EQ(m->bandwidth_source[0], BandwidthSource::kCalibrated);
}

TEST(Planner, JsonHasTheDocumentedFields) {
  PlanRequest r = request("nvlink-hdr-4x4", "atp-m2", 16);
  r.strategies = parse_strategies("atp,meshslice");
  const nlohmann::json j = to_json(plan(r));
  ASSERT_TRUE(j["candidates"].is_array());
  ASSERT_TRUE(j["best"].is_object());
  for (const auto& c : j["candidates"]) {
    for (const char* key : {"strategy", "mesh", "t_comm_s", "t_compute_s", "t_step_s",
                            "memory_gib", "feasible", "link_gbps", "allreduce_gbps"}) {
      EXPECT_TRUE(c.contains(key)) << key << " in " << c.dump();
    }
    const std::string s = c["strategy"];
    EXPECT_TRUE(s == "atp" || s == "megatron" || s == "meshslice") << s;
    if (c["mesh"][1] == 1) {
      EXPECT_TRUE(c["link_gbps"][1].is_null());
      EXPECT_TRUE(c["allreduce_gbps"][1].is_null());
    }
  }
  // Fig. 7a mesh (8,2): B1' = 12.5, B2' = 200 in the record too.
  for (const auto& c : j["candidates"]) {
    if (c["strategy"] == "atp" && c["mesh"] == nlohmann::json{8, 2}) {
      EXPECT_DOUBLE_EQ(c["link_gbps"][0].get<double>(), 12.5);
      EXPECT_DOUBLE_EQ(c["link_gbps"][1].get<double>(), 200.0);
    }
  }
}

TEST(Planner, ExplainBreaksACandidateDown) {
  const PlanRequest r = request("tpuv4-torus-16x16", "gpt3-175b", 256);
  const Candidate ms = evaluate(r, Strategy::kMeshSlice, 16, 16, 1);
  const Explanation e = explain(r, ms);
  ASSERT_EQ(e.fc.size(), 4u);
  // The layer: attention core + FC layers + the elementwise ops (LayerNorm, GeLU, …).
  double layer = e.attention_s + e.elementwise.layer_s(r.model.recompute);
  for (const FcTuning& t : e.fc) layer += t.total_s;
  // … + the LayerNorm statistics and partial-gradient all-reduces (elementwise_calls).
  EXPECT_GT(e.elementwise_comm_s, 0);
  EXPECT_NEAR(layer * r.model.layers + e.elementwise_comm_s, ms.t_step_s, 1e-9 * ms.t_step_s);
  // 96 heads have no ATP mesh on 256 devices (the runtime's attention core holds whole heads
  // on every rank); on 32 they do.
  EXPECT_FALSE(evaluate(r, Strategy::kAtp, 16, 16, 2).valid);
  const PlanRequest r32 = request("nvlink-network-32", "gpt3-175b", 32);
  const Candidate atp = evaluate(r32, Strategy::kAtp, 8, 4, 2);
  const Explanation a = explain(r32, atp);
  ASSERT_TRUE(a.atp.has_value());
  EXPECT_EQ(a.atp->ops.size(), 14u);  // 7 operators (2 LayerNorms) × (forward, backward)
  EXPECT_NEAR(a.atp->t_step_s, atp.t_step_s, 0);
}

TEST(Planner, UnknownStrategyListsTheValidOnes) {
  try {
    parse_strategies("atp,fsdp");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown strategy 'fsdp' (valid: atp, megatron, tp1d, "
                                         "meshslice, collective, wang, summa, cannon"),
              std::string::npos)
        << e.what();
  }
}

// --fc-stationary: every 2D linear keeps the operand asked for, weight included (MeshSlice's
// default dataflow, priced only); unset, the autotuner keeps X or Y. Keeping the weight of
// GPT-3's layers moves the far larger activations: slower on every mesh.
TEST(Planner, StationaryOperandIsKeptInEveryLinear) {
  PlanRequest r{.topology = load_topology("tpuv4-torus-16x16"),
                .model = load_model("gpt3-175b"),
                .devices = 256,
                .strategies = {Strategy::kMeshSlice}};
  r.model.batch = 32;
  const PlanResult autotuned = plan(r);
  r.stationary = Stationary::kWeight;
  const PlanResult weight = plan(r);
  ASSERT_EQ(autotuned.candidates.size(), weight.candidates.size());
  int compared = 0;
  for (std::size_t i = 0; i < weight.candidates.size(); ++i) {
    const Candidate& w = weight.candidates[i];
    if (!w.valid) continue;
    for (const FcChoice& f : w.fc) EXPECT_EQ(f.stationary, Stationary::kWeight) << w;
    for (const Candidate& a : autotuned.candidates) {
      if (!a.valid || a.mesh != w.mesh) continue;
      for (const FcChoice& f : a.fc) EXPECT_NE(f.stationary, Stationary::kWeight) << a;
      EXPECT_GT(w.t_step_s, a.t_step_s) << w;
      ++compared;
    }
  }
  EXPECT_GE(compared, 3);
}

}  // namespace
}  // namespace meshtp::plan
