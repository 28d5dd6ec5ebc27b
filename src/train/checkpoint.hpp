// Training checkpoints: one safetensors file of global tensors, so any layout can resume.
//
//   NAME            the parameter's global value (the same names as a weights file, so a
//                   checkpoint also loads in `meshtp block`)
//   adam.m.NAME     AdamW's first moment, global
//   adam.v.NAME     AdamW's second moment, global
//   metadata        format, step (also the data position and the sampler's RNG state: batches
//                   are a pure function of seed and step), seed, the model's shape, the
//                   layout it was written on (informational), and checksums:
//                     crc32.T            CRC-32 (zlib) of tensor T's bytes, 8 hex digits
//                     crc32.__metadata__ CRC-32 of the other metadata as "key=value\n" lines,
//                                        sorted by key
//
// Written by rank 0 atomically (temp file + rename): a crash or an error mid-write leaves
// the previous checkpoint intact. Reading checks the format, the model shape, every tensor
// and every checksum before changing anything, so a checkpoint of another model is a clear
// error and a flipped or truncated byte is named, not loaded. A parameter that is NaN or
// infinite is never saved.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "core/error.hpp"
#include "model/gpt.hpp"
#include "tensor/safetensors.hpp"
#include "train/adamw.hpp"

namespace meshtp::train {

// Format 2 carries checksums; format 1 files (written before them) still load, unverified.
inline constexpr const char* kCheckpointFormat = "meshtp-checkpoint-2";
inline constexpr const char* kCheckpointFormatUnverified = "meshtp-checkpoint-1";

struct CheckpointState {
  std::int64_t step = 0;  // steps completed
  std::uint64_t seed = 0;
  std::string layout;     // e.g. "dp=2 tp=2x1", for the record
  bool verified = false;  // checksums present and matching
};

// The file is damaged (truncated, bytes flipped, header unreadable): an older checkpoint
// may still be good. Other errors (another model, another format) are plain meshtp::Error.
class CorruptCheckpoint : public Error {
 public:
  using Error::Error;
};

// One rank's share of the model: its pipeline stages (one unless pipelined; see
// train/pipeline_model.hpp), each with its whole AdamW state.
struct ModelPart {
  model::Gpt* gpt = nullptr;
  AdamW* optimizer = nullptr;
};
using ModelParts = std::vector<ModelPart>;

// Collective over `world`; only data-parallel replica 0 gathers (`dp_rank` = this rank's
// replica), rank 0 writes `path`. With pipeline stages (`pipeline`: this rank's pipeline
// group, rank 0 of which holds stage 0) the first TP rank of every stage of replica 0 sends
// its gathered tensors to pipeline rank 0; the tied embedding is taken from stage 0. Every
// rank returns once the file is there, or throws if rank 0 failed to write it (or found a
// non-finite parameter, which is not saved).
void save_checkpoint(const std::string& path, const ModelParts& parts,
                     const CheckpointState& state, const comm::Communicator& world, int dp_rank,
                     const comm::Communicator& pipeline);

// A checkpoint read and verified, not yet applied.
struct LoadedCheckpoint {
  SafetensorsFile file;
  CheckpointState state;
  std::int64_t adam_steps = 0;
};

// Reads `path` and verifies it against every part's shape. Throws CorruptCheckpoint for a
// damaged file, meshtp::Error for one of another model or format. Changes nothing.
LoadedCheckpoint read_checkpoint(const std::string& path, const ModelParts& parts);
// This rank's shards of the parameters and moments from a verified checkpoint.
void restore_checkpoint(const LoadedCheckpoint& checkpoint, const ModelParts& parts);

// The metadata alone (header read, nothing verified): e.g. to print a resumed run's seed.
CheckpointState peek_checkpoint(const std::string& path);

}  // namespace meshtp::train
