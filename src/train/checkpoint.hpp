// Training checkpoints: one safetensors file of global tensors, so any layout can resume.
//
//   NAME            the parameter's global value (the same names as a weights file, so a
//                   checkpoint also loads in `meshtp block`)
//   adam.m.NAME     AdamW's first moment, global
//   adam.v.NAME     AdamW's second moment, global
//   metadata        format, step (also the data position and the sampler's RNG state: batches
//                   are a pure function of seed and step), seed, the model's shape, and the
//                   layout it was written on (informational)
//
// Written by rank 0 atomically (temp file + rename): a crash or an error mid-write leaves
// the previous checkpoint intact. Loading checks the format, the model shape and every
// tensor before changing anything, so a checkpoint of another model is a clear error.
#pragma once

#include <cstdint>
#include <string>

#include "comm/communicator.hpp"
#include "model/gpt.hpp"
#include "train/adamw.hpp"

namespace meshtp::train {

inline constexpr const char* kCheckpointFormat = "meshtp-checkpoint-1";

struct CheckpointState {
  std::int64_t step = 0;  // steps completed
  std::uint64_t seed = 0;
  std::string layout;     // e.g. "dp=2 tp=2x1", for the record
};

// Collective over `world`; only data-parallel replica 0 gathers (`dp_rank` = this rank's
// replica), rank 0 writes `path`. Every rank returns once the file is there, or throws if
// rank 0 failed to write it.
void save_checkpoint(const std::string& path, model::Gpt& gpt, AdamW& optimizer,
                     const CheckpointState& state, const comm::Communicator& world, int dp_rank);

// Every rank reads `path` and restores its shards of the parameters and moments; returns the
// state. Throws before restoring anything if the file is missing, corrupt, of another format
// or of a model with another shape.
CheckpointState load_checkpoint(const std::string& path, model::Gpt& gpt, AdamW& optimizer);

}  // namespace meshtp::train
