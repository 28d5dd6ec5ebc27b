// Pipeline stages train exactly like one device: on every (dp, pp, d1, d2) layout of the
// world, with each schedule (GPipe, 1F1B, interleaved), ZeRO and tensor parallelism inside
// the stages, the loss of every step equals the single-rank run's within 1e-4 relative, and
// after a few steps every parameter of every stage equals the single-rank model's.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <span>

#include "inverted_device.hpp"
#include "train/pipeline_model.hpp"
#include "train/trainer.hpp"

namespace meshtp::train {
namespace {

namespace fs = std::filesystem;
using layout::Schedule;

struct Layout {
  int dp, pp, d1, d2, microbatches;
  Schedule schedule;
  int v = 1, zero = 0;
  layout::Strategy strategy = layout::Strategy::kAtp;
  bool sp = false;
};

std::string name_of(const Layout& l) {
  return fmt::format("dp={} pp={} tp={}x{} m={} {}{} zero={} {}{}", l.dp, l.pp, l.d1, l.d2,
                     l.microbatches, layout::name(l.schedule),
                     l.v > 1 ? fmt::format(":{}", l.v) : "", l.zero, layout::name(l.strategy),
                     l.sp ? " sp" : "");
}

// Layouts of n ranks: pp = 2 and 4, with tensor and data parallelism, every schedule.
std::vector<Layout> layouts(int n) {
  using S = Schedule;
  const auto atp = layout::Strategy::kAtp;
  switch (n) {
    case 1: return {{1, 1, 1, 1, 2, S::kGpipe}, {1, 1, 1, 1, 2, S::kInterleaved, 2}};
    case 2:
      return {{1, 2, 1, 1, 2, S::kGpipe}, {1, 2, 1, 1, 4, S::k1F1B},
              {1, 2, 1, 1, 2, S::kInterleaved, 2}, {2, 1, 1, 1, 2, S::k1F1B, 1, 3}};
    case 4:
      return {{1, 4, 1, 1, 4, S::k1F1B},
              {1, 2, 2, 1, 2, S::kGpipe},
              {2, 2, 1, 1, 2, S::k1F1B, 1, 3},
              {1, 4, 1, 1, 4, S::kInterleaved, 2},
              {1, 2, 2, 1, 2, S::kInterleaved, 2, 0, atp, true}};
    default:
      return {{2, 2, 2, 1, 2, S::k1F1B, 1, 3},
              {2, 2, 2, 1, 2, S::kInterleaved, 2, 2},
              {1, 4, 2, 1, 4, S::kInterleaved, 2},
              {2, 4, 1, 1, 4, S::kGpipe, 1, 1},
              {1, 2, 2, 2, 2, S::k1F1B, 1, 0, layout::Strategy::kMeshSlice}};
  }
}

class PipelineEquivalence : public ::testing::Test {
 protected:
  void SetUp() override {
    // Rank 0's pid in the name: suites running at once (other checkouts) never share it.
    int pid = static_cast<int>(::getpid());
    world_.broadcast(std::span<int>(&pid, 1), 0);
    dir_ = fs::temp_directory_path() / fmt::format("meshtp_pipeline_eq_{}_{}", world_.size(), pid);
    if (world_.rank() == 0) {
      fs::remove_all(dir_);
      fs::create_directories(dir_);
      std::ofstream text(dir_ / "corpus.txt");
      for (int i = 0; i < 300; ++i) {
        text << "pipelines " << i * 7919 % 1000 << " carry the stream, stage by stage "
             << (i % 3 ? "onwards\n" : "and back.\n");
      }
    }
    world_.barrier();
  }
  void TearDown() override {
    world_.barrier();
    if (world_.rank() == 0) fs::remove_all(dir_);
  }

