// A checkpoint directory owned by one run at a time.
//
//   DIR/checkpoint-00000200.safetensors   one file per save (checkpoint.hpp), the newest
//   DIR/checkpoint-00000100.safetensors   `keep` of them kept, older ones deleted
//   DIR/checkpoint.safetensors            symlink → the newest, replaced atomically
//                                         (symlink to a temporary name, then rename)
//   DIR/meshtp.lock                       "pid host boot start-time" of the run writing here
//
// Why each piece:
//   - keep ≥ 2 lets a resume fall back when the newest file turns out damaged: candidates
//     are the link's target, then every numbered file by step, newest first; a damaged one
//     (CorruptCheckpoint) is skipped with a warning naming it and the one used instead.
//   - the lock refuses a second run writing into the same directory (the last writer would
//     silently win). It is created complete (written to a temporary, then link(2), which
//     fails if the name exists) and removed when the run ends. A lock whose run is gone
//     does not block: on the same host its pid is dead, reused (another start time) or from
//     before a reboot (another boot id); from another host it is stale once its mtime,
//     refreshed every minute by its run, is older than 10 minutes.
//   - while holding the lock, temporary files that killed writers left behind
//     (".checkpoint…tmp.*", see core/atomic_file.hpp) are removed.
//   - a fresh run (no --resume) into a directory holding checkpoints is refused before
//     anything changes: it would overwrite another run's state.
//
// Filesystem work happens on rank 0; every rank learns the outcome (collective calls throw
// on every rank alike).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "model/gpt.hpp"
#include "train/adamw.hpp"
#include "train/checkpoint.hpp"

namespace meshtp::train {

using NoticeFn = std::function<void(const std::string&)>;

class CheckpointDir {
 public:
  // Creates DIR if needed, takes the lock, refuses a fresh run into a directory that holds
  // checkpoints, removes stale temporaries. Collective over `world`.
  CheckpointDir(std::string dir, int keep, bool resume, const comm::Communicator& world,
                const NoticeFn& notice);
  ~CheckpointDir();  // releases the lock
  CheckpointDir(const CheckpointDir&) = delete;
  CheckpointDir& operator=(const CheckpointDir&) = delete;

  const std::string& dir() const { return dir_; }
  std::string latest_link() const;                // DIR/checkpoint.safetensors
  std::string path_for(std::int64_t step) const;  // DIR/checkpoint-<step>.safetensors

  // The newest checkpoint that verifies, restored into gpt and optimizer. A damaged one is
  // skipped with a notice naming it and the fallback. Collective; every rank restores from
  // the same file (a file one rank finds damaged is skipped by all).
  CheckpointState resume(const ModelParts& parts, std::string& used,
                         const NoticeFn& notice);

  // Saves step's checkpoint, points the link at it and deletes all but the newest `keep`.
  // Collective. Returns the path written.
  // `pipeline`: this rank's pipeline group (save_checkpoint).
  std::string save(const ModelParts& parts, const CheckpointState& state, int dp_rank,
                   const comm::Communicator& pipeline);

  // Refreshes the lock's mtime (rank 0, at most once a minute) so other hosts see it live.
  void heartbeat();

 private:
  std::string dir_;
  int keep_;
  const comm::Communicator& world_;
  bool locked_ = false;
  double last_heartbeat_ = 0.0;
};

// Checkpoints in `dir`, newest first: the latest link's target, then numbered files by step.
std::vector<std::string> checkpoint_candidates(const std::string& dir);

// The metadata of the newest checkpoint in `dir` whose header reads, if any (nothing is
// verified or locked): what a resume will most likely start from, for printing.
std::optional<CheckpointState> peek_newest_checkpoint(const std::string& dir);

// Runs `fn` on rank 0 of `world`; if it throws, every rank throws (rank 0 with its message,
// the others pointing at it). Collective.
void on_rank0(const comm::Communicator& world, const std::function<void()>& fn);

}  // namespace meshtp::train
