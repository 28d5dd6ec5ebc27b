#include "parallel/activation_shard.hpp"

#include <vector>

#include "core/error.hpp"

namespace meshtp::parallel {
namespace {

// Global row of local row r.
std::int64_t global_row(std::int64_t r, std::int64_t rows, const ActivationShard& s) {
  const std::int64_t nc = rows / s.chunks;
  const std::int64_t block = nc / s.row_parts;
  return (r / block) * nc + s.row_index * block + r % block;
}

}  // namespace

void check_activation_shard(std::int64_t rows, std::int64_t cols, const ActivationShard& s) {
  MESHTP_CHECK(s.chunks >= 1 && rows % s.chunks == 0, "rows={} is not divisible by chunks={}",
               rows, s.chunks);
  MESHTP_CHECK(s.row_parts >= 1 && (rows / s.chunks) % s.row_parts == 0,
               "chunk rows {} are not divisible by {} row blocks", rows / s.chunks, s.row_parts);
  MESHTP_CHECK(s.col_parts >= 1 && cols % s.col_parts == 0,
               "cols={} is not divisible by {} column blocks", cols, s.col_parts);
  MESHTP_CHECK(s.row_index >= 0 && s.row_index < s.row_parts && s.col_index >= 0 &&
                   s.col_index < s.col_parts,
               "block ({}, {}) outside {}x{} blocks", s.row_index, s.col_index, s.row_parts,
               s.col_parts);
}

void slice_activation(ConstMatrixView global, const ActivationShard& s, MatrixView local) {
  check_activation_shard(global.rows, global.cols, s);
  const std::int64_t lr = global.rows / s.row_parts, lc = global.cols / s.col_parts;
  MESHTP_CHECK(local.rows == lr && local.cols == lc,
               "slice_activation: local is {}x{}, the block of {}x{} is {}x{}", local.rows,
               local.cols, global.rows, global.cols, lr, lc);
  for (std::int64_t r = 0; r < lr; ++r) {
    const float* src = global.data + global_row(r, global.rows, s) * global.ld + s.col_index * lc;
    float* dst = local.data + r * local.ld;
    for (std::int64_t c = 0; c < lc; ++c) dst[c] = src[c];
  }
}

Tensor gather_activation(const comm::Communicator& comm, ConstMatrixView local,
                         std::int64_t rows, std::int64_t cols, const ActivationShard& s) {
  Tensor out({rows, cols});
  gather_activation_into(comm, local, out.matrix(), s);
  return out;
}

void gather_activation_into(const comm::Communicator& comm, ConstMatrixView local,
                            MatrixView out, const ActivationShard& s) {
  const std::int64_t rows = out.rows, cols = out.cols;
  check_activation_shard(rows, cols, s);
  MESHTP_CHECK(out.contiguous(), "gather_activation: the output must be contiguous");
  if (s.row_parts == 1 && s.col_parts == 1) {
    MESHTP_CHECK(local.rows == rows && local.cols == cols,
                 "gather_activation: local is {}x{}, the whole is {}x{}", local.rows, local.cols,
                 rows, cols);
    copy(local, out);
    return;
  }
  const std::int64_t lr = rows / s.row_parts, lc = cols / s.col_parts;
  MESHTP_CHECK(local.rows == lr && local.cols == lc,
               "gather_activation: local is {}x{}, the block of {}x{} is {}x{}", local.rows,
               local.cols, rows, cols, lr, lc);
  const int P = comm.size();
  std::vector<float> mine(static_cast<std::size_t>(lr * lc));
  for (std::int64_t r = 0; r < lr; ++r) {
    for (std::int64_t c = 0; c < lc; ++c) mine[static_cast<std::size_t>(r * lc + c)] = local(r, c);
  }
  std::vector<float> all(mine.size() * static_cast<std::size_t>(P));
  comm.all_gather(std::span<const float>(mine), std::span<float>(all));
  const int desc[5] = {s.chunks, s.row_parts, s.row_index, s.col_parts, s.col_index};
  std::vector<int> descs(static_cast<std::size_t>(5 * P));
  comm.all_gather(std::span<const int>(desc), std::span<int>(descs));
  std::vector<char> written(static_cast<std::size_t>(rows * cols), 0);
  for (int p = 0; p < P; ++p) {
    const int* d = descs.data() + 5 * p;
    const ActivationShard sp{d[0], d[1], d[2], d[3], d[4]};
    MESHTP_CHECK(sp.chunks == s.chunks && sp.row_parts == s.row_parts &&
                     sp.col_parts == s.col_parts,
                 "gather_activation: rank {} splits {}x{} in {} chunks, rank {} in {}x{} in {}",
                 p, sp.row_parts, sp.col_parts, sp.chunks, comm.rank(), s.row_parts,
                 s.col_parts, s.chunks);
    const float* block = all.data() + static_cast<std::int64_t>(p) * lr * lc;
    for (std::int64_t r = 0; r < lr; ++r) {
      const std::int64_t g = global_row(r, rows, sp) * cols + sp.col_index * lc;
      for (std::int64_t c = 0; c < lc; ++c) {
        if (written[static_cast<std::size_t>(g + c)]) continue;
        written[static_cast<std::size_t>(g + c)] = 1;
        out.data[g + c] = block[r * lc + c];
      }
    }
  }
}

}  // namespace meshtp::parallel
