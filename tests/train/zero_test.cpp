// ZeRO (train/zero.hpp) through its own API, without the trainer: a GPT on a one-rank TP mesh
// per replica, the world as the data-parallel group, and the per-step protocol zero.hpp
// documents (backward → start per block → backward_done → start_last → finish → grad_norm →
// clip → step). Stages 1–3 must train as stage 0 does and as one rank holding the whole batch
// does (up to fp32 reassociation), while each replica keeps only its part of the moments
// (≥ 1), the gradients (≥ 2) and the blocks' parameters (3); a stage outside 0–3, or sharding
// without replicas, is refused.
#include "train/zero.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "array_copy.hpp"
#include "core/error.hpp"
#include "error_of.hpp"
#include "mesh/device_mesh.hpp"
#include "model/gpt.hpp"
#include "tensor/memory.hpp"

namespace meshtp::train {
namespace {

using meshtp::test_support::error_of;

constexpr std::int64_t kBatch = 8;  // global rows: dp·microbatches = 1·1, 2·2 and 4·2 divide it
constexpr int kMicrobatches = 2;    // stage 2 accumulates a second microbatch into its parts
constexpr int kSteps = 3;
constexpr float kLr = 1e-2f;
constexpr double kMaxNorm = 0.25;  // below the norms (0.45 at step 1): clip() scales the parts
constexpr std::uint64_t kSeed = 17;

// hidden 5 and seq 7 make every bucket an odd number of floats, so ⌈S_b/dp⌉ pads on 2 and on 4
// replicas: the last part is shorter than the others (zero.hpp's worked example).
model::GptConfig config(std::int64_t rows) {
  return {.shape = {.batch = rows, .seq = 7, .hidden = 5, .heads = 1, .layers = 3, .vocab = 256}};
}

// One data-parallel replica: its model on a TP mesh of its own rank alone, and the ZeRO stage
// over `dp`. The members are built in PipelineModel's order (DataParallel before init).
struct Replica {
  Replica(const comm::Communicator& dp, int zero, std::int64_t rows)
      : solo(dp.split(dp.rank(), 0, "zero-test-tp")),
        tp(solo, {1, 1}),
        gpt(tp, config(rows)),
        data(gpt, dp, zero, AdamWConfig{}) {
    gpt.init(kSeed);
    data.parameters_written();
  }

