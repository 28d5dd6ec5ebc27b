// Private to gemm2d/: what the five algorithm files share.
//
//   Grid        this rank's place on the Nr × Nc mesh and its row / column communicators
//   Slicing     MeshSlice's blocked slicing of one local extent (see meshslice.cpp)
//   pack / unpack of a slice of rows or columns; gathered column chunks laid side by side
//   gemm_poking the local GeMM cut into row bands with the in-flight requests tested between
//               bands, which is what makes Open MPI progress a collective during a GeMM
//
// Names follow the algorithm files: i, j = mesh row and column of this rank; a, b, c = the
// local blocks; Nr = grid.nr, Nc = grid.nc.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "comm/communicator.hpp"
#include "parallel/gemm2d/gemm2d.hpp"
#include "tensor/gemm.hpp"

namespace meshtp::parallel::detail {

// An extent as a container index (extents are checked non-negative where they are made).
inline std::size_t sz(std::int64_t n) { return static_cast<std::size_t>(n); }

struct Grid {
  int nr = 1, nc = 1;                       // mesh dims 0 and 1
  int i = 0, j = 0;                         // this rank's mesh row and column
  const comm::Communicator* row = nullptr;  // the Nc ranks of mesh row i; my rank there is j
  const comm::Communicator* col = nullptr;  // the Nr ranks of mesh column j; my rank there is i
};

// Blocked slicing of a local extent e into S slices: slice s is the blocks s, s+S, s+2S, …
// of `block` consecutive indices, e/(block·S) blocks, e/S indices.
// S is the options' (params.slices), referred to, not copied.
struct Slicing {
  std::int64_t extent = 0;
  const layout::Gemm2dParams& params;
  std::int64_t block = 0;

  int slices() const { return params.slices; }
  std::int64_t slice_extent() const { return extent / slices(); }
  std::int64_t blocks_per_slice() const { return extent / (block * slices()); }
  // First local index of the b-th block of slice s.
  std::int64_t block_start(int s, std::int64_t b) const { return (b * slices() + s) * block; }
};

// The sliced extents used by MeshSlice for a dim of global size d split by Nr and by Nc.
// Requires validate() to have passed.
std::int64_t slicing_block(std::int64_t d, int nr, int nc, const Gemm2dOptions& options);

// out (slice_extent × x.cols) ← the rows of x in slice s, in order.
void pack_rows(ConstMatrixView x, const Slicing& sl, int s, float* out);
// The rows of x in slice s ← in (slice_extent × x.cols).
void unpack_rows(const float* in, const Slicing& sl, int s, MatrixView x);
// out (x.rows × slice_extent) ← the columns of x in slice s, in order.
void pack_cols(ConstMatrixView x, const Slicing& sl, int s, float* out);
// The columns of x in slice s ← in (x.rows × slice_extent).
void unpack_cols(const float* in, const Slicing& sl, int s, MatrixView x);

// An all-gather along the row delivers `chunks` contiguous rows × width blocks, one per
// member; dst (rows × chunks·width) ← them side by side, the row-major matrix they form.
void concat_col_chunks(const float* in, int chunks, std::int64_t rows, std::int64_t width,
                       MatrixView dst);

// Contiguous row-major view over a span.
inline MatrixView as_matrix(std::span<float> buf, std::int64_t rows, std::int64_t cols) {
  return {buf.data(), rows, cols, cols};
}
inline std::span<const float> as_span(ConstMatrixView m) {
  return {m.data, static_cast<std::size_t>(m.rows * m.cols)};
}
inline std::span<float> as_span(MatrixView m) {
  return {m.data, static_cast<std::size_t>(m.rows * m.cols)};
}

// Up to four requests to poke while computing. Null entries and completed requests are
// skipped.
class InFlight {
 public:
  InFlight(comm::Request* r0 = nullptr, comm::Request* r1 = nullptr, comm::Request* r2 = nullptr,
           comm::Request* r3 = nullptr)
      : requests_{r0, r1, r2, r3} {}
  void poke() const {
    for (comm::Request* r : requests_) {
      if (r != nullptr && r->pending()) r->test();
    }
  }

 private:
  std::array<comm::Request*, 4> requests_;
};

// c = op(a)·op(b) + beta·c through meshtp::gemm, cut into `chunks` bands of c's rows with
// in_flight.poke() between bands; the time goes to ws.stats.gemm_seconds.
void gemm_poking(ConstMatrixView a, Trans ta, ConstMatrixView b, Trans tb, MatrixView c, float beta,
                 const InFlight& in_flight, int chunks, Gemm2dWorkspace& ws);

// ---- the algorithms (one file each): one function per dataflow ----------------------------

using Gemm2dFn = void (*)(const Grid&, ConstMatrixView, ConstMatrixView, MatrixView,
                          const Gemm2dOptions&, Gemm2dWorkspace&);
using Gemm2dDataflows = std::array<Gemm2dFn, 3>;  // OS, LS, RS: in layout::Dataflow order
extern const Gemm2dDataflows kCannon, kSumma, kCollective, kWang, kMeshSlice;

}  // namespace meshtp::parallel::detail
