// The one-device loop (train/single_device.hpp) on the CPU backend is `meshtp train` on one
// rank: the same init, batches, clipping, AdamW and schedule, so the same loss at every step
// and the same validation loss; and what it cannot run is refused by name.
#include "train/single_device.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "mesh/device_mesh.hpp"
#include "model/gpt.hpp"
#include "ops/cpu_backend.hpp"
#include "train/test_corpus.hpp"
#include "train/trainer.hpp"

namespace meshtp::train {
namespace {

namespace fs = std::filesystem;

class SingleDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("meshtp_single_device_{}", ::getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    test::write_corpus(dir_ / "corpus.txt");
  }
  void TearDown() override { fs::remove_all(dir_); }

  TrainConfig config() const {
    TrainConfig c;
    c.model.shape = {.batch = 4, .seq = 16, .hidden = 32, .heads = 4, .layers = 2, .vocab = 256};
    c.steps = 30;
    c.lr = 3e-3;
    c.min_lr = 3e-4;
    c.warmup = 3;
    c.grad_clip = 0.5;  // so that clipping happens (the norms here are ~1)
    c.eval_every = 10;
    c.eval_batches = 2;
    c.data = (dir_ / "corpus.txt").string();
    return c;
  }

  fs::path dir_;
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST_F(SingleDevice, CpuBackendIsMeshtpTrainOnOneRank) {
  const TrainConfig c = config();
  std::vector<StepReport> want, got;
  train(comm::Communicator::world(), c, [&](const StepReport& r) { want.push_back(r); });
  CpuBackend cpu;
  TrainHooks hooks;
  hooks.on_step = [&](const StepReport& r) { got.push_back(r); };
  const TrainSummary summary = train_on_device(cpu, c, hooks);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(summary.last_step, c.steps);
  EXPECT_LT(got.back().loss, got.front().loss - 0.5) << "the tiny model should learn";
  // fp32 on both sides, the same ops in another composition (the runtime's 1x1-mesh layers
  // and vocab-parallel head, the backend's serial ones): reassociation only.
  double worst = 0, worst_norm = 0;
  int clipped = 0;
  for (std::size_t t = 0; t < got.size(); ++t) {
    worst = std::max(worst, std::abs(got[t].loss - want[t].loss) / want[t].loss);
    worst_norm =
        std::max(worst_norm, std::abs(got[t].grad_norm - want[t].grad_norm) / want[t].grad_norm);
    EXPECT_EQ(got[t].lr, want[t].lr) << "step " << t + 1;
    EXPECT_EQ(got[t].validation_loss.has_value(), want[t].validation_loss.has_value());
    if (got[t].validation_loss && want[t].validation_loss) {
      EXPECT_NEAR(*got[t].validation_loss, *want[t].validation_loss,
                  1e-4 * *want[t].validation_loss)
          << "step " << t + 1;
    }
    clipped += want[t].grad_norm > c.grad_clip;
  }
  // Measured: 6e-9 over 50 steps of `tiny` (`meshtp train -np 1` against `meshtp gpu train
  // --device cpu`): the backend runs the runtime's own kernels.
  EXPECT_LE(worst, 1e-6) << "largest relative loss difference over " << got.size() << " steps";
  EXPECT_LE(worst_norm, 1e-4) << "largest relative gradient-norm difference";
  EXPECT_GT(clipped, 0) << "no step was clipped: the test does not check clipping";
  EXPECT_EQ(summary.parameters, 2 * (12 * 32 * 32 + 13 * 32) + 256 * 32 + 16 * 32 + 2 * 32);
}

TEST_F(SingleDevice, Gpt2InitIsTheRuntimes) {
  // model::Gpt::init on one rank holds every tensor whole: gpt2_init must give each one
  // exactly (the first loss above depends on all of them; this names the one that differs).
  const layout::ModelShape shape{
      .batch = 2, .seq = 8, .hidden = 16, .heads = 2, .layers = 3, .vocab = 256};
  const std::uint64_t seed = 7;
  const device::GptWeights w = gpt2_init(shape, seed);
  std::map<std::string, const std::vector<float>*> mine{
      {"wte", &w.wte}, {"wpe", &w.wpe}, {"lnf.weight", &w.lnf_w}, {"lnf.bias", &w.lnf_b}};
  for (std::size_t l = 0; l < w.blocks.size(); ++l) {
    const auto f = device::fields(w.blocks[l]);
    for (int i = 0; i < device::kBlockParams; ++i) {
      mine[fmt::format("layers.{}.{}", l, device::kBlockParamNames[i])] = f[i];
    }
  }
  const mesh::DeviceMesh one(comm::Communicator::world(), {1, 1});
  model::GptConfig config;
  config.shape = shape;
  model::Gpt gpt(one, config);
  gpt.init(seed);
  ASSERT_EQ(static_cast<std::size_t>(gpt.num_params()), mine.size());
  for (int p = 0; p < gpt.num_params(); ++p) {
    const auto it = mine.find(gpt.name(p));
    ASSERT_NE(it, mine.end()) << gpt.name(p) << " is not among gpt2_init's tensors";
    const std::span<const float> want = device::floats(gpt.value(p));
    EXPECT_TRUE(std::equal(want.begin(), want.end(), it->second->begin(), it->second->end()))
        << gpt.name(p);
  }
}

TEST_F(SingleDevice, RefusesWhatNeedsAMeshOrACheckpointByName) {
  CpuBackend cpu;
  const auto run = [&](TrainConfig c) { return error_of([&] { train_on_device(cpu, c, {}); }); };
  TrainConfig c = config();
  c.model.layout.mesh = {2, 1};
  EXPECT_NE(run(c).find("one device trains without a mesh, but the layout is dp=1 tp=2x1"),
            std::string::npos)
      << run(c);
  c = config();
  c.model.layout.dp = 2;
  EXPECT_NE(run(c).find("dp=2"), std::string::npos) << run(c);
  c = config();
  c.checkpoint_dir = (dir_ / "ckpt").string();
  EXPECT_NE(run(c).find("checkpoints are not implemented on one device"), std::string::npos)
      << run(c);
  c = config();
  c.trace_path = (dir_ / "trace.json").string();
  EXPECT_NE(run(c).find("--trace"), std::string::npos) << run(c);
  c = config();
  c.lr = -1;
  EXPECT_NE(run(c).find("--lr=-1 must be a finite number > 0"), std::string::npos) << run(c);
  c = config();
  c.model.shape.vocab = 300;
  EXPECT_NE(run(c).find("vocab=300"), std::string::npos) << run(c);
  c = config();
  c.data = (dir_ / "missing.txt").string();
  EXPECT_NE(run(c).find("missing.txt"), std::string::npos) << run(c);
  c = config();
  c.precision = Precision::kBf16;  // the CPU backend holds fp32 only
  EXPECT_NE(run(c).find("bf16"), std::string::npos) << run(c);
}

TEST_F(SingleDevice, MetricsAndStopAfterAsTrain) {
  TrainConfig c = config();
  c.stop_after = 4;
  c.metrics_path = (dir_ / "metrics.jsonl").string();
  CpuBackend cpu;
  const TrainSummary s = train_on_device(cpu, c, {});
  EXPECT_EQ(s.last_step, 4);
  EXPECT_TRUE(s.validation_loss.has_value()) << "the last step of the run validates";
  std::ifstream in(c.metrics_path);
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    ++lines;
    EXPECT_NE(line.find(fmt::format("\"step\":{}", lines)), std::string::npos) << line;
  }
  EXPECT_EQ(lines, 4);
}

TEST_F(SingleDevice, NonFiniteStepsStopOrAreSkippedAsInTrain) {
  // An absurd learning rate with no clipping: the first update wrecks the weights, the next
  // loss is not finite. Both loops stop at the same step, or skip the same steps.
  TrainConfig c = config();
  c.steps = 5;
  c.warmup = 0;
  c.lr = 1e30;
  c.grad_clip = 0;
  CpuBackend cpu;
  const std::string want = error_of([&] { train(comm::Communicator::world(), c, TrainHooks{}); });
  const std::string got = error_of([&] { train_on_device(cpu, c, {}); });
  ASSERT_NE(want, "no error");
  EXPECT_EQ(got.substr(0, got.find(';')), want.substr(0, want.find(';'))) << got << "\n" << want;
  c.skip_nonfinite = 10;
  const TrainSummary train_summary = train(comm::Communicator::world(), c, TrainHooks{});
  const TrainSummary device_summary = train_on_device(cpu, c, {});
  EXPECT_GT(device_summary.skipped_steps, 0);
  EXPECT_EQ(device_summary.skipped_steps, train_summary.skipped_steps);
  EXPECT_EQ(device_summary.last_step, c.steps);
}

}  // namespace
}  // namespace meshtp::train
