// Private to gemm2d/: what the five algorithm files share.
//
//   Grid        this rank's place on the Nr × Nc mesh and its row / column communicators
//   Slicing     MeshSlice's blocked slicing of one local extent (see meshslice.cpp)
//   pack / unpack of a slice of rows or columns; gathered column chunks laid side by side
//   gemm_poking the local GeMM with the in-flight requests tested while it runs (between row
//               bands on the CPU), which is what makes Open MPI progress a collective during
//               a GeMM
//
// Names follow the algorithm files: i, j = mesh row and column of this rank; a, b, c = the
// local blocks; Nr = grid.nr, Nc = grid.nc.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "comm/communicator.hpp"
#include "core/error.hpp"
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

// Every byte below moves through the workspace's backend (ws.backend(): GeMM, copies, adds)
// or a communicator: the algorithms never read a block on the host, so they run on device
// memory as on the CPU's.

// out (slice_extent × x.cols, packed) ← the rows of x in slice s, in order.
void pack_rows(Gemm2dWorkspace& ws, const View& x, const Slicing& sl, int s, const View& out);
// The rows of x in slice s ← in (slice_extent × x.cols, packed).
void unpack_rows(Gemm2dWorkspace& ws, const View& in, const Slicing& sl, int s, const View& x);
// out (x.rows × slice_extent, packed) ← the columns of x in slice s, in order.
void pack_cols(Gemm2dWorkspace& ws, const View& x, const Slicing& sl, int s, const View& out);
// The columns of x in slice s ← in (x.rows × slice_extent, packed).
void unpack_cols(Gemm2dWorkspace& ws, const View& in, const Slicing& sl, int s, const View& x);

// An all-gather along the row delivers `chunks` contiguous rows × width blocks, one per
// member (in: chunks·rows × width, packed); dst (rows × chunks·width) ← them side by side, the
// row-major matrix they form.
void concat_col_chunks(Gemm2dWorkspace& ws, const View& in, int chunks, std::int64_t rows,
                       std::int64_t width, const View& dst);

// A packed view's memory seen as another packed shape of the same element count.
inline View reshape(const View& v, std::int64_t rows, std::int64_t cols) {
  MESHTP_CHECK(v.contiguous() && rows * cols == v.rows * v.cols,
               "reshape of {} to {}x{}: a packed view keeps its element count", describe(v), rows,
               cols);
  return View::packed(v.data, v.type, rows, cols);
}
// The messages of a packed view.
inline comm::Buffer msg(const View& v) { return comm::buffer_of(v); }
inline comm::ConstBuffer cmsg(const View& v) { return comm::const_buffer_of(v); }

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

// c = op(a)·op(b) + beta·c on the workspace's backend, letting `in_flight` progress (the
// backend's gemm_in_bands: `chunks` row bands on the CPU); the time goes to
// ws.stats.gemm_seconds.
void gemm_poking(const View& a, Trans ta, const View& b, Trans tb, const View& c, float beta,
                 const InFlight& in_flight, int chunks, Gemm2dWorkspace& ws);

// ---- the algorithms (one file each): one function per dataflow ----------------------------

using Gemm2dFn = void (*)(const Grid&, const View&, const View&, const View&, const Gemm2dOptions&,
                          Gemm2dWorkspace&);
using Gemm2dDataflows = std::array<Gemm2dFn, 3>;  // OS, LS, RS: in layout::Dataflow order
extern const Gemm2dDataflows kCannon, kSumma, kCollective, kWang, kMeshSlice;

}  // namespace meshtp::parallel::detail
