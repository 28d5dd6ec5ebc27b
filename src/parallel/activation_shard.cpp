#include "parallel/activation_shard.hpp"

#include <algorithm>
#include <vector>

#include "core/error.hpp"
#include "mesh/dtensor.hpp"
#include "ops/cpu_backend.hpp"

namespace meshtp::parallel {
namespace {

Shape view_of(std::int64_t rows, std::int64_t cols, const ActivationShard& s,
              const mesh::DeviceMesh& mesh) {
  MESHTP_CHECK(s.chunks >= 1 && rows % s.chunks == 0, "rows={} is not divisible by chunks={}",
               rows, s.chunks);
  Shape view{s.chunks, rows / s.chunks, cols};
  mesh::validate_spec(s.spec, mesh.ndim(), mesh.shape(), view);
  return view;
}

void check_local(const char* what, const View& local, const Shape& block) {
  MESHTP_CHECK(local.rows == block[0] * block[1] && local.cols == block[2],
               "{}: local is {}x{}, the block is {}x{}", what, local.rows, local.cols,
               block[0] * block[1], block[2]);
}

}  // namespace

void slice_activation(device::Backend& backend, const View& global, const ActivationShard& s,
                      const mesh::DeviceMesh& mesh, const View& local) {
  const Shape view = view_of(global.rows, global.cols, s, mesh);
  const Shape block = mesh::local_shape(view, s.spec, mesh.shape());
  check_local("slice_activation", local, block);
  const auto at = mesh::local_offset(view, s.spec, mesh.shape(), mesh.coords());
  // Block i of the view's dim 0 is block[1] consecutive rows of global: one copy each.
  std::vector<View> from, to;
  for (std::int64_t i = 0; i < block[0]; ++i) {
    from.push_back(global.block((at[0] + i) * view[1] + at[1], at[2], block[1], block[2]));
    to.push_back(local.block(i * block[1], 0, block[1], block[2]));
  }
  backend.copy_blocks(to, from);
}

void gather_activation_into(device::Backend& backend, const mesh::DeviceMesh& mesh,
                            const View& local, const View& out, const ActivationShard& s) {
  const Shape view = view_of(out.rows, out.cols, s, mesh);
  const Shape block = mesh::local_shape(view, s.spec, mesh.shape());
  check_local("gather_activation", local, block);
  if (block == view) {
    backend.copy(out, local);
    return;
  }
  MESHTP_CHECK(local.contiguous(), "gather_activation: the local block ({}) must be contiguous",
               describe(local));
  // The group of the mesh dims that shard the view: its members differ from this rank in
  // exactly those coordinates, and its rank order is theirs (row-major, device_mesh.hpp).
  std::vector<int> dims;
  for (int d = 0; d < mesh.ndim(); ++d) {
    if (mesh::is_shard(s.spec[static_cast<std::size_t>(d)]) && mesh.size(d) > 1) {
      dims.push_back(d);
    }
  }
  MESHTP_CHECK(dims.size() == 1 || static_cast<int>(dims.size()) == mesh.ndim(),
               "gather_activation: {} of the mesh's {} dims shard the activation; one or all "
               "are gathered",
               dims.size(), mesh.ndim());
  const comm::Communicator& group = dims.size() == 1 ? mesh.dim_comm(dims[0]) : mesh.comm();
  const std::int64_t count = local.elements();
  // Zeroed: an alone group (one rank of a big layout, comm/communicator.hpp) leaves the other
  // ranks' slots as they were.
  device::Array gathered = backend.alloc(count * group.size(), local.type);
  backend.zero(gathered);
  group.all_gather(comm::const_buffer_of(local),
                   comm::buffer_of(gathered.view(1, count * group.size())));
  std::vector<View> from, to;
  for (int q = 0; q < group.size(); ++q) {
    std::vector<int> coords = mesh.coords();
    if (dims.size() == 1) {
      coords[static_cast<std::size_t>(dims[0])] = q;
    } else {
      coords = mesh.coords_of(q);
    }
    const auto at = mesh::local_offset(view, s.spec, mesh.shape(), coords);
    const View mine = gathered.view(q * count, local.rows, local.cols, local.cols);
    for (std::int64_t i = 0; i < block[0]; ++i) {
      to.push_back(out.block((at[0] + i) * view[1] + at[1], at[2], block[1], block[2]));
      from.push_back(mine.block(i * block[1], 0, block[1], block[2]));
    }
  }
  backend.copy_blocks(to, from);
}

void slice_activation(ConstMatrixView global, const ActivationShard& s,
                      const mesh::DeviceMesh& mesh, MatrixView local) {
  slice_activation(cpu_backend(), host_view(global), s, mesh, host_view(local));
}

Tensor gather_activation(const mesh::DeviceMesh& mesh, ConstMatrixView local, std::int64_t rows,
                         std::int64_t cols, const ActivationShard& s) {
  Tensor out({rows, cols});
  gather_activation_into(mesh, local, out.matrix(), s);
  return out;
}

void gather_activation_into(const mesh::DeviceMesh& mesh, ConstMatrixView local, MatrixView out,
                            const ActivationShard& s) {
  gather_activation_into(cpu_backend(), mesh, host_view(local), host_view(out), s);
}

}  // namespace meshtp::parallel