  // 8 layers: 2 per stage at pp = 4, and at pp = 2 with 2 virtual stages.
  TrainConfig config(const Layout& l) const {
    TrainConfig c;
    c.model.shape = {.batch = 8, .seq = 8, .hidden = 16, .heads = 2, .layers = 8, .vocab = 256};
    c.model.layout = {.dp = l.dp, .pp = l.pp, .microbatches = l.microbatches,
                      .schedule = l.schedule, .virtual_stages = l.v, .zero = l.zero,
                      .mesh = {l.d1, l.d2}, .strategy = l.strategy, .sequence_parallel = l.sp};
    c.steps = 4;
    c.lr = 3e-3;
    c.warmup = 1;
    c.eval_every = 0;
    c.eval_batches = 1;
    c.data = (dir_ / "corpus.txt").string();
    return c;
  }

  comm::Communicator world_ = comm::Communicator::world();
  fs::path dir_;
};

std::vector<double> losses(const comm::Communicator& comm, const TrainConfig& c,
                           std::optional<double>* validation = nullptr) {
  std::vector<double> out;
  const TrainSummary s = train(comm, c, [&](const StepReport& r) { out.push_back(r.loss); });
  if (validation) *validation = s.validation_loss;
  return out;
}

TEST_F(PipelineEquivalence, EveryScheduleGivesTheSerialLossCurve) {
  const comm::Communicator solo = world_.split(world_.rank(), 0);
  std::optional<double> serial_validation;
  const std::vector<double> serial = losses(solo, config({1, 1, 1, 1, 1, Schedule::kGpipe}),
                                            &serial_validation);
  for (const Layout& l : layouts(world_.size())) {
    std::optional<double> validation;
    const std::vector<double> got = losses(world_, config(l), &validation);
    ASSERT_EQ(got.size(), serial.size()) << name_of(l);
    for (std::size_t t = 0; t < got.size(); ++t) {
      EXPECT_NEAR(got[t], serial[t], 1e-4 * serial[t]) << name_of(l) << ", step " << t + 1;
    }
    ASSERT_TRUE(validation && serial_validation);
    EXPECT_NEAR(*validation, *serial_validation, 1e-4 * *serial_validation) << name_of(l);
  }
}

// The training loop on the seam (docs/seam.md): every layout above, with its model,
// gradients, ZeRO buckets, optimizer state and pipeline messages in the inverted stand-in's
// memory (tests/inverted_device.hpp: every byte complemented) over host-staged groups, trains
// the host run's loss curve — what lets the same loop run on a GPU.
TEST_F(PipelineEquivalence, EveryLayoutTrainsTheSameOnTheSeam) {
  testing::InvertedBackend stand_in;
  const comm::Communicator staged = comm::Communicator::host_staged(world_, stand_in.memory);
  for (const Layout& l : layouts(world_.size())) {
    const std::vector<double> host = losses(world_, config(l));
    TrainConfig c = config(l);
    c.model.backend = &stand_in;
    const std::vector<double> device = losses(staged, c);
    ASSERT_EQ(device.size(), host.size()) << name_of(l);
    for (std::size_t t = 0; t < host.size(); ++t) {
      EXPECT_NEAR(device[t], host[t], 1e-5 * host[t]) << name_of(l) << ", step " << t + 1;
    }
  }
  EXPECT_GT(stand_in.gemm_calls, 0);
}

// A checkpoint written on one backend resumes on the other: the host run's first two steps,
// checkpointed, continued on the stand-in (and the stand-in's, continued on the host), give the
// uninterrupted run's last two losses (with ZeRO-1 over two replicas, tensor and pipeline
// parallelism, as the world allows).
TEST_F(PipelineEquivalence, ACheckpointResumesOnTheOtherBackend) {
  testing::InvertedBackend stand_in;
  const comm::Communicator staged = comm::Communicator::host_staged(world_, stand_in.memory);
  const int n = world_.size();
  const int d1 = n >= 4 ? 2 : 1;  // dp 2 × pp n/(2·d1) × tp d1 x 1
  const Layout l = n == 1 ? Layout{1, 1, 1, 1, 2, Schedule::kGpipe}
                          : Layout{2, n / (2 * d1), d1, 1, 2, Schedule::k1F1B, 1, 1};
  const std::vector<double> whole = losses(world_, config(l));
  ASSERT_EQ(whole.size(), 4u);
  for (const bool host_first : {true, false}) {
    TrainConfig c = config(l);
    c.checkpoint_dir = (dir_ / fmt::format("ckpt_{}", host_first ? "host" : "device")).string();
    c.stop_after = 2;
    if (!host_first) c.model.backend = &stand_in;
    const std::vector<double> first = losses(host_first ? world_ : staged, c);
    c.stop_after = 0;
    c.resume = true;
    c.model.backend = host_first ? &stand_in : nullptr;
    const std::vector<double> rest = losses(host_first ? staged : world_, c);
    ASSERT_EQ(first.size(), 2u);
    ASSERT_EQ(rest.size(), 2u);
    const std::string what = host_first ? "host, then the stand-in" : "the stand-in, then host";
    for (std::size_t t = 0; t < 2; ++t) {
      EXPECT_NEAR(first[t], whole[t], 1e-5 * whole[t]) << what << ", step " << t + 1;
      EXPECT_NEAR(rest[t], whole[t + 2], 1e-5 * whole[t + 2]) << what << ", step " << t + 3;
    }
  }
}

// The parameters themselves, after three updates, stage by stage against the serial model.
TEST_F(PipelineEquivalence, EveryStageEndsWithTheSerialParameters) {
  const comm::Communicator solo = world_.split(world_.rank(), 0);
  const auto run = [&](const comm::Communicator& comm, const TrainConfig& c) {
    auto m = std::make_unique<PipelineModel>(comm, c.model, c.model.layout.zero, c.adamw);
    m->init(c.seed);
    const std::int64_t rows = m->replica_rows(), n = rows * c.model.shape.seq;
    std::vector<std::int32_t> tokens(static_cast<std::size_t>(n)), targets(tokens.size());
    for (int step = 0; step < 3; ++step) {
      for (std::int64_t t = 0; t < n; ++t) {  // global token g = dp_rank·n + t, some pattern
        const std::int64_t g = m->dp_rank() * n + t;
        tokens[static_cast<std::size_t>(t)] = static_cast<std::int32_t>((g * 37 + step) % 256);
        targets[static_cast<std::size_t>(t)] = static_cast<std::int32_t>((g * 11 + 3) % 256);
      }
      m->forward_backward(tokens, targets);
      m->clip(m->grad_norm(comm), 1.0);
      m->step(1e-2f);
    }
    return m;
  };
  const auto serial = run(solo, config({1, 1, 1, 1, 1, Schedule::kGpipe}));
  std::map<std::string, Tensor> expected;
  model::Gpt& s = serial->chunk(0);
  for (int p = 0; p < s.num_params(); ++p) expected[s.name(p)] = s.gather_value(p);
  for (const Layout& l : layouts(world_.size())) {
    const auto got = run(world_, config(l));
    int checked = 0;
    for (int k = 0; k < got->chunks(); ++k) {
      model::Gpt& g = got->chunk(k);
      got->data_parallel(k).optimizer_to_save();  // ZeRO-3: every block's values whole
      for (int p = 0; p < g.num_params(); ++p) {
        const Tensor value = g.gather_value(p);
        const Tensor& want = expected.at(g.name(p));
        ASSERT_EQ(value.numel(), want.numel()) << g.name(p);
        double worst = 0.0;
        for (std::int64_t i = 0; i < want.numel(); ++i) {
          worst = std::max(worst, static_cast<double>(std::abs(value[i] - want[i])));
        }
        // Three AdamW steps of lr 1e-2 move an element by up to 3e-2; a wrong stage, a
        // missing tie or a lost microbatch moves it by ~1e-2. Within 2e-4: the same update,
        // up to fp32 reassociation (which AdamW's m/√v amplifies where gradients are ~0).
        EXPECT_LE(worst, 2e-4) << name_of(l) << ": " << g.name(p) << " on stage "
                               << g.config().stage;
        ++checked;
      }
    }
    // Every parameter lives on some stage: the counts over the pipeline add up.
    EXPECT_GT(checked, 0) << name_of(l);
  }
}

// Checkpoints stay global and layout-free: a run saved on pipeline stages resumes on tensor
// and data parallelism alone and the reverse, continuing the uninterrupted curve.
TEST_F(PipelineEquivalence, CheckpointsMoveBetweenPipelineAndOtherLayouts) {
  const int n = world_.size();
  const Layout pipe = layouts(n).at(n == 1 ? 1 : 0);
  const int tp = std::min(n, 2);  // the test model has 2 heads
  const Layout flat{n / tp, 1, tp, 1, 1, Schedule::kGpipe};
  int case_number = 0;
  for (const auto& [from, to] : {std::pair{pipe, flat}, std::pair{flat, pipe}}) {
    TrainConfig whole = config(from);
    whole.steps = 6;
    const std::vector<double> expected = losses(world_, whole);
    TrainConfig first = whole;
    first.checkpoint_dir = (dir_ / fmt::format("ckpt{}", case_number++)).string();
    first.stop_after = 3;
    ASSERT_EQ(losses(world_, first).size(), 3u);
    TrainConfig rest = config(to);
    rest.steps = 6;
    rest.checkpoint_dir = first.checkpoint_dir;
    rest.resume = true;
    const std::vector<double> tail = losses(world_, rest);
    ASSERT_EQ(tail.size(), 3u) << name_of(from) << " → " << name_of(to);
    for (std::size_t t = 0; t < tail.size(); ++t) {
      EXPECT_NEAR(tail[t], expected[t + 3], 1e-4 * expected[t + 3])
          << "saved on " << name_of(from) << ", resumed on " << name_of(to) << ", step " << t + 4;
    }
  }
}

// ZeRO ≥ 2 shards the gradient accumulators (train/zero.hpp): after a step of 2 microbatches
// no block's gradient is held whole, and the gradient state a rank keeps is 1/dp of its
// parameters plus the last bucket (embeddings, final LayerNorm: whole, and its buffer) —
// against twice every parameter (accumulators and buckets) with ZeRO 0 and 1.
TEST_F(PipelineEquivalence, ZeroTwoAndThreeKeepOneDpthOfTheGradients) {
  const int dp = world_.size();
  if (dp == 1) GTEST_SKIP() << "ZeRO needs data-parallel replicas";
  for (const int zero : {1, 2, 3}) {
    const TrainConfig c = config({dp, 1, 1, 1, dp <= 4 ? 2 : 1, Schedule::k1F1B, 1, zero});
    PipelineModel m(world_, c.model, zero, c.adamw);
    m.init(c.seed);
    const std::size_t n = static_cast<std::size_t>(m.replica_rows() * c.model.shape.seq);
    std::vector<std::int32_t> tokens(n, 7), targets(n, 9);
    m.forward_backward(tokens, targets);
    model::Gpt& g = m.chunk(0);
    std::int64_t params = 0, blocks_whole = 0, last = 0;
    for (int p = 0; p < g.num_params(); ++p) {
      const std::int64_t size = numel(g.global_shape(p));
      params += size;
      if (g.grad_layer(p) >= 0)
        blocks_whole += g.grad(p).count();
      else
        last += size;
    }
    const std::int64_t held = m.data_parallel(0).gradient_floats();
    if (zero == 1) {
      EXPECT_EQ(blocks_whole, params - last);
      EXPECT_GE(held, 2 * params);
    } else {
      EXPECT_EQ(blocks_whole, 0) << "zero " << zero;
      // Parts of ⌈S_b/dp⌉ per bucket: at most dp − 1 floats of padding each.
      EXPECT_LE(held, params / dp + 2 * last + dp * (c.model.shape.layers + 1)) << "zero " << zero;
      EXPECT_GE(held, params / dp + 2 * last) << "zero " << zero;
    }
  }
}

}  // namespace
}  // namespace meshtp::train
