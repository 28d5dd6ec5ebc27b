// The gemm2d entry point: names, validation, shape inference, dispatch and cost.
#include "parallel/gemm2d/gemm2d.hpp"

#include <array>
#include <numeric>
#include <ostream>

#include "core/error.hpp"
#include "ops/cpu_backend.hpp"
#include "parallel/gemm2d/gemm2d_impl.hpp"

namespace meshtp::parallel {
namespace {

// The one table of algorithms, in layout::Algorithm order; each holds a function per dataflow.
constexpr const detail::Gemm2dDataflows* kAlgos[] = {&detail::kCannon, &detail::kSumma,
                                                     &detail::kCollective, &detail::kWang,
                                                     &detail::kMeshSlice};
static_assert(std::size(kAlgos) == layout::all<Algorithm>().size());
static_assert(std::tuple_size_v<detail::Gemm2dDataflows> == layout::all<Dataflow>().size());

}  // namespace

std::ostream& operator<<(std::ostream& os, const Gemm2dOptions& o) {
  return os << "{algo=" << o.algo << ", dataflow=" << o.dataflow << ", slices=" << o.params.slices
            << ", block=" << o.block << ", progress_splits=" << o.progress_splits << "}";
}

Shape global_a_shape(Dataflow dataflow, const Gemm2dShape& s) {
  return dataflow == Dataflow::kRS ? Shape{s.k, s.m} : Shape{s.m, s.k};
}

Shape global_b_shape(Dataflow dataflow, const Gemm2dShape& s) {
  return dataflow == Dataflow::kLS ? Shape{s.n, s.k} : Shape{s.k, s.n};
}

layout::Gemm2dShape traffic_shape(int nr, int nc, const Gemm2dShape& s, Dataflow dataflow) {
  return {.dataflow = dataflow, .m = s.m, .n = s.n, .k = s.k, .nr = nr, .nc = nc,
          .element_bytes = sizeof(float)};
}

void validate(int nr, int nc, const Gemm2dShape& shape, const Gemm2dOptions& options) {
  MESHTP_CHECK(nr >= 1 && nc >= 1, "mesh {}x{} has a dim smaller than 1", nr, nc);
  MESHTP_CHECK(options.params.slices >= 1, "slices={} must be at least 1", options.params.slices);
  MESHTP_CHECK(options.params.wang_decomposed == layout::Direction::kHorizontal,
               "the runtime's Wang decomposes the horizontal direction, not {}",
               layout::name(options.params.wang_decomposed));
  MESHTP_CHECK(options.block >= 0, "block={} must be 0 (automatic) or positive", options.block);
  MESHTP_CHECK(options.progress_splits >= 1, "progress_splits={} must be at least 1",
               options.progress_splits);
  const layout::Gemm2dShape s = traffic_shape(nr, nc, shape, options.dataflow);
  if (auto reason = layout::gemm2d_invalid_reason(options.algo, s, options.params)) {
    fail("{}", *reason);
  }
  // MeshSlice's blocked slicing: S blocks of `block` indices must tile both local extents.
  const std::int64_t d = s.sliced_extent(), unit = options.params.slices * options.block;
  MESHTP_CHECK(options.algo != Algorithm::kMeshSlice || options.block == 0 ||
                   ((d / nr) % unit == 0 && (d / nc) % unit == 0),
               "MeshSlice slices·block = {}·{} = {} does not divide the local extents {}/Nr={} "
               "and {}/Nc={} (mesh {}x{})",
               options.params.slices, options.block, unit, d, d / nr, d, d / nc, nr, nc);
}

layout::Gemm2dTraffic gemm2d_traffic(int nr, int nc, const Gemm2dShape& shape,
                                     const Gemm2dOptions& options) {
  validate(nr, nc, shape, options);
  return layout::gemm2d_traffic(options.algo, traffic_shape(nr, nc, shape, options.dataflow),
                                options.params);
}

Gemm2dShape infer_shape(int nr, int nc, Dataflow dataflow, const View& a, const View& b,
                        const View& c) {
  Gemm2dShape s{.dataflow = dataflow, .nr = nr, .nc = nc, .element_bytes = sizeof(float)};
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

namespace {

// Whether a group's transport carries memory of this kind: host memory over mpi or alone
// groups, device memory over host-staged or nccl ones (an alone group moves nothing).
bool carries(comm::TransportKind kind, bool device_memory) {
  switch (kind) {
    case comm::TransportKind::kMpi:
      return !device_memory;
    case comm::TransportKind::kAlone:
      return true;
    case comm::TransportKind::kHostStaged:
    case comm::TransportKind::kNccl:
      return device_memory;
  }
  return false;
}

}  // namespace

void gemm2d(const mesh::DeviceMesh& mesh, const View& a, const View& b, const View& c,
            const Gemm2dOptions& options, Gemm2dWorkspace& workspace) {
  MESHTP_CHECK(mesh.ndim() == 2, "gemm2d needs a 2D mesh, got {}", mesh.to_string());
  MESHTP_CHECK(a.contiguous() && b.contiguous() && c.contiguous(),
               "gemm2d needs packed local blocks (A {}, B {}, C {})", describe(a), describe(b),
               describe(c));
  const bool on_device = workspace.backend().device_memory() != nullptr;
  for (int d = 0; d < 2; ++d) {
    const comm::TransportKind kind = mesh.dim_comm(d).transport();
    MESHTP_CHECK(carries(kind, on_device),
                 "gemm2d on {} memory ({} backend) over mesh dim {}'s {} group: that transport "
                 "carries {} memory",
                 on_device ? "device" : "host", workspace.backend().name(), d,
                 comm::to_string(kind), on_device ? "host" : "device");
  }
  detail::Grid g;
  g.nr = mesh.size(0);
  g.nc = mesh.size(1);
  g.i = mesh.coord(0);
  g.j = mesh.coord(1);
  g.row = &mesh.dim_comm(1);
  g.col = &mesh.dim_comm(0);
  validate(g.nr, g.nc, infer_shape(g.nr, g.nc, options.dataflow, a, b, c), options);
  const detail::Gemm2dDataflows& algo = *kAlgos[static_cast<std::size_t>(options.algo)];
  algo[static_cast<std::size_t>(options.dataflow)](g, a, b, c, options, workspace);
  workspace.stats.calls += 1;
}

void gemm2d(const mesh::DeviceMesh& mesh, ConstMatrixView a, ConstMatrixView b, MatrixView c,
            const Gemm2dOptions& options, Gemm2dWorkspace& workspace) {
  MESHTP_CHECK(workspace.backend().device_memory() == nullptr,
               "gemm2d on host blocks with a workspace on the {} backend, whose memory is a "
               "device's",
               workspace.backend().name());
  gemm2d(mesh, host_view(a), host_view(b), host_view(c), options, workspace);
}

// ---- workspace ----------------------------------------------------------------------------

Gemm2dWorkspace::Gemm2dWorkspace() : Gemm2dWorkspace(cpu_backend()) {}
Gemm2dWorkspace::Gemm2dWorkspace(device::Backend& backend) : backend_(&backend) {}

device::Array& Gemm2dWorkspace::slot_with(int slot, std::int64_t count, Element type) {
  MESHTP_CHECK(slot >= 0, "workspace slot {} is negative", slot);
  MESHTP_CHECK(count >= 0, "workspace slot {}: {} elements", slot, count);
  const auto index = static_cast<std::size_t>(slot);
  if (buffers_.size() <= index) buffers_.resize(index + 1);
  device::Array& buffer = buffers_[index];
  // Bytes decide: a slot of fp32 serves a bf16 request of the same bytes, and the other way.
  const auto bytes = [](std::int64_t n, Element t) { return n * static_cast<std::int64_t>(element_size(t)); };
  if (buffer.empty() || bytes(buffer.count(), buffer.type()) < bytes(count, type)) {
    buffer = device::Array();  // contents are unspecified: growing copies nothing
    buffer = backend_->alloc(count, type);
  }
  return buffer;
}

View Gemm2dWorkspace::get(int slot, std::int64_t rows, std::int64_t cols, Element type) {
  MESHTP_CHECK(rows >= 0 && cols >= 0, "workspace slot {}: a {}x{} view", slot, rows, cols);
  const device::Array& buffer = slot_with(slot, rows * cols, type);
  return View::packed(buffer.data(), type, rows, cols);
}

std::span<float> Gemm2dWorkspace::get(int slot, std::size_t n) {
  MESHTP_CHECK(backend_->device_memory() == nullptr,
               "workspace slot {}: host floats asked of the {} backend, whose memory is a "
               "device's",
               slot, backend_->name());
  const device::Array& buffer = slot_with(slot, static_cast<std::int64_t>(n), Element::kF32);
  return {static_cast<float*>(buffer.data()), n};
}

std::size_t Gemm2dWorkspace::bytes() const {
  std::size_t total = 0;
  for (const auto& b : buffers_) total += static_cast<std::size_t>(b.count()) * element_size(b.type());
  return total;
}

}  // namespace meshtp::parallel
