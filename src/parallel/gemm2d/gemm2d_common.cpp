// Shared pieces of the 2D GeMM algorithms: blocked slicing, packing, chunk concatenation and the
// progress-poking local GeMM.
#include <algorithm>
#include <numeric>

#include "core/error.hpp"
#include "core/stats.hpp"
#include "parallel/gemm2d/gemm2d_impl.hpp"

namespace meshtp::parallel::detail {

std::int64_t slicing_block(std::int64_t d, int nr, int nc, const Gemm2dOptions& options) {
  if (options.block > 0) return options.block;
  return std::gcd(d / nr, d / nc) / options.params.slices;
}

// A slice's blocks and the packed message, as pairs of views; tensor/'s copy_blocks moves them
// as one operation (the simulated build's charged mode skips a slice as a whole).
namespace {
struct BlockPairs {
  std::vector<ConstMatrixView> from;
  std::vector<MatrixView> to;
  void add(ConstMatrixView f, MatrixView t) {
    from.push_back(f);
    to.push_back(t);
  }
  void copy() const { copy_blocks(from, to); }
};
}  // namespace

void pack_rows(ConstMatrixView x, const Slicing& sl, int s, float* out) {
  BlockPairs pairs;
  for (std::int64_t b = 0; b < sl.blocks_per_slice(); ++b)
    pairs.add(x.block(sl.block_start(s, b), 0, sl.block, x.cols),
              {out + b * sl.block * x.cols, sl.block, x.cols, x.cols});
  pairs.copy();
}

void unpack_rows(const float* in, const Slicing& sl, int s, MatrixView x) {
  BlockPairs pairs;
  for (std::int64_t b = 0; b < sl.blocks_per_slice(); ++b)
    pairs.add({in + b * sl.block * x.cols, sl.block, x.cols, x.cols},
              x.block(sl.block_start(s, b), 0, sl.block, x.cols));
  pairs.copy();
}

void pack_cols(ConstMatrixView x, const Slicing& sl, int s, float* out) {
  const MatrixView all{out, x.rows, sl.slice_extent(), sl.slice_extent()};
  BlockPairs pairs;
  for (std::int64_t b = 0; b < sl.blocks_per_slice(); ++b)
    pairs.add(x.block(0, sl.block_start(s, b), x.rows, sl.block),
              all.block(0, b * sl.block, x.rows, sl.block));
  pairs.copy();
}

void unpack_cols(const float* in, const Slicing& sl, int s, MatrixView x) {
  const ConstMatrixView all{in, x.rows, sl.slice_extent(), sl.slice_extent()};
  BlockPairs pairs;
  for (std::int64_t b = 0; b < sl.blocks_per_slice(); ++b)
    pairs.add(all.block(0, b * sl.block, x.rows, sl.block),
              x.block(0, sl.block_start(s, b), x.rows, sl.block));
  pairs.copy();
}

void concat_col_chunks(const float* in, int chunks, std::int64_t rows, std::int64_t width,
                       MatrixView dst) {
  MESHTP_CHECK(dst.rows == rows && dst.cols == chunks * width,
               "concat_col_chunks: {} chunks of {}x{} do not fill {}x{}", chunks, rows, width,
               dst.rows, dst.cols);
  BlockPairs pairs;
  for (int q = 0; q < chunks; ++q)
    pairs.add({in + q * rows * width, rows, width, width}, dst.block(0, q * width, rows, width));
  pairs.copy();
}

void gemm_poking(ConstMatrixView a, Trans ta, ConstMatrixView b, Trans tb, MatrixView c, float beta,
                 const InFlight& in_flight, int chunks, Gemm2dWorkspace& ws) {
  const double start = now_seconds();
  gemm_in_bands(a, ta, b, tb, c, beta, chunks, [&] { in_flight.poke(); });
  ws.stats.gemm_seconds += now_seconds() - start;
}

}  // namespace meshtp::parallel::detail
