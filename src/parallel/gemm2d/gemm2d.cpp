// The gemm2d entry point: names, validation, shape inference, dispatch and cost.
#include "parallel/gemm2d/gemm2d.hpp"

#include <array>
#include <numeric>
#include <ostream>

#include "core/error.hpp"
#include "parallel/gemm2d/gemm2d_impl.hpp"

namespace meshtp::parallel {
namespace {

struct AlgoEntry {
  detail::Gemm2dFn run;
  Gemm2dCost (*cost)(int, int, const Gemm2dShape&, const Gemm2dOptions&);
};

// The one table of algorithms, in layout::Algorithm order.
constexpr AlgoEntry kAlgos[] = {
    {detail::cannon, detail::cannon_cost},         {detail::summa, detail::summa_cost},
    {detail::collective, detail::collective_cost}, {detail::wang, detail::wang_cost},
    {detail::meshslice, detail::meshslice_cost},
};
static_assert(std::size(kAlgos) == layout::all<Algorithm>().size());

const AlgoEntry& entry(Algorithm algo) { return kAlgos[static_cast<std::size_t>(algo)]; }

void require_divisible(std::string_view name, std::int64_t value, int mesh_dim, int size) {
  MESHTP_CHECK(value % size == 0, "{}={} is not divisible by mesh dim {} (size {})", name, value,
               mesh_dim, size);
}

// The dim MeshSlice slices and SUMMA cuts into panels: the one both moving operands share
// along their sliced direction (OS: k, LS: n, RS: m).
std::pair<std::string_view, std::int64_t> sliced_dim(Dataflow dataflow, const Gemm2dShape& shape) {
  switch (dataflow) {
    case Dataflow::kOS:
      return {"k", shape.k};
    case Dataflow::kLS:
      return {"n", shape.n};
    case Dataflow::kRS:
      return {"m", shape.m};
  }
  fail("unknown Dataflow value {}", static_cast<int>(dataflow));
}

// Letters of A's rows, A's columns, B's rows, B's columns.
std::array<std::string_view, 4> operand_dim_names(Dataflow dataflow) {
  switch (dataflow) {
    case Dataflow::kOS:
      return {"m", "k", "k", "n"};
    case Dataflow::kLS:
      return {"m", "k", "n", "k"};
    case Dataflow::kRS:
      return {"k", "m", "k", "n"};
  }
  fail("unknown Dataflow value {}", static_cast<int>(dataflow));
}

}  // namespace

std::ostream& operator<<(std::ostream& os, const Gemm2dOptions& o) {
  return os << "{algo=" << o.algo << ", dataflow=" << o.dataflow << ", slices=" << o.slices
            << ", block=" << o.block << ", progress_chunks=" << o.progress_chunks << "}";
}

Shape global_a_shape(Dataflow dataflow, const Gemm2dShape& s) {
  return dataflow == Dataflow::kRS ? Shape{s.k, s.m} : Shape{s.m, s.k};
}

Shape global_b_shape(Dataflow dataflow, const Gemm2dShape& s) {
  return dataflow == Dataflow::kLS ? Shape{s.n, s.k} : Shape{s.k, s.n};
}

void validate(int nr, int nc, const Gemm2dShape& shape, const Gemm2dOptions& options) {
  MESHTP_CHECK(nr >= 1 && nc >= 1, "mesh {}x{} has a dim smaller than 1", nr, nc);
  MESHTP_CHECK(shape.m >= 1 && shape.n >= 1 && shape.k >= 1,
               "GeMM sizes must be positive, got m={} n={} k={}", shape.m, shape.n, shape.k);
  MESHTP_CHECK(options.slices >= 1, "slices={} must be at least 1", options.slices);
  MESHTP_CHECK(options.block >= 0, "block={} must be 0 (automatic) or positive", options.block);
  MESHTP_CHECK(options.progress_chunks >= 1, "progress_chunks={} must be at least 1",
               options.progress_chunks);
  if (options.algo == Algorithm::kCannon) {
    MESHTP_CHECK(nr == nc,
                 "Cannon's algorithm needs a square mesh, got {}x{} (use summa, collective, "
                 "wang or meshslice on rectangular meshes)",
                 nr, nc);
  }
  // C is m × n split [Shard(0), Shard(1)]; A and B split their rows over mesh dim 0 and
  // their columns over mesh dim 1, so k is split by dim 1 (OS, LS: A's columns) and by dim
  // 0 (OS, RS: B's rows) and so on. Checked in a fixed order: every rank names the same dim.
  require_divisible("m", shape.m, 0, nr);
  require_divisible("n", shape.n, 1, nc);
  const Shape a = global_a_shape(options.dataflow, shape);
  const Shape b = global_b_shape(options.dataflow, shape);
  const auto [a_rows, a_cols, b_rows, b_cols] = operand_dim_names(options.dataflow);
  require_divisible(a_rows, a[0], 0, nr);
  require_divisible(a_cols, a[1], 1, nc);
  require_divisible(b_rows, b[0], 0, nr);
  require_divisible(b_cols, b[1], 1, nc);

  const auto [dim_name, d] = sliced_dim(options.dataflow, shape);
  if (options.algo == Algorithm::kMeshSlice) {
    const std::int64_t er = d / nr;
    const std::int64_t ec = d / nc;
    if (options.block == 0) {
      MESHTP_CHECK(er % options.slices == 0 && ec % options.slices == 0,
                   "MeshSlice slices={} does not divide the local {} extents {}/Nr={} and "
                   "{}/Nc={} ({}={} on mesh {}x{})",
                   options.slices, dim_name, dim_name, er, dim_name, ec, dim_name, d, nr, nc);
    } else {
      const std::int64_t unit = options.slices * options.block;
      MESHTP_CHECK(er % unit == 0 && ec % unit == 0,
                   "MeshSlice slices·block = {}·{} = {} does not divide the local {} extents "
                   "{}/Nr={} and {}/Nc={} ({}={} on mesh {}x{})",
                   options.slices, options.block, unit, dim_name, dim_name, er, dim_name, ec,
                   dim_name, d, nr, nc);
    }
  }
  if (options.algo == Algorithm::kSumma) {
    const std::int64_t panels = std::lcm<std::int64_t>(nr, nc) * options.slices;
    MESHTP_CHECK(d % panels == 0,
                 "SUMMA cuts {}={} into lcm(Nr, Nc)·slices = {}·{} = {} panels, which does not "
                 "divide it (mesh {}x{})",
                 dim_name, d, std::lcm(nr, nc), options.slices, panels, nr, nc);
  }
}

Gemm2dShape infer_shape(int nr, int nc, Dataflow dataflow, ConstMatrixView a, ConstMatrixView b,
                        ConstMatrixView c) {
  Gemm2dShape s;
  s.m = c.rows * nr;
  s.n = c.cols * nc;
  switch (dataflow) {
    case Dataflow::kOS:
      s.k = a.cols * nc;
      break;
    case Dataflow::kLS:
      s.k = a.cols * nc;
      break;
    case Dataflow::kRS:
      s.k = a.rows * nr;
      break;
  }
  const Shape ga = global_a_shape(dataflow, s);
  const Shape gb = global_b_shape(dataflow, s);
  const bool ok =
      a.rows * nr == ga[0] && a.cols * nc == ga[1] && b.rows * nr == gb[0] && b.cols * nc == gb[1];
  MESHTP_CHECK(ok,
               "gemm2d {}: local blocks A {}x{}, B {}x{}, C {}x{} on mesh {}x{} do not form "
               "global A {}, B {}, C [{}, {}]",
               name(dataflow), a.rows, a.cols, b.rows, b.cols, c.rows, c.cols, nr, nc,
               to_string(ga), to_string(gb), s.m, s.n);
  return s;
}

void gemm2d(const mesh::DeviceMesh& mesh, ConstMatrixView a, ConstMatrixView b, MatrixView c,
            const Gemm2dOptions& options, Gemm2dWorkspace& workspace) {
  MESHTP_CHECK(mesh.ndim() == 2, "gemm2d needs a 2D mesh, got {}", mesh.to_string());
  MESHTP_CHECK(a.contiguous() && b.contiguous() && c.contiguous(),
               "gemm2d needs contiguous local blocks (ld A={} cols={}, B={} cols={}, C={} "
               "cols={})",
               a.ld, a.cols, b.ld, b.cols, c.ld, c.cols);
  detail::Grid g;
  g.nr = mesh.size(0);
  g.nc = mesh.size(1);
  g.i = mesh.coord(0);
  g.j = mesh.coord(1);
  g.row = &mesh.dim_comm(1);
  g.col = &mesh.dim_comm(0);
  validate(g.nr, g.nc, infer_shape(g.nr, g.nc, options.dataflow, a, b, c), options);
  entry(options.algo).run(g, a, b, c, options, workspace);
  workspace.stats.calls += 1;
}

Gemm2dCost gemm2d_cost(int nr, int nc, const Gemm2dShape& shape, const Gemm2dOptions& options) {
  validate(nr, nc, shape, options);
  Gemm2dCost cost = entry(options.algo).cost(nr, nc, shape, options);
  cost.flops = 2.0 * static_cast<double>(shape.m) * static_cast<double>(shape.n) *
               static_cast<double>(shape.k) / (nr * nc);
  return cost;
}

// ---- workspace ----------------------------------------------------------------------------

std::span<float> Gemm2dWorkspace::get(int slot, std::size_t n) {
  MESHTP_CHECK(slot >= 0, "workspace slot {} is negative", slot);
  const auto index = static_cast<std::size_t>(slot);
  if (buffers_.size() <= index) buffers_.resize(index + 1);
  auto& buffer = buffers_[index];
  if (buffer.size() < n) buffer.resize(n);
  return {buffer.data(), n};
}

std::size_t Gemm2dWorkspace::bytes() const {
  std::size_t total = 0;
  for (const auto& b : buffers_) total += b.capacity() * sizeof(float);
  return total;
}

namespace detail {

BlockBytes block_bytes(int nr, int nc, const Gemm2dShape& s, Dataflow dataflow) {
  const Shape a = global_a_shape(dataflow, s);
  const Shape b = global_b_shape(dataflow, s);
  const double per_rank = static_cast<double>(sizeof(float)) / (static_cast<double>(nr) * nc);
  return {static_cast<double>(a[0] * a[1]) * per_rank, static_cast<double>(b[0] * b[1]) * per_rank,
          static_cast<double>(s.m * s.n) * per_rank};
}

}  // namespace detail
}  // namespace meshtp::parallel
