// The checkpoint directory (train/checkpoint_dir.hpp) through its own API: rotation keeps the
// newest `keep` files and points the link at the newest, the newest intact checkpoint is
// found and a damaged one skipped with a notice, one run at a time holds the lock (a stale
// lock of a run that is gone is replaced, a live one refused naming its owner), and each bad
// input is an error naming the value. Filesystem work is rank 0's, so on 2 ranks every rank
// must reach the same outcome (errors, what a resume restored); the files themselves are
// inspected on rank 0, which alone changes them and is not racing ahead of its own checks.
// Each test has a directory of its own.
#include "train/checkpoint_dir.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "mesh/device_mesh.hpp"
#include "model/gpt.hpp"
#include "train/adamw.hpp"
#include "error_of.hpp"

namespace meshtp::train {
namespace {

using meshtp::test_support::error_of;

namespace fs = std::filesystem;

std::string host_name() {
  char name[256] = {};
  return ::gethostname(name, sizeof name - 1) == 0 ? name : "?";
}

std::string file_text(const fs::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_text(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

// A tiny model and its AdamW: what a checkpoint holds. Every rank is a replica of its own
// (TP mesh of one rank); replica 0, i.e. rank 0, is the one whose state is saved. The first
// element of the first parameter is set to the step before each save, so a resume shows
// which file it restored.
struct Model {
  explicit Model(const comm::Communicator& world)
      : solo(world.split(world.rank(), 0, "checkpoint-dir-test")),
        tp(solo, {1, 1}),
        gpt(tp,
            {.shape = {.batch = 1, .seq = 4, .hidden = 8, .heads = 2, .layers = 1, .vocab = 256}}),
        adamw(gpt.backend(), refs(), AdamWConfig{}) {
    gpt.init(1);
  }
  std::vector<ParamRef> refs() {
    std::vector<ParamRef> out;
    for (int p = 0; p < gpt.num_params(); ++p) {
      out.push_back({gpt.name(p), &gpt.value(p), &gpt.grad(p), gpt.decays(p), gpt.replicas(p)});
    }
    return out;
  }
  ModelParts parts() { return {{&gpt, &adamw}}; }
  float& marker() { return device::floats(gpt.value(0))[0]; }

  comm::Communicator solo;
  mesh::DeviceMesh tp;
  model::Gpt gpt;
  AdamW adamw;
};

class CheckpointDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Rank 0's pid in the name: suites running at once (other checkouts) never share it.
    pid0_ = static_cast<int>(::getpid());
    world_.broadcast(std::span<int>(&pid0_, 1), 0);
    root_ = fs::temp_directory_path() /
            fmt::format("meshtp_checkpoint_dir_{}_{}_{}", world_.size(), pid0_,
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    dir_ = (root_ / "ckpt").string();
    if (rank0()) {
      fs::remove_all(root_);
      fs::create_directories(root_);
    }
    world_.barrier();
  }
  void TearDown() override {
    world_.barrier();
    if (world_.rank() == 0) fs::remove_all(root_);
  }

  // Rank 0 changes the directory by hand (as a crash, a disk or a user would) once every rank
  // is done with it, then every rank sees the result.
  void on_rank0(const std::function<void()>& f) {
    world_.barrier();
    if (rank0()) f();
    world_.barrier();
  }
  bool rank0() const { return world_.rank() == 0; }

  // The notices of rank 0 (the other ranks get none).
  NoticeFn collect() {
    return [this](const std::string& line) { notices_.push_back(line); };
  }

  std::string save(CheckpointDir& dir, std::int64_t step) {
    model_.marker() = static_cast<float>(step);
    return dir.save(model_.parts(), {.step = step, .seed = 1, .layout = "test"}, world_.rank(),
                    model_.solo);
  }

  // The numbered checkpoints in dir_, by step.
  std::vector<std::int64_t> steps_on_disk() const {
    std::vector<std::int64_t> out;
    for (const auto& entry : fs::directory_iterator(dir_)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("checkpoint-", 0) == 0) out.push_back(std::stoll(name.substr(11, 8)));
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  comm::Communicator world_ = comm::Communicator::world();
  int pid0_ = 0;
  fs::path root_;
  std::string dir_;
  Model model_{world_};
  std::vector<std::string> notices_;
};

// keep = k: after every save exactly the newest min(saves, k) numbered files remain, and the
// link names the newest.
TEST_F(CheckpointDirTest, RotationKeepsExactlyTheNewestKeep) {
  for (const int keep : {1, 2, 3}) {
    dir_ = (root_ / fmt::format("keep{}", keep)).string();
    CheckpointDir dir(dir_, keep, false, world_, collect());
    std::vector<std::int64_t> saved;
    for (std::int64_t step = 10; step <= 60; step += 10) {
      EXPECT_EQ(save(dir, step), dir.path_for(step));
      saved.push_back(step);
      if (!rank0()) continue;
      const std::vector<std::int64_t> newest(
          saved.end() - std::min<std::ptrdiff_t>(keep, static_cast<std::ptrdiff_t>(saved.size())),
          saved.end());
      EXPECT_EQ(steps_on_disk(), newest) << "keep " << keep << " after step " << step;
      ASSERT_TRUE(fs::is_symlink(dir.latest_link()));
      EXPECT_EQ(fs::read_symlink(dir.latest_link()), fs::path(dir.path_for(step)).filename());
    }
  }
}

// Numbered files are named by step with 8 digits, and the link sits beside them.
TEST_F(CheckpointDirTest, NamesItsFiles) {
  const CheckpointDir dir(dir_, 2, false, world_, collect());
  EXPECT_EQ(dir.dir(), dir_);
  EXPECT_EQ(dir.path_for(200), dir_ + "/checkpoint-00000200.safetensors");
  EXPECT_EQ(dir.latest_link(), dir_ + "/checkpoint.safetensors");
}

// The newest: the link's target first, then every numbered file newest first (each once);
// peek_newest_checkpoint reads it, resume restores it.
TEST_F(CheckpointDirTest, TheNewestIsFound) {
  if (rank0()) {
    EXPECT_FALSE(peek_newest_checkpoint(dir_).has_value()) << "no directory yet";
  }
  {
    CheckpointDir dir(dir_, 3, false, world_, collect());
    if (rank0()) {
      EXPECT_TRUE(checkpoint_candidates(dir_).empty());
    }
    for (const std::int64_t step : {10, 20, 30}) save(dir, step);
    if (rank0()) {
      EXPECT_EQ(checkpoint_candidates(dir_),
                (std::vector<std::string>{dir.path_for(30), dir.path_for(20), dir.path_for(10)}));
      const std::optional<CheckpointState> peeked = peek_newest_checkpoint(dir_);
      ASSERT_TRUE(peeked.has_value());
      EXPECT_EQ(peeked->step, 30);
    }
  }
  model_.marker() = -1.0f;
  CheckpointDir dir(dir_, 3, true, world_, collect());
  std::string used;
  EXPECT_EQ(dir.resume(model_.parts(), used, collect()).step, 30);
  EXPECT_EQ(used, dir.path_for(30));
  EXPECT_EQ(model_.marker(), 30.0f) << "restored another file's parameters";
  EXPECT_TRUE(notices_.empty());

  // The link wins over a higher step (a user pointed it back by hand).
  on_rank0([&] {
    fs::remove(dir.latest_link());
    fs::create_symlink(fs::path(dir.path_for(20)).filename(), dir.latest_link());
    EXPECT_EQ(checkpoint_candidates(dir_),
              (std::vector<std::string>{dir.path_for(20), dir.path_for(30), dir.path_for(10)}));
  });
  EXPECT_EQ(dir.resume(model_.parts(), used, collect()).step, 20);
  EXPECT_EQ(model_.marker(), 20.0f);
}

// A damaged newest file is skipped with a notice naming it and the one used instead; the
// next save replaces the skipped later step (rotation counts only steps up to its own).
TEST_F(CheckpointDirTest, ADamagedNewestFallsBackToThePrevious) {
  {
    CheckpointDir dir(dir_, 3, false, world_, collect());
    for (const std::int64_t step : {10, 20, 30}) save(dir, step);
  }
  const std::string newest = (fs::path(dir_) / "checkpoint-00000030.safetensors").string();
  on_rank0([&] { fs::resize_file(newest, fs::file_size(newest) / 2); });  // a torn write
  CheckpointDir dir(dir_, 3, true, world_, collect());
  std::string used;
  EXPECT_EQ(dir.resume(model_.parts(), used, collect()).step, 20);
  EXPECT_EQ(used, dir.path_for(20));
  EXPECT_EQ(model_.marker(), 20.0f);
  if (rank0()) {
    ASSERT_EQ(notices_.size(), 1u);
    EXPECT_NE(notices_[0].find("the newest checkpoint is damaged or missing (" + newest),
              std::string::npos)
        << notices_[0];
    EXPECT_NE(notices_[0].find(
                  fmt::format("resuming from the previous one, '{}' (step 20)", dir.path_for(20))),
              std::string::npos)
        << notices_[0];
  } else {
    EXPECT_TRUE(notices_.empty());
  }
  save(dir, 21);
  if (rank0()) {
    EXPECT_EQ(steps_on_disk(), (std::vector<std::int64_t>{10, 20, 21}));
  }
}

// The link pointing at a file that is gone is reported, and the newest numbered file used.
TEST_F(CheckpointDirTest, ADanglingLinkIsReportedAndSkipped) {
  {
    CheckpointDir dir(dir_, 2, false, world_, collect());
    for (const std::int64_t step : {10, 20}) save(dir, step);
  }
  const std::string newest = (fs::path(dir_) / "checkpoint-00000020.safetensors").string();
  on_rank0([&] { fs::remove(newest); });
  CheckpointDir dir(dir_, 2, true, world_, collect());
  std::string used;
  EXPECT_EQ(dir.resume(model_.parts(), used, collect()).step, 10);
  if (rank0()) {
    ASSERT_EQ(notices_.size(), 1u);
    EXPECT_NE(notices_[0].find(fmt::format("'{}' points at 'checkpoint-00000020.safetensors', "
                                           "which is missing",
                                           dir.latest_link())),
              std::string::npos)
        << notices_[0];
  }
}

// Nothing intact: an error naming every file and why, not a fresh start.
TEST_F(CheckpointDirTest, NoIntactCheckpointIsAnError) {
  {
    CheckpointDir dir(dir_, 2, false, world_, collect());
    for (const std::int64_t step : {10, 20}) save(dir, step);
  }
  const fs::path d(dir_);
  on_rank0([&] {
    for (const char* name :
         {"checkpoint-00000010.safetensors", "checkpoint-00000020.safetensors"}) {
      fs::resize_file(d / name, 16);
    }
  });
  CheckpointDir dir(dir_, 2, true, world_, collect());
  std::string used;
  const std::string error = error_of([&] { dir.resume(model_.parts(), used, collect()); });
  EXPECT_EQ(error.rfind(fmt::format("--resume: no checkpoint in '{}' is intact: ", dir_), 0), 0u)
      << error;
  EXPECT_NE(error.find(dir.path_for(10)), std::string::npos) << error;
  EXPECT_NE(error.find(dir.path_for(20)), std::string::npos) << error;
}

// A second run into the same directory is refused while the first holds the lock, naming the
// holder and the lock file; once the first is gone the directory is free again.
TEST_F(CheckpointDirTest, ASecondLockHolderIsRefused) {
  const std::string lock = dir_ + "/meshtp.lock";
  {
    const CheckpointDir first(dir_, 2, false, world_, collect());
    if (rank0()) {
      EXPECT_EQ(file_text(lock).rfind(fmt::format("pid {}\nhost {}\n", pid0_, host_name()), 0), 0u)
          << file_text(lock);
    }
    const std::string error =
        error_of([&] { const CheckpointDir second(dir_, 2, true, world_, collect()); });
    EXPECT_EQ(error.rfind(fmt::format("checkpoint directory '{}' is in use by another meshtp run "
                                      "(pid {} on {}, since ",
                                      dir_, pid0_, host_name()),
                          0),
              0u)
        << error;
    EXPECT_NE(error.find(fmt::format("remove '{}' if that run is gone", lock)), std::string::npos)
        << error;
    if (rank0()) {
      EXPECT_TRUE(fs::exists(lock)) << "the refused run removed the holder's lock";
    }
  }
  if (rank0()) {
    EXPECT_FALSE(fs::exists(lock)) << "the lock outlived its run";
  }
  const CheckpointDir again(dir_, 2, false, world_, collect());
  if (rank0()) {
    EXPECT_TRUE(fs::exists(lock));
  }
}

// A lock whose run is gone does not block (checkpoint_dir.hpp): on this host a dead pid, a
// reused pid (another start time) or one from before a reboot (another boot id); from another
// host, or unreadable, once its mtime is older than 10 minutes. Each is replaced with a notice
// naming the old owner.
TEST_F(CheckpointDirTest, AStaleLockIsReplacedWithANotice) {
  // A pid no process has: the highest free one below pid_max.
  long dead = std::stol(file_text("/proc/sys/kernel/pid_max")) - 1;
  while (fs::exists(fmt::format("/proc/{}", dead))) --dead;
  const std::string self = file_text(fmt::format("/proc/{}/stat", pid0_));
  const std::string start = [&] {  // field 22 (start time) of our /proc/PID/stat
    std::istringstream fields(self.substr(self.rfind(')') + 2));
    std::string field;
    for (int i = 3; i <= 22; ++i) fields >> field;
    return field;
  }();
  std::string boot = file_text("/proc/sys/kernel/random/boot_id");
  boot.pop_back();  // its newline
  struct Stale {
    std::string why, text;
    bool old;  // mtime 11 minutes ago
    std::string owner;
  };
  const std::string me = fmt::format("pid {}\nhost {}\nboot {}\n", pid0_, host_name(), boot);
  const std::vector<Stale> cases{
      {"dead pid",
       fmt::format("pid {}\nhost {}\nboot {}\nstart 1\nsince then\n", dead, host_name(), boot),
       false, fmt::format("pid {} on {}, since then", dead, host_name())},
      {"reused pid", me + "start 1\nsince then\n", false,
       fmt::format("pid {} on {}, since then", pid0_, host_name())},
      {"before a reboot",
       fmt::format("pid {}\nhost {}\nboot not-{}\nstart {}\nsince then\n", pid0_, host_name(), boot,
                   start),
       false, fmt::format("pid {} on {}, since then", pid0_, host_name())},
      {"another host, silent for 11 minutes", "pid 42\nhost elsewhere\nsince then\n", true,
       "pid 42 on elsewhere, since then"},
      {"unreadable, 11 minutes old", "garbage\n", true, "an unreadable lock"},
  };
  const std::string lock = dir_ + "/meshtp.lock";
  for (const Stale& c : cases) {
    on_rank0([&] {
      fs::create_directories(dir_);
      write_text(lock, c.text);
      if (c.old) {
        fs::last_write_time(lock, fs::file_time_type::clock::now() - std::chrono::minutes(11));
      }
    });
    notices_.clear();
    const std::string error = error_of([&] {
      const CheckpointDir dir(dir_, 2, false, world_, collect());
      if (rank0()) {
        EXPECT_EQ(file_text(lock).rfind(fmt::format("pid {}\n", pid0_), 0), 0u) << c.why;
        EXPECT_EQ(notices_, std::vector<std::string>{fmt::format(
                                "removed the stale lock of a run that is gone ({})", c.owner)})
            << c.why;
      }
    });
    EXPECT_EQ(error, "") << c.why;
    if (rank0()) {
      EXPECT_FALSE(fs::exists(lock)) << c.why;
    }
  }
}

// The locks that may still be live are refused and left in place: another host's or an
// unreadable one refreshed within 10 minutes (it cannot be checked locally), and this host's
// lock of a running process with its start time.
TEST_F(CheckpointDirTest, ALiveLockIsRefusedAndKept) {
  const std::string self = file_text(fmt::format("/proc/{}/stat", pid0_));
  std::istringstream fields(self.substr(self.rfind(')') + 2));
  std::string start;
  for (int i = 3; i <= 22; ++i) fields >> start;
  const std::vector<std::pair<std::string, std::string>> cases{
      {"pid 42\nhost elsewhere\nsince then\n", "(pid 42 on elsewhere, since then)"},
      {"garbage\n", "(an unreadable lock)"},
      {fmt::format("pid {}\nhost {}\nstart {}\nsince then\n", pid0_, host_name(), start),
       fmt::format("(pid {} on {}, since then)", pid0_, host_name())},
  };
  const std::string lock = dir_ + "/meshtp.lock";
  for (const auto& [text, owner] : cases) {
    on_rank0([&] {
      fs::create_directories(dir_);
      write_text(lock, text);
    });
    const std::string error =
        error_of([&] { const CheckpointDir dir(dir_, 2, false, world_, collect()); });
    EXPECT_NE(error.find(fmt::format("checkpoint directory '{}' is in use by another meshtp run {}",
                                     dir_, owner)),
              std::string::npos)
        << error;
    if (rank0()) {
      EXPECT_EQ(file_text(lock), text) << "a live lock was changed";
    }
  }
}

// A fresh run (no --resume) into a directory holding checkpoints is refused before anything
// changes, and leaves no lock behind.
TEST_F(CheckpointDirTest, AFreshRunIntoCheckpointsIsRefused) {
  {
    CheckpointDir dir(dir_, 2, false, world_, collect());
    save(dir, 10);
  }
  const std::string error =
      error_of([&] { const CheckpointDir dir(dir_, 2, false, world_, collect()); });
  EXPECT_EQ(error, fmt::format("checkpoint directory '{}' already holds checkpoints (newest: "
                               "'{}/checkpoint-00000010.safetensors'): pass --resume to continue "
                               "from them, or give another --checkpoint-dir; nothing was changed",
                               dir_, dir_));
  if (rank0()) {
    EXPECT_EQ(steps_on_disk(), std::vector<std::int64_t>{10});
    EXPECT_FALSE(fs::exists(dir_ + "/meshtp.lock")) << "the refused run kept its lock";
  }
}

// Temporaries that killed writers left (".checkpoint…tmp.*", ".checkpoint…link.*") are removed
// once the lock is held, with a notice; other files are not touched.
TEST_F(CheckpointDirTest, KilledWritersTemporariesAreRemoved) {
  on_rank0([&] {
    fs::create_directories(dir_);
    std::ofstream(dir_ + "/.checkpoint-00000002.safetensors.tmp.99999.0") << std::string(1000, 'x');
    write_text(dir_ + "/.checkpoint.safetensors.link.99999", "");
    write_text(dir_ + "/notes.txt", "mine");
  });
  const CheckpointDir dir(dir_, 2, false, world_, collect());
  if (rank0()) {
    std::vector<std::string> left;
    for (const auto& entry : fs::directory_iterator(dir_)) {
      left.push_back(entry.path().filename().string());
    }
    std::sort(left.begin(), left.end());
    EXPECT_EQ(left, (std::vector<std::string>{"meshtp.lock", "notes.txt"}));
    EXPECT_EQ(notices_,
              std::vector<std::string>{fmt::format(
                  "removed 2 temporary files (0.0 MB) left in '{}' by killed writers", dir_)});
  }
}

// Bad input, each refused on every rank with the value named.
TEST_F(CheckpointDirTest, KeepBelowOneIsRefused) {
  for (const int keep : {0, -3}) {
    EXPECT_EQ(error_of([&] { const CheckpointDir dir(dir_, keep, false, world_, collect()); }),
              fmt::format("--keep={} must be ≥ 1 (checkpoints kept in --checkpoint-dir)", keep));
  }
  if (rank0()) {
    EXPECT_FALSE(fs::exists(dir_)) << "a refused --keep created the directory";
  }
}

TEST_F(CheckpointDirTest, ResumeFromNothingIsRefused) {
  EXPECT_EQ(error_of([&] { const CheckpointDir dir(dir_, 2, true, world_, collect()); }),
            fmt::format("--resume: checkpoint directory '{}' does not exist", dir_));
  CheckpointDir dir(dir_, 2, false, world_, collect());  // exists now, but empty
  std::string used;
  EXPECT_EQ(error_of([&] { dir.resume(model_.parts(), used, collect()); }),
            fmt::format("--resume: no checkpoint in '{}' (neither '{}' nor "
                        "checkpoint-<step>.safetensors)",
                        dir_, dir.latest_link()));
}

TEST_F(CheckpointDirTest, AFileInPlaceOfTheDirectoryIsRefused) {
  on_rank0([&] { write_text(dir_, "not a directory"); });
  const std::string error =
      error_of([&] { const CheckpointDir dir(dir_, 2, false, world_, collect()); });
  EXPECT_EQ(error.rfind(fmt::format("cannot use checkpoint directory '{}': ", dir_), 0), 0u)
      << error;
}

}  // namespace
}  // namespace meshtp::train
