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

// A slice's blocks and the packed message, as pairs of views, moved by the backend as one
// operation (the simulated build's charged mode skips a slice as a whole).
namespace {
struct BlockPairs {
  std::vector<View> from, to;
  void add(const View& f, const View& t) {
    from.push_back(f);
    to.push_back(t);
  }
  void copy(Gemm2dWorkspace& ws) const { ws.backend().copy_blocks(to, from); }
};
}  // namespace

void pack_rows(Gemm2dWorkspace& ws, const View& x, const Slicing& sl, int s, const View& out) {
  BlockPairs pairs;
  for (std::int64_t b = 0; b < sl.blocks_per_slice(); ++b)
    pairs.add(x.block(sl.block_start(s, b), 0, sl.block, x.cols),
              out.block(b * sl.block, 0, sl.block, x.cols));
  pairs.copy(ws);
}

void unpack_rows(Gemm2dWorkspace& ws, const View& in, const Slicing& sl, int s, const View& x) {
  BlockPairs pairs;
  for (std::int64_t b = 0; b < sl.blocks_per_slice(); ++b)
    pairs.add(in.block(b * sl.block, 0, sl.block, x.cols),
              x.block(sl.block_start(s, b), 0, sl.block, x.cols));
  pairs.copy(ws);
}

void pack_cols(Gemm2dWorkspace& ws, const View& x, const Slicing& sl, int s, const View& out) {
  BlockPairs pairs;
  for (std::int64_t b = 0; b < sl.blocks_per_slice(); ++b)
    pairs.add(x.block(0, sl.block_start(s, b), x.rows, sl.block),
              out.block(0, b * sl.block, x.rows, sl.block));
  pairs.copy(ws);
}

void unpack_cols(Gemm2dWorkspace& ws, const View& in, const Slicing& sl, int s, const View& x) {
  BlockPairs pairs;
  for (std::int64_t b = 0; b < sl.blocks_per_slice(); ++b)
    pairs.add(in.block(0, b * sl.block, x.rows, sl.block),
              x.block(0, sl.block_start(s, b), x.rows, sl.block));
  pairs.copy(ws);
}

void concat_col_chunks(Gemm2dWorkspace& ws, const View& in, int chunks, std::int64_t rows,
                       std::int64_t width, const View& dst) {
  MESHTP_CHECK(dst.rows == rows && dst.cols == chunks * width,
               "concat_col_chunks: {} chunks of {}x{} do not fill {}x{}", chunks, rows, width,
               dst.rows, dst.cols);
  const View all = reshape(in, chunks * rows, width);
  BlockPairs pairs;
  for (int q = 0; q < chunks; ++q)
    pairs.add(all.block(q * rows, 0, rows, width), dst.block(0, q * width, rows, width));
  pairs.copy(ws);
}

void gemm_poking(const View& a, Trans ta, const View& b, Trans tb, const View& c, float beta,
                 const InFlight& in_flight, int chunks, Gemm2dWorkspace& ws) {
  const double start = now_seconds();
  ws.backend().gemm_in_bands(c, a, ta, b, tb, beta, chunks, [&] { in_flight.poke(); });
  ws.stats.gemm_seconds += now_seconds() - start;
}

}  // namespace meshtp::parallel::detail
