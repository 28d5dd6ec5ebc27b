// 2D distributed GeMM (MeshSlice §2.3, §3.1): five algorithms × three dataflows.
//
// Mesh Nr × Nc (mesh dim 0 has Nr, mesh dim 1 has Nc); chip (i, j) = mesh coordinates
// (coord(0), coord(1)). Every matrix is block-distributed in 2D, spec [Shard(0), Shard(1)]:
// chip (i, j) holds block (i, j), rows split over mesh dim 0 and columns over mesh dim 1.
// "Along the row" = among the Nc chips of mesh row i (dim_comm(1)); "along the column" =
// among the Nr chips of mesh column j (dim_comm(0)).
//
// Dataflows, named by the matrix that never moves (global shapes; C is always m × n):
//   kOS  C = A·B     A: m×k   B: k×n   gather A along the row, B along the column
//   kLS  C = A·Bᵀ    A: m×k   B: n×k   gather B along the column, reduce-scatter C along the row
//   kRS  C = Aᵀ·B    A: k×m   B: k×n   gather A along the row, reduce-scatter C along the column
//
// Algorithms (one file each, the math, loop, 2×2 example and cost at the top of each):
//   kCannon      square meshes only: skew, then Nr shift-and-multiply steps     cannon.cpp
//   kSumma       lcm(Nr,Nc)·S panels, a broadcast (+ reduce) per panel          summa.cpp
//   kCollective  one all-gather / reduce-scatter per direction, one GeMM         collective.cpp
//   kWang        the row direction as Nc send/recv ring steps overlapped with
//                partial GeMMs; the column direction one blocking collective     wang.cpp
//   kMeshSlice   S slices: partial all-gathers / reduce-scatters of slice s+1 in
//                flight in both directions while slice s is multiplied            meshslice.cpp
//
// Usage: validate() from global shapes (every rank reaches the same verdict, before any
// communication), then gemm2d() on the local blocks. gemm2d validates again from the local
// shapes, which are equal on every rank because shards are even.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "device/backend.hpp"
#include "layout/gemm2d_traffic.hpp"
#include "mesh/device_mesh.hpp"
#include "tensor/tensor.hpp"

namespace meshtp::parallel {

// The algorithm and dataflow names are the layout vocabulary's (layout/vocabulary.hpp).
using layout::Algorithm;
using layout::Dataflow;
using ::meshtp::to_string;  // Shape's

struct Gemm2dOptions {
  Algorithm algo = Algorithm::kMeshSlice;
  Dataflow dataflow = Dataflow::kOS;
  // params.slices — MeshSlice: the slice count S. SUMMA: panels per lcm(Nr, Nc) block
  // (L = lcm·S panels). Ignored by the other algorithms. The runtime's Wang decomposes the
  // row (horizontal) direction only; summa_packets is the planner's (each panel is one
  // broadcast here).
  layout::Gemm2dParams params{};
  // MeshSlice blocked slicing: slice s takes the blocks s, s+S, s+2S, … of `block`
  // consecutive indices of the sliced dim. 0 = the largest block that works, gcd of the two
  // local extents / S (one contiguous block per slice on a square mesh).
  std::int64_t block = 0;
  // Open MPI progresses non-blocking operations only inside MPI calls, so every partial GeMM
  // that overlaps communication is cut into this many row bands, and the in-flight requests
  // are tested between bands. 1 = no pokes (the collectives then mostly run at wait()).
  int progress_splits = 4;
};
std::ostream& operator<<(std::ostream& os, const Gemm2dOptions& options);

// The global problem: layout's one 2D GeMM shape (layout/gemm2d_traffic.hpp), C is m × n,
// the contraction is k (see the dataflow table above). The functions below that take the
// mesh (nr, nc) and the options read its m, n and k: the mesh and dataflow they run on are
// their arguments'. infer_shape fills in all of it.
using layout::Gemm2dShape;

// Global shapes of A and B for a dataflow ({rows, cols}); C is always {m, n}.
Shape global_a_shape(Dataflow dataflow, const Gemm2dShape& shape);
Shape global_b_shape(Dataflow dataflow, const Gemm2dShape& shape);

// Throws meshtp::Error unless the problem runs on an nr × nc mesh with these options:
// sizes positive; every global dim divisible by the mesh dim that splits it
// ("k=100 is not divisible by mesh dim 1 (size 3)"); Cannon on a square mesh; MeshSlice's
// S·block dividing both local extents of the sliced dim; SUMMA's panel count dividing it —
// layout::gemm2d_invalid_reason, the planner's rule, plus the runtime's own options.
// Depends only on its arguments: call it before any communication.
void validate(int nr, int nc, const Gemm2dShape& shape, const Gemm2dOptions& options);

// Reusable scratch space (gathered operands, partial products, ring buffers) in one backend's
// memory (device/backend.hpp): the CPU's by default, a GPU's when made on its backend. Keep
// one per call site: later calls of the same size allocate nothing. Slots 0–63 belong to the
// algorithms; code built on gemm2d (layers) may use slots from 64 up for its own buffers.
class Gemm2dWorkspace {
 public:
  Gemm2dWorkspace();  // on the process's CPU backend
  explicit Gemm2dWorkspace(device::Backend& backend);

  device::Backend& backend() const { return *backend_; }

  // A packed rows × cols view of `type` in slot `slot`; contents unspecified. A slot's memory
  // stays put until a later get() of the same slot asks for more.
  View get(int slot, std::int64_t rows, std::int64_t cols, Element type = Element::kF32);
  // Slot `slot` as n host floats: only on a backend whose memory is the host's (throws else).
  std::span<float> get(int slot, std::size_t n);
  std::size_t bytes() const;

  // Where the time went, accumulated over calls (a benchmark resets and reads it).
  struct Stats {
    double gemm_seconds = 0.0;  // inside local GeMMs, including the progress pokes
    int calls = 0;
  } stats;

 private:
  device::Array& slot_with(int slot, std::int64_t count, Element type);

  device::Backend* backend_;
  std::vector<device::Array> buffers_;
};

// C = op(A)·op(B) on the local blocks of a 2D mesh (mesh.ndim() must be 2): the seam's form.
// a, b and c are this rank's blocks (i, j), packed views in the workspace backend's memory,
// of the global shapes of the dataflow; c is overwritten. Every byte is touched through the
// backend (GeMM, pack, add) and the mesh's communicators (whose transport must carry that
// memory: host memory over mpi or alone groups, device memory over host-staged or nccl ones).
// Collective over the mesh.
void gemm2d(const mesh::DeviceMesh& mesh, const View& a, const View& b, const View& c,
            const Gemm2dOptions& options, Gemm2dWorkspace& workspace);
// The same on host fp32 blocks (the workspace's backend must compute on host memory).
void gemm2d(const mesh::DeviceMesh& mesh, ConstMatrixView a, ConstMatrixView b, MatrixView c,
            const Gemm2dOptions& options, Gemm2dWorkspace& workspace);

// The global problem implied by local block shapes on an nr × nc mesh; throws if the three
// blocks do not chain (naming all shapes).
Gemm2dShape infer_shape(int nr, int nc, Dataflow dataflow, const View& a, const View& b,
                        const View& c);

// What one call sends, per rank and mesh direction, with which collectives: the layout
// traffic description (layout/gemm2d_traffic.hpp) of this problem and these options — the
// planner's price. Validates first.
layout::Gemm2dTraffic gemm2d_traffic(int nr, int nc, const Gemm2dShape& shape,
                                     const Gemm2dOptions& options);

}  // namespace meshtp::parallel
