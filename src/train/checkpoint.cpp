#include "train/checkpoint.hpp"

#include <fmt/format.h>

#include "core/error.hpp"
#include "tensor/safetensors.hpp"

namespace meshtp::train {
namespace {

std::map<std::string, std::string> model_metadata(const model::GptConfig& c) {
  return {{"vocab", std::to_string(c.vocab)},   {"seq", std::to_string(c.seq)},
          {"hidden", std::to_string(c.hidden)}, {"heads", std::to_string(c.heads)},
          {"layers", std::to_string(c.layers)}};
}

}  // namespace

void save_checkpoint(const std::string& path, model::Gpt& gpt, AdamW& optimizer,
                     const CheckpointState& state, const comm::Communicator& world, int dp_rank) {
  std::map<std::string, Tensor> tensors;
  if (dp_rank == 0) {  // replicas hold identical state; replica 0's TP ranks gather it
    for (int p = 0; p < gpt.num_params(); ++p) {
      const std::string& name = gpt.name(p);
      tensors[name] = gpt.gather(p, gpt.value(p));
      tensors["adam.m." + name] = gpt.gather(p, optimizer.first_moments()[static_cast<std::size_t>(p)]);
      tensors["adam.v." + name] = gpt.gather(p, optimizer.second_moments()[static_cast<std::size_t>(p)]);
    }
  }
  // Rank 0 writes; everyone learns whether it worked, so no rank goes on alone.
  int failed = 0;
  std::string reason;
  if (world.rank() == 0) {
    auto metadata = model_metadata(gpt.config());
    metadata["format"] = kCheckpointFormat;
    metadata["step"] = std::to_string(state.step);
    metadata["seed"] = std::to_string(state.seed);
    metadata["adam_steps"] = std::to_string(optimizer.steps());
    metadata["layout"] = state.layout;
    try {
      save_safetensors(path, tensors, metadata);
    } catch (const Error& e) {
      failed = 1;
      reason = e.what();
    }
  }
  world.broadcast(std::span<int>(&failed, 1), 0);
  MESHTP_CHECK(!failed, "checkpoint not written{}", world.rank() == 0 ? ": " + reason : " (see rank 0)");
}

CheckpointState load_checkpoint(const std::string& path, model::Gpt& gpt, AdamW& optimizer) {
  const SafetensorsFile file = load_safetensors(path, {.convert_to_f32 = false});
  const auto meta = [&](const std::string& key) -> const std::string& {
    const auto it = file.metadata.find(key);
    MESHTP_CHECK(it != file.metadata.end(), "{}: not a meshtp checkpoint (no '{}' in its metadata)",
                 path, key);
    return it->second;
  };
  MESHTP_CHECK(meta("format") == kCheckpointFormat, "{}: checkpoint format '{}', expected '{}'",
               path, meta("format"), kCheckpointFormat);
  for (const auto& [key, expected] : model_metadata(gpt.config())) {
    MESHTP_CHECK(meta(key) == expected,
                 "{}: checkpoint of a model with {}={}, but this model has {}={}", path, key,
                 meta(key), key, expected);
  }
  // Every tensor present with its global shape before anything changes.
  for (int p = 0; p < gpt.num_params(); ++p) {
    for (const std::string prefix : {"", "adam.m.", "adam.v."}) {
      require(file, prefix + gpt.name(p), gpt.global_shape(p));
    }
  }
  const auto parse_int = [&](const std::string& key) {
    try {
      return std::stoll(meta(key));
    } catch (const std::exception&) {
      fail("{}: metadata '{}'='{}' is not a number", path, key, meta(key));
    }
  };
  CheckpointState state;
  state.step = parse_int("step");
  state.seed = static_cast<std::uint64_t>(parse_int("seed"));
  state.layout = file.metadata.count("layout") ? file.metadata.at("layout") : "";
  const std::int64_t adam_steps = parse_int("adam_steps");
  for (int p = 0; p < gpt.num_params(); ++p) {
    const auto i = static_cast<std::size_t>(p);
    gpt.scatter(p, file.tensors.at(gpt.name(p)), gpt.value(p));
    gpt.scatter(p, file.tensors.at("adam.m." + gpt.name(p)), optimizer.first_moments()[i]);
    gpt.scatter(p, file.tensors.at("adam.v." + gpt.name(p)), optimizer.second_moments()[i]);
  }
  optimizer.set_steps(adam_steps);
  return state;
}

}  // namespace meshtp::train
