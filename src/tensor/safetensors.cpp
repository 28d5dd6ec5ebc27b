// safetensors load/save; the format and the error policy are described in safetensors.hpp.
//
// Load runs in three passes so that a corrupt file fails before anything large is allocated:
//   1. header   length field, JSON syntax, one entry per tensor with its fields and dtype
//   2. layout   each entry's bytes match its shape, lie inside the file, and together the
//               entries tile the data section (sorted by offset: no overlap, no gap)
//   3. data     each tensor is read straight into its fp32 buffer (converted if needed)
#include "tensor/safetensors.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/json_limits.hpp"

namespace meshtp {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; this loader copies bytes as they are");

using Json = nlohmann::json;

constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;  // the reference implementation's limit
constexpr const char* kMetadataKey = "__metadata__";

enum class Dtype { kF32, kF16, kBF16, kF64 };

struct DtypeInfo {
  Dtype dtype;
  const char* name;
  std::uint64_t size;  // bytes per element
};

constexpr DtypeInfo kDtypes[] = {
    {Dtype::kF32, "F32", 4},
    {Dtype::kF16, "F16", 2},
    {Dtype::kBF16, "BF16", 2},
    {Dtype::kF64, "F64", 8},
};

const DtypeInfo* find_dtype(const std::string& name) {
  for (const DtypeInfo& info : kDtypes) {
    if (name == info.name) return &info;
  }
  return nullptr;
}

// One tensor's header entry, validated field by field.
struct Entry {
  std::string name;
  const DtypeInfo* dtype = nullptr;
  Shape shape;
  std::uint64_t bytes = 0;  // numel(shape) × dtype size
  std::uint64_t begin = 0;  // [begin, end) within the data section
  std::uint64_t end = 0;
};

// A JSON value shortened for an error message.
std::string excerpt(const Json& value) {
  std::string text = value.dump();
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

const Json& field(const std::string& path, const std::string& name, const Json& entry,
                  const char* key) {
  const auto it = entry.find(key);
  if (it == entry.end()) fail("{}: tensor '{}' has no \"{}\" in the header", path, name, key);
  return *it;
}

Entry parse_entry(const std::string& path, const std::string& name, const Json& value,
                  const SafetensorsLoadOptions& options) {
  MESHTP_CHECK(value.is_object(), "{}: tensor '{}' is {} in the header, expected an object", path,
               name, excerpt(value));
  Entry entry;
  entry.name = name;

  const Json& dtype = field(path, name, value, "dtype");
  MESHTP_CHECK(dtype.is_string(), "{}: tensor '{}' has dtype {}, expected a string like \"F32\"",
               path, name, excerpt(dtype));
  const std::string dtype_name = dtype.get<std::string>();
  entry.dtype = find_dtype(dtype_name);
  MESHTP_CHECK(entry.dtype != nullptr,
               "{}: tensor '{}' has dtype {}; meshtp reads F32, and converts F16, BF16 and F64",
               path, name, dtype_name);
  MESHTP_CHECK(options.convert_to_f32 || entry.dtype->dtype == Dtype::kF32,
               "{}: tensor '{}' has dtype {}, expected F32 (conversion is turned off)", path, name,
               dtype_name);

  const Json& shape = field(path, name, value, "shape");
  MESHTP_CHECK(shape.is_array(), "{}: tensor '{}' has shape {}, expected an array of sizes", path,
               name, excerpt(shape));
  std::uint64_t count = 1;
  bool overflow = false;
  for (const Json& dim : shape) {
    MESHTP_CHECK(dim.is_number_unsigned() &&
                     dim.get<std::uint64_t>() <=
                         static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()),
                 "{}: tensor '{}' has shape {}, expected non-negative integer sizes", path, name,
                 excerpt(shape));
    entry.shape.push_back(dim.get<std::int64_t>());
    overflow |= __builtin_mul_overflow(count, dim.get<std::uint64_t>(), &count);
  }
  overflow |= __builtin_mul_overflow(count, entry.dtype->size, &entry.bytes);
  MESHTP_CHECK(!overflow, "{}: tensor '{}' has shape {}, too large to address", path, name,
               to_string(entry.shape));

  const Json& offsets = field(path, name, value, "data_offsets");
  MESHTP_CHECK(offsets.is_array() && offsets.size() == 2 && offsets[0].is_number_unsigned() &&
                   offsets[1].is_number_unsigned(),
               "{}: tensor '{}' has data_offsets {}, expected [begin, end]", path, name,
               excerpt(offsets));
  entry.begin = offsets[0].get<std::uint64_t>();
  entry.end = offsets[1].get<std::uint64_t>();
  MESHTP_CHECK(entry.begin <= entry.end,
               "{}: tensor '{}' has data_offsets [{}, {}), which end before they begin", path, name,
               entry.begin, entry.end);
  MESHTP_CHECK(entry.end - entry.begin == entry.bytes,
               "{}: tensor '{}' of shape {} and dtype {} needs {} bytes, but its data_offsets "
               "[{}, {}) hold {}",
               path, name, to_string(entry.shape), dtype_name, entry.bytes, entry.begin, entry.end,
               entry.end - entry.begin);
  return entry;
}

// Pass 1: the header. Returns the entries (unsorted) and fills `metadata`.
std::vector<Entry> parse_header(const std::string& path, const std::string& text,
                                const SafetensorsLoadOptions& options,
                                std::map<std::string, std::string>& metadata) {
  // A repeated name is ambiguous (JSON parsers silently keep one of them), so it is an error.
  std::set<std::string> seen;
  std::string duplicate;
  const Json::parser_callback_t note_keys = [&](int depth, Json::parse_event_t event,
                                                Json& parsed) {
    if (event == Json::parse_event_t::key && depth == 1 &&
        !seen.insert(parsed.get<std::string>()).second && duplicate.empty()) {
      duplicate = parsed.get<std::string>();
    }
    return true;
  };
  check_json_depth(text, "the header of " + path);
  Json header;
  try {
    header = Json::parse(text, note_keys);
  } catch (const Json::exception& e) {
    fail("{}: the {}-byte header is not valid JSON: {}", path, text.size(), e.what());
  }
  MESHTP_CHECK(header.is_object(), "{}: the header is {}, expected a JSON object", path,
               excerpt(header));
  MESHTP_CHECK(duplicate.empty(), "{}: '{}' appears more than once in the header", path, duplicate);

  std::vector<Entry> entries;
  for (const auto& [key, value] : header.items()) {
    if (key == kMetadataKey) {
      MESHTP_CHECK(value.is_object(), "{}: {} is {}, expected an object of strings", path,
                   kMetadataKey, excerpt(value));
      for (const auto& [mkey, mvalue] : value.items()) {
        MESHTP_CHECK(mvalue.is_string(), "{}: metadata '{}' is {}, expected a string", path, mkey,
                     excerpt(mvalue));
        metadata[mkey] = mvalue.get<std::string>();
      }
    } else {
      entries.push_back(parse_entry(path, key, value, options));
    }
  }
  return entries;
}

// Pass 2: the entries must tile [0, data_bytes) exactly. Sorts `entries` by offset.
void check_layout(const std::string& path, std::vector<Entry>& entries, std::uint64_t data_bytes) {
  for (const Entry& e : entries) {
    MESHTP_CHECK(e.end <= data_bytes,
                 "{}: tensor '{}' data [{}, {}) extends past the end of the file ({} bytes of "
                 "data)",
                 path, e.name, e.begin, e.end, data_bytes);
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  std::uint64_t covered = 0;  // [0, covered) belongs to the tensors seen so far
  const Entry* previous = nullptr;
  for (const Entry& e : entries) {
    if (e.begin < covered) {
      fail("{}: tensors '{}' data [{}, {}) and '{}' data [{}, {}) overlap", path, previous->name,
           previous->begin, previous->end, e.name, e.begin, e.end);
    }
    MESHTP_CHECK(e.begin == covered,
                 "{}: data bytes [{}, {}) before tensor '{}' belong to no tensor", path, covered,
                 e.begin, e.name);
    covered = e.end;
    previous = &e;
  }
  MESHTP_CHECK(covered == data_bytes,
               "{}: data bytes [{}, {}) at the end of the file belong to no tensor", path, covered,
               data_bytes);
}

// IEEE binary16 → binary32, exact (every half is a float).
float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  const std::uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {  // zero or subnormal: mantissa × 2^-24
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return std::bit_cast<float>(sign | std::bit_cast<std::uint32_t>(magnitude));
  }
  if (exponent == 0x1f) {  // inf or NaN (payload kept)
    return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  }
  return std::bit_cast<float>(sign | ((exponent + 127 - 15) << 23) | (mantissa << 13));
}

// bfloat16 is the top half of a binary32.
float bfloat_to_float(std::uint16_t b) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

template <typename Raw>
std::vector<Raw> read_raw(const InputFile& file, std::int64_t offset, std::int64_t count) {
  std::vector<Raw> raw(static_cast<std::size_t>(count));
  file.read_at(offset, std::as_writable_bytes(std::span<Raw>(raw)));
  return raw;
}

// Pass 3: one tensor's bytes, converted to fp32.
Tensor read_tensor(const InputFile& file, std::int64_t data_start, const Entry& e) {
  Tensor t(e.shape);
  const std::int64_t offset = data_start + static_cast<std::int64_t>(e.begin);
  switch (e.dtype->dtype) {
    case Dtype::kF32:
      file.read_at(offset, std::as_writable_bytes(t.values()));
      break;
    case Dtype::kF16: {
      const auto raw = read_raw<std::uint16_t>(file, offset, t.numel());
      std::transform(raw.begin(), raw.end(), t.data(), half_to_float);
      break;
    }
    case Dtype::kBF16: {
      const auto raw = read_raw<std::uint16_t>(file, offset, t.numel());
      std::transform(raw.begin(), raw.end(), t.data(), bfloat_to_float);
      break;
    }
    case Dtype::kF64: {
      const auto raw = read_raw<double>(file, offset, t.numel());
      for (std::size_t i = 0; i < raw.size(); ++i) {
        MESHTP_CHECK(!(std::abs(raw[i]) > std::numeric_limits<float>::max()) || std::isinf(raw[i]),
                     "{}: tensor '{}' (F64) element {} = {} is outside the fp32 range", file.path(),
                     e.name, i, raw[i]);
        t[static_cast<std::int64_t>(i)] = static_cast<float>(raw[i]);
      }
      break;
    }
  }
  return t;
}

}  // namespace

