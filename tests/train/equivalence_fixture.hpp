// What the training-equivalence tests share: a corpus directory every rank writes identically
// (rank 0's pid in the name, so suites running at once never share one), a run's loss curve,
// and how far one curve drifts from another.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "train/test_corpus.hpp"
#include "train/trainer.hpp"

namespace meshtp::train::test {

// The largest relative difference of a run's losses from the serial run's, over steps 1–10
// and over the rest (where fp32 reassociation has compounded through the updates).
struct Drift {
  double early = 0.0;
  double late = 0.0;
};
inline Drift drift(const std::vector<double>& got, const std::vector<double>& serial) {
  Drift d;
  for (std::size_t t = 0; t < got.size(); ++t) {
    double& worst = t < 10 ? d.early : d.late;
    worst = std::max(worst, std::abs(got[t] - serial[t]) / serial[t]);
  }
  return d;
}

class EquivalenceFixture : public ::testing::Test {
 protected:
  explicit EquivalenceFixture(std::string prefix) : prefix_(std::move(prefix)) {}
  void SetUp() override {
    int pid = static_cast<int>(::getpid());
    world_.broadcast(std::span<int>(&pid, 1), 0);
    dir_ = std::filesystem::temp_directory_path() /
           fmt::format("{}_{}_{}", prefix_, world_.size(), pid);
    if (world_.rank() == 0) {
      std::filesystem::remove_all(dir_);
      std::filesystem::create_directories(dir_);
      write_corpus(dir_ / "corpus.txt");
    }
    world_.barrier();
  }
  void TearDown() override {
    world_.barrier();
    if (world_.rank() == 0) std::filesystem::remove_all(dir_);
  }

  // A short run of `shape` on the corpus: warmup 3, lr 3e-3 → 3e-4, no evaluation.
  TrainConfig config_for(const layout::ModelShape& shape, int steps) const {
    TrainConfig c;
    c.model.shape = shape;
    c.steps = steps;
    c.lr = 3e-3;
    c.min_lr = 3e-4;
    c.warmup = 3;
    c.eval_every = 0;
    c.eval_batches = 1;
    c.data = (dir_ / "corpus.txt").string();
    return c;
  }

  std::vector<double> losses(const comm::Communicator& comm, const TrainConfig& c) {
    std::vector<double> out;
    train(comm, c, [&](const StepReport& r) { out.push_back(r.loss); });
    return out;
  }

  // `base` (10 steps, on its own layout, checkpointing into its directory) run whole, then
  // for (save, resume) and the reverse: 4 steps saved on `save`, the last 6 resumed on
  // `resume` must give the whole run's losses within `tolerance` (relative). `tag` names the
  // checkpoint directories.
  void expect_resumes_across(TrainConfig base, const layout::Plan& save,
                             const layout::Plan& resume, double tolerance, const char* tag) {
    base.checkpoint_dir = (dir_ / fmt::format("{}_whole", tag)).string();
    const std::vector<double> whole = losses(world_, base);
    int order = 0;
    for (const auto& [a, b] : {std::pair{save, resume}, std::pair{resume, save}}) {
      TrainConfig first = base;
      first.model.layout = a;
      first.checkpoint_dir = (dir_ / fmt::format("{}_{}", tag, order++)).string();
      first.stop_after = 4;
      losses(world_, first);
      TrainConfig rest = first;
      rest.model.layout = b;
      rest.stop_after = 0;
      rest.resume = true;
      const std::vector<double> tail = losses(world_, rest);
      ASSERT_EQ(tail.size(), 6u);
      for (std::size_t t = 0; t < tail.size(); ++t) {
        EXPECT_NEAR(tail[t], whole[t + 4], tolerance * whole[t + 4])
            << "saved on " << layout_string(first) << ", resumed on " << layout_string(rest)
            << ", step " << t + 5;
      }
    }
  }

  comm::Communicator world_ = comm::Communicator::world();
  std::filesystem::path dir_;

 private:
  std::string prefix_;
};

}  // namespace meshtp::train::test
