#include "train/checkpoint.hpp"

#include <fmt/format.h>
#include <zlib.h>

#include <cmath>

namespace meshtp::train {
namespace {

constexpr const char* kCrcPrefix = "crc32.";
constexpr const char* kMetadataCrc = "crc32.__metadata__";

std::map<std::string, std::string> model_metadata(const model::GptConfig& c) {
  return {{"vocab", std::to_string(c.shape.vocab)},
          {"seq", std::to_string(c.shape.seq)},
          {"hidden", std::to_string(c.shape.hidden)},
          {"heads", std::to_string(c.shape.heads)},
          {"layers", std::to_string(c.shape.layers)}};
}

std::string crc_hex(std::span<const std::byte> bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  const auto* data = reinterpret_cast<const Bytef*>(bytes.data());
  std::size_t left = bytes.size();
  while (left > 0) {  // zlib takes uInt lengths
    const auto n = static_cast<uInt>(std::min<std::size_t>(left, 1u << 30));
    crc = crc32(crc, data, n);
    data += n;
    left -= n;
  }
  return fmt::format("{:08x}", crc);
}

std::string tensor_crc(const Tensor& t) { return crc_hex(std::as_bytes(t.values())); }

// An AdamW moment of parameter p, global on the host, from this rank's shard in the model's
// backend; and back.
Tensor gather_moment(const model::Gpt& gpt, int p, const device::Array& local) {
  return device::read_on_host(gpt.backend(), local,
                              [&](std::span<const float> shard) { return gpt.gather(p, shard); });
}
void scatter_moment(const model::Gpt& gpt, int p, const Tensor& global, device::Array& local) {
  device::edit_on_host(gpt.backend(), local,
                       [&](std::span<float> shard) { gpt.scatter(p, global, shard); });
}

// CRC of every metadata entry but the checksums themselves.
std::string metadata_crc(const std::map<std::string, std::string>& metadata) {
  std::string text;
  for (const auto& [key, value] : metadata) {  // std::map: sorted by key
    if (key.rfind(kCrcPrefix, 0) != 0) text += key + "=" + value + "\n";
  }
  return crc_hex(std::as_bytes(std::span<const char>(text.data(), text.size())));
}

const std::string& metadata_value(const SafetensorsFile& file, const std::string& key) {
  const auto it = file.metadata.find(key);
  MESHTP_CHECK(it != file.metadata.end(), "{}: not a meshtp checkpoint (no '{}' in its metadata)",
               file.path, key);
  return it->second;
}

std::uint64_t metadata_number(const SafetensorsFile& file, const std::string& key) {
  const std::string& text = metadata_value(file, key);
  try {
    std::size_t used = 0;
    const unsigned long long v = std::stoull(text, &used);
    if (used == text.size() && text.front() != '-') return v;
  } catch (const std::exception&) {
  }
  fail("{}: metadata '{}'='{}' is not a non-negative integer", file.path, key, text);
}

CheckpointState state_of(const SafetensorsFile& file) {
  CheckpointState state;
  state.step = static_cast<std::int64_t>(metadata_number(file, "step"));
  state.seed = metadata_number(file, "seed");
  state.layout = file.metadata.count("layout") ? file.metadata.at("layout") : "";
  return state;
}

}  // namespace

namespace {

// Named tensors as three messages: sizes, then [name length, rank, dims…] per tensor with
// the names' bytes, then every tensor's floats.
void send_tensors(const comm::Communicator& group, int dest,
                  const std::map<std::string, Tensor>& tensors) {
  std::vector<std::int64_t> header;
  std::vector<int> chars;
  std::vector<float> data;
  for (const auto& [name, t] : tensors) {
    header.push_back(static_cast<std::int64_t>(name.size()));
    header.push_back(static_cast<std::int64_t>(t.shape().size()));
    header.insert(header.end(), t.shape().begin(), t.shape().end());
    chars.insert(chars.end(), name.begin(), name.end());
    data.insert(data.end(), t.values().begin(), t.values().end());
  }
  const std::array<std::int64_t, 4> sizes{static_cast<std::int64_t>(tensors.size()),
                                          static_cast<std::int64_t>(header.size()),
                                          static_cast<std::int64_t>(chars.size()),
                                          static_cast<std::int64_t>(data.size())};
  group.send(std::span<const std::int64_t>(sizes), dest, 1);
  group.send(std::span<const std::int64_t>(header), dest, 2);
  group.send(std::span<const int>(chars), dest, 3);
  group.send(std::span<const float>(data), dest, 4);
}

void recv_tensors(const comm::Communicator& group, int source,
                  std::map<std::string, Tensor>& tensors) {
  std::array<std::int64_t, 4> sizes{};
  group.recv(std::span<std::int64_t>(sizes), source, 1);
  std::vector<std::int64_t> header(static_cast<std::size_t>(sizes[1]));
  std::vector<int> chars(static_cast<std::size_t>(sizes[2]));
  std::vector<float> data(static_cast<std::size_t>(sizes[3]));
  group.recv(std::span<std::int64_t>(header), source, 2);
  group.recv(std::span<int>(chars), source, 3);
  group.recv(std::span<float>(data), source, 4);
  std::size_t h = 0, c = 0, d = 0;
  for (std::int64_t i = 0; i < sizes[0]; ++i) {
    const auto length = static_cast<std::size_t>(header[h++]);
    const auto rank = static_cast<std::size_t>(header[h++]);
    const Shape shape(header.begin() + static_cast<std::ptrdiff_t>(h),
                      header.begin() + static_cast<std::ptrdiff_t>(h + rank));
    h += rank;
    const std::string name(chars.begin() + static_cast<std::ptrdiff_t>(c),
                           chars.begin() + static_cast<std::ptrdiff_t>(c + length));
    c += length;
    const auto n = static_cast<std::size_t>(numel(shape));
    tensors[name] = Tensor(shape, std::vector<float>(data.begin() + static_cast<std::ptrdiff_t>(d),
                                                     data.begin() + static_cast<std::ptrdiff_t>(d + n)));
    d += n;
  }
}

}  // namespace

void save_checkpoint(const std::string& path, const ModelParts& parts,
                     const CheckpointState& state, const comm::Communicator& world, int dp_rank,
                     const comm::Communicator& pipeline) {
  MESHTP_CHECK(!parts.empty(), "checkpoint '{}': no model to save", path);
  const model::Gpt& first = *parts.front().gpt;
  std::map<std::string, Tensor> tensors;
  if (dp_rank == 0) {  // replicas hold identical state; replica 0's TP ranks gather it
    for (const ModelPart& part : parts) {
      model::Gpt& gpt = *part.gpt;
      AdamW& optimizer = *part.optimizer;
      for (int p = 0; p < gpt.num_params(); ++p) {
        if (gpt.is_tied_embedding(p) && !gpt.has_embedding()) continue;  // stage 0's copy
        const std::string& name = gpt.name(p);
        const auto i = static_cast<std::size_t>(p);
        tensors[name] = gpt.gather_value(p);
        tensors["adam.m." + name] = gather_moment(gpt, p, optimizer.first_moments()[i]);
        tensors["adam.v." + name] = gather_moment(gpt, p, optimizer.second_moments()[i]);
      }
    }
    // The other stages' tensors travel to pipeline rank 0, from the first TP rank of each.
    if (pipeline.size() > 1 && first.mesh().rank() == 0) {
      if (pipeline.rank() > 0) {
        send_tensors(pipeline, 0, tensors);
      } else {
        for (int r = 1; r < pipeline.size(); ++r) recv_tensors(pipeline, r, tensors);
      }
    }
  }
  const AdamW& optimizer = *parts.front().optimizer;
  const model::Gpt& gpt = first;
  // Rank 0 writes; everyone learns whether it worked, so no rank goes on alone.
  int failed = 0;
  std::string reason;
  if (world.rank() == 0) {
    try {
      std::map<std::string, std::string> metadata = model_metadata(gpt.config());
      metadata["format"] = kCheckpointFormat;
      metadata["step"] = std::to_string(state.step);
      metadata["seed"] = std::to_string(state.seed);
      metadata["adam_steps"] = std::to_string(optimizer.steps());
      metadata["layout"] = state.layout;
      for (const auto& [name, t] : tensors) {
        for (const float x : t.values()) {
          MESHTP_CHECK(std::isfinite(x),
                       "tensor '{}' holds {} at step {}: a non-finite state is not saved, so "
                       "the last good checkpoint stays the latest",
                       name, x, state.step);
        }
        metadata[kCrcPrefix + name] = tensor_crc(t);
      }
      metadata[kMetadataCrc] = metadata_crc(metadata);
      save_safetensors(path, tensors, metadata);
    } catch (const Error& e) {
      failed = 1;
      reason = e.what();
    }
  }
  world.broadcast(std::span<int>(&failed, 1), 0);
  MESHTP_CHECK(!failed, "checkpoint '{}' not written{}", path,
               world.rank() == 0 ? ": " + reason : " (see rank 0)");
}

LoadedCheckpoint read_checkpoint(const std::string& path, const ModelParts& parts) {
  LoadedCheckpoint out;
  try {
    out.file = load_safetensors(path, {.convert_to_f32 = false});
  } catch (const Error& e) {
    throw CorruptCheckpoint(e.what());
  }
  const SafetensorsFile& file = out.file;
  const auto meta = [&](const std::string& key) -> const std::string& {
    return metadata_value(file, key);
  };
  const bool checksummed = file.metadata.count(kMetadataCrc) > 0;
  if (checksummed && meta(kMetadataCrc) != metadata_crc(file.metadata)) {
    throw CorruptCheckpoint(fmt::format("{}: the metadata's checksum is {}, but its contents "
                                        "hash to {}: the header was changed after writing",
                                        path, meta(kMetadataCrc), metadata_crc(file.metadata)));
  }
  const std::string& format = meta("format");
  MESHTP_CHECK(format == kCheckpointFormat || format == kCheckpointFormatUnverified,
               "{}: checkpoint format '{}', expected '{}'", path, format, kCheckpointFormat);
  if (format == kCheckpointFormat && !checksummed) {
    throw CorruptCheckpoint(fmt::format("{}: format {} but no '{}' in its metadata", path,
                                        format, kMetadataCrc));
  }
  for (const auto& [key, expected] : model_metadata(parts.front().gpt->config())) {
    MESHTP_CHECK(meta(key) == expected,
                 "{}: checkpoint of a model with {}={}, but this model has {}={}", path, key,
                 meta(key), key, expected);
  }
  // Every tensor present with its global shape and its checksum before anything changes.
  for (const ModelPart& part : parts) {
  const model::Gpt& gpt = *part.gpt;
  for (int p = 0; p < gpt.num_params(); ++p) {
    for (const std::string prefix : {"", "adam.m.", "adam.v."}) {
      const std::string name = prefix + gpt.name(p);
      const Tensor& t = require(file, name, gpt.global_shape(p));
      if (!checksummed) continue;
      const auto it = file.metadata.find(kCrcPrefix + name);
      if (it == file.metadata.end()) {
        throw CorruptCheckpoint(fmt::format("{}: no checksum for tensor '{}'", path, name));
      }
      const std::string actual = tensor_crc(t);
      if (actual != it->second) {
        throw CorruptCheckpoint(fmt::format("{}: tensor '{}' has checksum {}, but {} was written: "
                                            "its bytes changed after writing",
                                            path, name, actual, it->second));
      }
    }
  }
  }
  try {  // the header's checksum matched, so a bad number is damage, not another format
    out.state = state_of(file);
    out.adam_steps = static_cast<std::int64_t>(metadata_number(file, "adam_steps"));
  } catch (const Error& e) {
    throw CorruptCheckpoint(e.what());
  }
  out.state.verified = checksummed;
  return out;
}

void restore_checkpoint(const LoadedCheckpoint& checkpoint, const ModelParts& parts) {
  const SafetensorsFile& file = checkpoint.file;
  for (const ModelPart& part : parts) {
    model::Gpt& gpt = *part.gpt;
    AdamW& optimizer = *part.optimizer;
    for (int p = 0; p < gpt.num_params(); ++p) {
      const auto i = static_cast<std::size_t>(p);
      gpt.scatter_value(p, file.tensors.at(gpt.name(p)));
      scatter_moment(gpt, p, file.tensors.at("adam.m." + gpt.name(p)),
                     optimizer.first_moments()[i]);
      scatter_moment(gpt, p, file.tensors.at("adam.v." + gpt.name(p)),
                     optimizer.second_moments()[i]);
    }
    optimizer.set_steps(checkpoint.adam_steps);
  }
}

CheckpointState peek_checkpoint(const std::string& path) {
  return state_of(load_safetensors(path, {.convert_to_f32 = false, .metadata_only = true}));
}

}  // namespace meshtp::train