  comm::Communicator solo;
  mesh::DeviceMesh tp;
  model::Gpt gpt;
  DataParallel data;  // after gpt: stage 3's before-layer hook points into it
};

// The token at global position g (row-major over the global batch) in step `step`.
std::int32_t token(std::int64_t g, int step) {
  return static_cast<std::int32_t>((g * 37 + step * 5) % 256);
}
std::int32_t target(std::int64_t g, int step) {
  return static_cast<std::int32_t>((g * 11 + step + 3) % 256);
}

// One training step of replica dp.rank() over its kBatch/dp rows in `microbatches` pieces, as
// zero.hpp's "per step" says. Returns the global gradient norm (before clipping).
double train_step(Replica& r, const comm::Communicator& dp, int microbatches, int step) {
  const std::int64_t rows = kBatch / dp.size() / microbatches;
  const std::int64_t n = rows * config(rows).shape.seq;
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(n)), targets(tokens.size());
  r.gpt.zero_grads();
  for (int i = 0; i < microbatches; ++i) {
    const std::int64_t first = (static_cast<std::int64_t>(dp.rank()) * microbatches + i) * n;
    for (std::int64_t t = 0; t < n; ++t) {
      tokens[static_cast<std::size_t>(t)] = token(first + t, step);
      targets[static_cast<std::size_t>(t)] = target(first + t, step);
    }
    r.gpt.forward(tokens, targets);
    // Stages 0–1 reduce the accumulated gradients once; stage ≥ 2 every microbatch's.
    const bool reduce = i + 1 == microbatches || r.data.reduces_every_microbatch();
    // Each microbatch's loss is its mean: 1/(dp·m) makes the sum the global batch's mean.
    r.gpt.backward(1.0f / static_cast<float>(dp.size() * microbatches),
                   reduce ? std::function<void(int)>([&r](int layer) { r.data.start(layer); })
                          : std::function<void(int)>());
    r.data.backward_done();
  }
  r.data.start_last();
  r.data.finish();
  const double norm = r.data.grad_norm(dp);
  r.data.clip(norm, kMaxNorm);
  r.data.step(kLr);
  return norm;
}

// What a run ends with: every parameter whole, and the whole AdamW moments by name.
struct Result {
  std::vector<double> norms;
  std::map<std::string, Tensor> values, m, v;
  std::int64_t adam_steps = 0;
};

Result run(const comm::Communicator& dp, int zero, int microbatches) {
  Replica r(dp, zero, kBatch / dp.size() / microbatches);
  Result out;
  for (int step = 0; step < kSteps; ++step) {
    out.norms.push_back(train_step(r, dp, microbatches, step));
  }
  // The checkpoint view: stage ≥ 1 gathers the moments' parts (and stage 3 the blocks'
  // parameters) into whole tensors, collectively over dp.
  AdamW& whole = r.data.optimizer_to_save();
  for (int p = 0; p < r.gpt.num_params(); ++p) {
    const std::string& name = r.gpt.name(p);
    out.values[name] = testing::copy_of(r.gpt.value(p), r.gpt.local_shape(p));
    out.m[name] = testing::copy_of(whole.first_moments()[static_cast<std::size_t>(p)]);
    out.v[name] = testing::copy_of(whole.second_moments()[static_cast<std::size_t>(p)]);
  }
  out.adam_steps = whole.steps();
  r.data.saved();
  return out;
}

class Zero : public ::testing::Test {
 protected:
  comm::Communicator world_ = comm::Communicator::world();
};

// The single-rank reference: the whole batch at once, no replicas, stage 0 (plain AdamW). On
// dp = world size with 2 microbatches every stage must end where it ends. Only fp32
// reassociation separates them: the replicas' sums (all-reduce, or reduce-scatter plus the
// accumulated part) add the same terms in another order.
TEST_F(Zero, EveryStageEndsWithTheSingleRankParametersAndMoments) {
  const comm::Communicator solo = world_.split(world_.rank(), 0, "zero-test-solo");
  const Result serial = run(solo, 0, 1);
  ASSERT_EQ(serial.norms.size(), static_cast<std::size_t>(kSteps));
  ASSERT_GT(serial.norms.front(), kMaxNorm) << "clip() would not scale anything";
  for (int zero = 0; zero <= 3; ++zero) {
    if (zero > 0 && world_.size() == 1) break;  // sharding needs replicas (tested below)
    const Result got = run(world_, zero, kMicrobatches);
    const std::string where = fmt::format("zero {} on dp={}", zero, world_.size());
    ASSERT_EQ(got.values.size(), serial.values.size()) << where;
    EXPECT_EQ(got.adam_steps, kSteps) << where;
    for (int t = 0; t < kSteps; ++t) {
      EXPECT_NEAR(got.norms[static_cast<std::size_t>(t)], serial.norms[static_cast<std::size_t>(t)],
                  1e-5 * serial.norms[static_cast<std::size_t>(t)])
          << where << ", gradient norm of step " << t + 1;
    }
    for (const auto& [name, want] : serial.values) {
      const Tensor& value = got.values.at(name);
      ASSERT_EQ(value.numel(), want.numel()) << where << ": " << name;
      double worst = 0.0;
      for (std::int64_t i = 0; i < want.numel(); ++i) {
        worst = std::max(worst, static_cast<double>(std::abs(value[i] - want[i])));
      }
      // Three AdamW steps of lr 1e-2 move an element by up to 3e-2; a part updated twice, or
      // never, or gathered into the wrong place is off by ~1e-2. Within 1e-5: the same update
      // up to fp32 reassociation, which AdamW's m/√v amplifies where gradients are ~0
      // (measured ≤ 3e-7 on 1, 2 and 4 ranks).
      EXPECT_LE(worst, 1e-5) << where << ": " << name;
      // The moments are linear in the gradients (no m/√v): relative to their largest element
      // (measured ≤ 1.5e-6).
      EXPECT_LE(max_relative_error(got.m.at(name).values(), serial.m.at(name).values()), 1e-4)
          << where << ": first moment of " << name;
      EXPECT_LE(max_relative_error(got.v.at(name).values(), serial.v.at(name).values()), 1e-4)
          << where << ": second moment of " << name;
    }
  }
}

// What one replica holds, float by float, against zero.hpp's buckets: bucket b is block b's
// parameters, the last bucket the rest (embeddings, final LayerNorm); its part is ⌈S_b/dp⌉.
TEST_F(Zero, EachReplicaHoldsOnlyItsPart) {
  const int dp = world_.size();
  if (dp == 1) GTEST_SKIP() << "ZeRO needs data-parallel replicas";
  for (int zero = 0; zero <= 3; ++zero) {
    Replica r(world_, zero, kBatch / dp / kMicrobatches);
    std::vector<std::int64_t> sizes(static_cast<std::size_t>(r.gpt.config().shape.layers) + 1, 0);
    for (int p = 0; p < r.gpt.num_params(); ++p) {
      const int layer = r.gpt.grad_layer(p);
      sizes[layer < 0 ? sizes.size() - 1 : static_cast<std::size_t>(layer)] +=
          numel(r.gpt.global_shape(p));  // a one-rank TP mesh: the local shard is global
    }
    std::int64_t all = 0, parts = 0, padded = 0;
    for (const std::int64_t s : sizes) {
      all += s;
      parts += (s + dp - 1) / dp;
      padded += s % dp != 0 ? 1 : 0;
    }
    ASSERT_EQ(padded, static_cast<std::int64_t>(sizes.size()))
        << "a bucket divides by dp=" << dp << ": config() no longer pads every part";
    const std::int64_t last = sizes.back(), last_part = (last + dp - 1) / dp;
    const std::string where = fmt::format("zero {} on dp={}", zero, dp);

    // Between steps, and again after one (the transient buffers must be gone again).
    for (int step = 0; step < 2; ++step) {
      if (step == 1) train_step(r, world_, kMicrobatches, 0);
      const std::string when = where + (step == 0 ? " before a step" : " after a step");
      // Optimizer state: AdamW's two moments, of everything or of this replica's parts.
      EXPECT_EQ(r.data.optimizer_floats(), 2 * (zero == 0 ? all : parts)) << when;

      // Gradients: stages 0–1 keep the model's whole accumulators plus a buffer per bucket
      // (stage 0: S_b to all-reduce; stage 1: dp parts); stage ≥ 2 only the last bucket's
      // accumulators and buffer, and its summed part of every bucket.
      std::int64_t block_grads = 0;
      for (int p = 0; p < r.gpt.num_params(); ++p) {
        if (r.gpt.grad_layer(p) >= 0) block_grads += r.gpt.grad(p).count();
      }
      const std::int64_t expected_grads = zero == 0   ? 2 * all
                                          : zero == 1 ? all + parts * dp
                                                      : last + last_part * dp + parts;
      EXPECT_EQ(r.data.gradient_floats(), expected_grads) << when;
      EXPECT_EQ(block_grads, zero >= 2 ? 0 : all - last) << when << ": blocks' gradients";

      // Parameters: stage 3 frees every block's whole copy (its part lives in the optimizer's
      // bucket); the embeddings and final LayerNorm stay whole in every stage.
      std::int64_t held = 0;
      for (int p = 0; p < r.gpt.num_params(); ++p) held += r.gpt.value(p).count();
      EXPECT_EQ(held, zero == 3 ? last : all) << when << ": parameters in the model";
    }
  }
}

// Stage 3's parts are real storage, not just freed tensors: after the same step, a stage-3
// replica's tensors take exactly the blocks' whole parameters less than a stage-2 one's
// (the two differ in nothing else between steps).
TEST_F(Zero, StageThreeStoresTheBlocksParametersOnlyAsParts) {
  const int dp = world_.size();
  if (dp == 1) GTEST_SKIP() << "ZeRO needs data-parallel replicas";
  std::int64_t bytes[2] = {}, blocks = 0;
  for (const int zero : {2, 3}) {
    const std::int64_t before = tensor_bytes();
    {
      Replica r(world_, zero, kBatch / dp / kMicrobatches);
      train_step(r, world_, kMicrobatches, 0);
      bytes[zero - 2] = tensor_bytes() - before;
      blocks = 0;
      for (int p = 0; p < r.gpt.num_params(); ++p) {
        if (r.gpt.grad_layer(p) >= 0) blocks += numel(r.gpt.global_shape(p));
      }
    }
    EXPECT_EQ(tensor_bytes(), before) << "zero " << zero << " left tensors behind";
  }
  EXPECT_EQ(bytes[0] - bytes[1], blocks * static_cast<std::int64_t>(sizeof(float)))
      << "zero 2 holds " << bytes[0] << " bytes of tensors, zero 3 " << bytes[1];
}

// Bad input: the stage is named, and why it is refused.
TEST_F(Zero, RefusesAStageOutsideZeroToThree) {
  const comm::Communicator solo = world_.split(world_.rank(), 0, "zero-test-solo");
  const mesh::DeviceMesh tp(solo, {1, 1});
  model::Gpt gpt(tp, config(1));
  for (const int zero : {4, -1}) {
    EXPECT_EQ(error_of([&] { const DataParallel dp(gpt, world_, zero, AdamWConfig{}); }),
              fmt::format("zero={} must be 0, 1, 2 or 3", zero));
  }
}

TEST_F(Zero, RefusesShardingWithoutReplicas) {
  const comm::Communicator solo = world_.split(world_.rank(), 0, "zero-test-solo");
  const mesh::DeviceMesh tp(solo, {1, 1});
  model::Gpt gpt(tp, config(1));
  for (const int zero : {1, 2, 3}) {
    EXPECT_EQ(error_of([&] { const DataParallel dp(gpt, solo, zero, AdamWConfig{}); }),
              fmt::format("zero={} shards over the data-parallel replicas, but dp=1: use --dp > 1 "
                          "or --zero 0",
                          zero));
  }
}

}  // namespace
}  // namespace meshtp::train
