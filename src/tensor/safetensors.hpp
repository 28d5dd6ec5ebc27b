// Load and save global tensors in the safetensors format: weights made by PyTorch load
// directly, weights saved on one mesh load on another, and checkpoints are plain files that
// Python can read back with `safetensors.torch.load_file`.
//
// Format (all integers little-endian):
//
//   bytes [0, 8)          N, a u64: the length of the JSON header
//   bytes [8, 8+N)        UTF-8 JSON object, optionally padded with trailing spaces:
//                           {"__metadata__": {"step": "100"},                  (optional)
//                            "w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
//                            "b": {"dtype": "F32", "shape": [3],    "data_offsets": [24, 36]}}
//   bytes [8+N, end)      the data section; a tensor's bytes are [8+N+begin, 8+N+end),
//                         row-major, end − begin = numel(shape) × sizeof(dtype)
//
// As in the reference implementation, the tensors must tile the data section exactly: no
// overlaps, no gaps, nothing after the last tensor. Entries may appear in any order.
//
// Save writes F32 only, in the reference serializer's layout (`__metadata__` first, tensors
// by name, data in the same order, header padded with spaces to a multiple of 8 so the data
// starts 8-byte aligned), through AtomicFileWriter: a failed save leaves the old file.
//
// Load reads F32 as is and, unless told otherwise, converts F16, BF16 and F64 to fp32
// (PyTorch's common dtypes; an F64 value outside the fp32 range is an error, not an inf).
// Everything else in the file is validated before any tensor is allocated; every error is a
// meshtp::Error that starts with the path and names the tensor and the numbers, e.g.
//   "w.safetensors: tensor 'layers.0.attn.qkv.weight' data [0, 4096) extends past the end
//    of the file (3000 bytes of data)"
#pragma once

#include <map>
#include <optional>
#include <string>

#include "tensor/tensor.hpp"

namespace meshtp {

struct SafetensorsFile {
  std::string path;  // where it was read from, for error messages
  std::map<std::string, Tensor> tensors;
  std::map<std::string, std::string> metadata;  // the header's "__metadata__"
};

struct SafetensorsLoadOptions {
  // false: anything but F32 is an error (checkpoints, which must restore bit-for-bit).
  bool convert_to_f32 = true;
  // true: read and check the header and the layout only; `tensors` stays empty.
  bool metadata_only = false;
};

SafetensorsFile load_safetensors(const std::string& path,
                                 const SafetensorsLoadOptions& options = {});

// Tensor names must be non-empty and not "__metadata__".
void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata = {});
// The same, for tensors that live elsewhere (a model's parameters): no copies are made.
void save_safetensors(const std::string& path, const std::map<std::string, const Tensor*>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// The tensor called `name`, checked against `expected_shape` when given. Throws
//   "missing tensor 'x' in FILE (it has: a, b, c)"
//   "tensor 'x' in FILE has shape [2, 3], expected [3, 2]"
const Tensor& require(const SafetensorsFile& file, const std::string& name,
                      const std::optional<Shape>& expected_shape = std::nullopt);

}  // namespace meshtp
