#include "tensor/blocks.hpp"

#include <cstring>

#include "core/error.hpp"
#include "core/simulation.hpp"

namespace meshtp {
namespace {

struct Split {
  std::int64_t outer = 1;  // Π shape[:dim]
  std::int64_t run = 0;    // contiguous values of one chunk per outer index: (D/parts)·inner
};

Split split_along(const Shape& shape, int dim, int parts) {
  check_divisible(shape, dim, parts);
  Split s;
  std::int64_t inner = 1;
  for (int k = 0; k < static_cast<int>(shape.size()); ++k) {
    if (k < dim) s.outer *= shape[k];
    if (k > dim) inner *= shape[k];
  }
  s.run = shape[dim] / parts * inner;
  return s;
}

// Copies `outer` runs of `run` floats between two strided layouts.
void copy_runs(const float* src, std::int64_t src_stride, float* dst, std::int64_t dst_stride,
               const Split& s) {
  for (std::int64_t o = 0; o < s.outer; ++o) {
    std::memcpy(dst + o * dst_stride, src + o * src_stride,
                static_cast<std::size_t>(s.run) * sizeof(float));
  }
}

std::size_t bytes_of(std::int64_t numel) { return static_cast<std::size_t>(numel) * sizeof(float); }

}  // namespace

void check_divisible(const Shape& shape, int dim, int parts) {
  MESHTP_CHECK(dim >= 0 && dim < static_cast<int>(shape.size()),
               "tensor dim {} does not exist in shape {}", dim, to_string(shape));
  MESHTP_CHECK(parts > 0 && shape[dim] % parts == 0,
               "tensor dim {} of size {} (shape {}) does not split into {} equal parts", dim,
               shape[dim], to_string(shape), parts);
}

Tensor chunk(const Tensor& t, int dim, int parts, int index) {
  const Split s = split_along(t.shape(), dim, parts);
  MESHTP_CHECK(index >= 0 && index < parts, "chunk {} of {} does not exist", index, parts);
  Shape part_shape = t.shape();
  part_shape[dim] /= parts;
  Tensor out(part_shape);
  if (simhooks::skip_values(bytes_of(out.numel()))) return out;
  copy_runs(t.data() + index * s.run, s.run * parts, out.data(), s.run, s);
  return out;
}

void write_chunk(Tensor& whole, int dim, int parts, int index, const Tensor& part) {
  const Split s = split_along(whole.shape(), dim, parts);
  MESHTP_CHECK(index >= 0 && index < parts, "chunk {} of {} does not exist", index, parts);
  MESHTP_CHECK(part.numel() == s.outer * s.run, "chunk of shape {} does not fit {} along dim {}",
               to_string(part.shape()), to_string(whole.shape()), dim);
  if (simhooks::skip_values(bytes_of(part.numel()))) return;
  copy_runs(part.data(), s.run, whole.data() + index * s.run, s.run * parts, s);
}

void pack_chunks(const Tensor& t, int dim, int parts, std::span<float> out) {
  const Split s = split_along(t.shape(), dim, parts);
  MESHTP_CHECK(static_cast<std::int64_t>(out.size()) == t.numel(),
               "pack buffer holds {} values, tensor {} has {}", out.size(),
               to_string(t.shape()), t.numel());
  if (simhooks::skip_values(bytes_of(t.numel()))) return;
  const std::int64_t chunk_numel = s.outer * s.run;
  for (int c = 0; c < parts; ++c) {
    copy_runs(t.data() + c * s.run, s.run * parts, out.data() + c * chunk_numel, s.run, s);
  }
}

Tensor unpack_chunks(std::span<const float> in, const Shape& chunk_shape, int dim, int parts) {
  MESHTP_CHECK(dim >= 0 && dim < static_cast<int>(chunk_shape.size()),
               "tensor dim {} does not exist in shape {}", dim, to_string(chunk_shape));
  Shape whole_shape = chunk_shape;
  whole_shape[dim] *= parts;
  const std::int64_t chunk_numel = numel(chunk_shape);
  MESHTP_CHECK(static_cast<std::int64_t>(in.size()) == chunk_numel * parts,
               "unpack of {} values into {} chunks of shape {}", in.size(), parts,
               to_string(chunk_shape));
  Tensor out(whole_shape);
  const Split s = split_along(whole_shape, dim, parts);
  if (simhooks::skip_values(bytes_of(out.numel()))) return out;
  for (int c = 0; c < parts; ++c) {
    copy_runs(in.data() + c * chunk_numel, s.run, out.data() + c * s.run, s.run * parts, s);
  }
  return out;
}

}  // namespace meshtp
