// Shared pieces of the 2D GeMM algorithms: blocked slicing, packing, chunk concatenation and the
// progress-poking local GeMM.
#include <algorithm>
#include <numeric>

#include "core/error.hpp"
#include "core/simulation.hpp"
#include "core/stats.hpp"
#include "parallel/gemm2d/gemm2d_impl.hpp"

namespace meshtp::parallel::detail {

// A slice's values, or a row of chunks (simulated build, charged mode: moved as a whole or not
// at all — core/simulation.hpp's skip_values — though it is copied a block at a time).
namespace {
bool skip(std::int64_t rows, std::int64_t cols) {
  return simhooks::skip_values(static_cast<std::size_t>(rows * cols) * sizeof(float));
}
}  // namespace

std::int64_t slicing_block(std::int64_t d, int nr, int nc, const Gemm2dOptions& options) {
  if (options.block > 0) return options.block;
  return std::gcd(d / nr, d / nc) / options.slices;
}

void pack_rows(ConstMatrixView x, const Slicing& sl, int s, float* out) {
  if (skip(sl.slice_extent(), x.cols)) return;
  const std::int64_t nb = sl.blocks_per_slice();
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::int64_t r0 = sl.block_start(s, b);
    MatrixView dst{out + b * sl.block * x.cols, sl.block, x.cols, x.cols};
    copy(x.block(r0, 0, sl.block, x.cols), dst);
  }
}

void unpack_rows(const float* in, const Slicing& sl, int s, MatrixView x) {
  if (skip(sl.slice_extent(), x.cols)) return;
  const std::int64_t nb = sl.blocks_per_slice();
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::int64_t r0 = sl.block_start(s, b);
    const ConstMatrixView src{in + b * sl.block * x.cols, sl.block, x.cols, x.cols};
    copy(src, x.block(r0, 0, sl.block, x.cols));
  }
}

void pack_cols(ConstMatrixView x, const Slicing& sl, int s, float* out) {
  if (skip(x.rows, sl.slice_extent())) return;
  const std::int64_t nb = sl.blocks_per_slice();
  const MatrixView all{out, x.rows, sl.slice_extent(), sl.slice_extent()};
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::int64_t c0 = sl.block_start(s, b);
    copy(x.block(0, c0, x.rows, sl.block), all.block(0, b * sl.block, x.rows, sl.block));
  }
}

void unpack_cols(const float* in, const Slicing& sl, int s, MatrixView x) {
  if (skip(x.rows, sl.slice_extent())) return;
  const std::int64_t nb = sl.blocks_per_slice();
  const ConstMatrixView all{in, x.rows, sl.slice_extent(), sl.slice_extent()};
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::int64_t c0 = sl.block_start(s, b);
    copy(all.block(0, b * sl.block, x.rows, sl.block), x.block(0, c0, x.rows, sl.block));
  }
}

void concat_col_chunks(const float* in, int chunks, std::int64_t rows, std::int64_t width,
                       MatrixView dst) {
  MESHTP_CHECK(dst.rows == rows && dst.cols == chunks * width,
               "concat_col_chunks: {} chunks of {}x{} do not fill {}x{}", chunks, rows, width,
               dst.rows, dst.cols);
  if (skip(dst.rows, dst.cols)) return;
  for (int q = 0; q < chunks; ++q) {
    const ConstMatrixView chunk{in + q * rows * width, rows, width, width};
    copy(chunk, dst.block(0, q * width, rows, width));
  }
}

void add_into(ConstMatrixView x, MatrixView y) {
  MESHTP_CHECK(x.rows == y.rows && x.cols == y.cols, "add_into: {}x{} vs {}x{}", x.rows, x.cols,
               y.rows, y.cols);
  // Free in charged mode, like a copy: the planner prices it as part of the GeMM (beta = 1).
  if (skip(x.rows, x.cols)) return;
  for (std::int64_t r = 0; r < x.rows; ++r) {
    const float* xr = x.data + r * x.ld;
    float* yr = y.data + r * y.ld;
    for (std::int64_t q = 0; q < x.cols; ++q) yr[q] += xr[q];
  }
}

void gemm_poking(ConstMatrixView a, Trans ta, ConstMatrixView b, Trans tb, MatrixView c, float beta,
                 const InFlight& in_flight, int chunks, Gemm2dWorkspace& ws) {
  const double start = now_seconds();
  simhooks::charge_step_overhead();
  const std::int64_t bands = std::clamp<std::int64_t>(chunks, 1, std::max<std::int64_t>(c.rows, 1));
  for (std::int64_t p = 0; p < bands; ++p) {
    const std::int64_t r0 = c.rows * p / bands;
    const std::int64_t r1 = c.rows * (p + 1) / bands;
    const ConstMatrixView a_band =
        ta == Trans::kNo ? a.block(r0, 0, r1 - r0, a.cols) : a.block(0, r0, a.rows, r1 - r0);
    gemm(a_band, ta, b, tb, c.block(r0, 0, r1 - r0, c.cols), 1.0f, beta);
    if (p + 1 < bands) in_flight.poke();
  }
  ws.stats.gemm_seconds += now_seconds() - start;
}

}  // namespace meshtp::parallel::detail