SafetensorsFile load_safetensors(const std::string& path, const SafetensorsLoadOptions& options) {
  const InputFile file(path);
  const std::uint64_t file_bytes = static_cast<std::uint64_t>(file.size());
  MESHTP_CHECK(file_bytes >= 8,
               "{}: the file is {} bytes long, too short for a safetensors file (which starts "
               "with an 8-byte header length)",
               path, file_bytes);
  std::uint64_t header_bytes = 0;
  file.read_at(0, std::as_writable_bytes(std::span<std::uint64_t>(&header_bytes, 1)));
  MESHTP_CHECK(header_bytes <= file_bytes - 8,
               "{}: header length {} extends past the end of the file ({} bytes after the "
               "length field); is this a safetensors file?",
               path, header_bytes, file_bytes - 8);
  MESHTP_CHECK(header_bytes <= kMaxHeaderBytes,
               "{}: header length {} exceeds the format's limit of {} bytes", path, header_bytes,
               kMaxHeaderBytes);
  std::string text(static_cast<std::size_t>(header_bytes), '\0');
  file.read_at(8, std::as_writable_bytes(std::span<char>(text.data(), text.size())));

  SafetensorsFile result;
  result.path = path;
  std::vector<Entry> entries = parse_header(path, text, options, result.metadata);
  const std::int64_t data_start = 8 + static_cast<std::int64_t>(header_bytes);
  check_layout(path, entries, file_bytes - 8 - header_bytes);
  if (options.metadata_only) return result;
  for (const Entry& e : entries) result.tensors.emplace(e.name, read_tensor(file, data_start, e));
  return result;
}

