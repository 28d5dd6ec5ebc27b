// `meshtp train`'s loop (trainer.hpp) on one device with no mesh: the serial GPT
// (device/single_device_gpt.hpp) on a device::Backend — the GPU's, run by `meshtp-gpu train`,
// or the CPU's, where it is tested step by step against `meshtp train` on one rank.
//
// It is the same run as train() with dp = pp = 1 and a 1x1 mesh:
//   init        GPT-2's, from the parameter table (model/params.hpp): element g of every
//               tensor is init_value(entry, seed, L, g), so both loops start from the same
//               weights
//   data        step t's whole global batch from the byte corpus (byte_corpus.hpp)
//   step        forward + backward; the global gradient norm; clip; AdamW at lr(t) with
//               bias correction at t + 1, decay on the matrices and embeddings
//   validation  eval_batches held-out batches every eval_every steps and at the end
//   non-finite  a NaN/inf loss or norm stops the run before the update, or skips it up to
//               skip_nonfinite times
//   logs        hooks.on_step, the --metrics file
// In bf16 the device computes as its backend does (the GPU: bf16 weights' copies and
// activations, fp32 accumulation, masters, gradients and AdamW; single_device_gpt.hpp),
// which is not the CPU runtime's bf16 (GeMM operands rounded, the rest fp32): the two agree
// within the bf16 tolerance, not bit for bit.
//
// Refused, naming the flag: a layout of more than one device, checkpoints (--checkpoint-dir,
// --resume), traces.
#pragma once

#include <cstdint>

#include "device/backend.hpp"
#include "device/single_device_gpt.hpp"
#include "layout/model_shape.hpp"
#include "train/trainer.hpp"

namespace meshtp::train {

// GPT-2's init of the model (the values model::Gpt::init gives on any mesh), as host fp32.
device::GptWeights gpt2_init(const layout::ModelShape& shape, std::uint64_t seed);

// Runs the loop on `backend`. Throws meshtp::Error naming the value for a configuration it
// cannot run (above) or a bad flag (check_flags).
TrainSummary train_on_device(device::Backend& backend, const TrainConfig& config,
                             const TrainHooks& hooks);

}  // namespace meshtp::train