void save_safetensors(const std::string& path, const std::map<std::string, const Tensor*>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  // ordered_json keeps insertion order: __metadata__ first, then tensors by name, each entry
  // as dtype, shape, data_offsets — the layout of the reference serializer.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  std::uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    MESHTP_CHECK(!name.empty(), "cannot save '{}': a tensor has an empty name", path);
    MESHTP_CHECK(name != kMetadataKey, "cannot save '{}': '{}' names the metadata, not a tensor",
                 path, name);
    MESHTP_CHECK(t != nullptr, "cannot save '{}': tensor '{}' is null", path, name);
    MESHTP_CHECK(t->numel() == numel(t->shape()),
                 "cannot save '{}': tensor '{}' has shape {} but {} values (default-constructed?)",
                 path, name, to_string(t->shape()), t->numel());
    const std::uint64_t bytes = static_cast<std::uint64_t>(t->numel()) * sizeof(float);
    nlohmann::ordered_json entry = nlohmann::ordered_json::object();
    entry["dtype"] = "F32";
    entry["shape"] = t->shape();
    entry["data_offsets"] = nlohmann::ordered_json::array({offset, offset + bytes});
    header[name] = std::move(entry);
    offset += bytes;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::ordered_json::exception& e) {
    fail("cannot save '{}': a tensor name or metadata string is not valid UTF-8 ({})", path,
         e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');  // the data section starts 8-byte aligned
  const std::uint64_t header_bytes = text.size();

  AtomicFileWriter writer(path);
  writer.write(std::as_bytes(std::span<const std::uint64_t>(&header_bytes, 1)));
  writer.write(text);
  for (const auto& [name, t] : tensors) writer.write(std::as_bytes(t->values()));
  writer.commit();
}

void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  std::map<std::string, const Tensor*> refs;
  for (const auto& [name, t] : tensors) refs.emplace(name, &t);
  save_safetensors(path, refs, metadata);
}

const Tensor& require(const SafetensorsFile& file, const std::string& name,
                      const std::optional<Shape>& expected_shape) {
  const auto it = file.tensors.find(name);
  if (it == file.tensors.end()) {
    constexpr std::size_t kMaxListed = 20;
    std::string names;
    std::size_t listed = 0;
    for (const auto& [other, t] : file.tensors) {
      if (listed == kMaxListed) {
        names += fmt::format(", … ({} more)", file.tensors.size() - kMaxListed);
        break;
      }
      names += (listed++ ? ", " : "") + other;
    }
    if (file.tensors.empty())
      fail("missing tensor '{}' in {} (it has no tensors)", name, file.path);
    fail("missing tensor '{}' in {} (it has: {})", name, file.path, names);
  }
  MESHTP_CHECK(!expected_shape || it->second.shape() == *expected_shape,
               "tensor '{}' in {} has shape {}, expected {}", name, file.path,
               to_string(it->second.shape()), to_string(*expected_shape));
  return it->second;
}

}  // namespace meshtp
