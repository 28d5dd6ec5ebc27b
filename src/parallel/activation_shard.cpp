#include "parallel/activation_shard.hpp"

#include <algorithm>
#include <vector>

#include "core/error.hpp"
#include "mesh/dtensor.hpp"

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

void check_local(const char* what, ConstMatrixView local, const Shape& block) {
  MESHTP_CHECK(local.rows == block[0] * block[1] && local.cols == block[2],
               "{}: local is {}x{}, the block is {}x{}", what, local.rows, local.cols,
               block[0] * block[1], block[2]);
}

}  // namespace

void slice_activation(ConstMatrixView global, const ActivationShard& s,
                      const mesh::DeviceMesh& mesh, MatrixView local) {
  const Shape view = view_of(global.rows, global.cols, s, mesh);
  const Shape block = mesh::local_shape(view, s.spec, mesh.shape());
  check_local("slice_activation", local, block);
  const auto at = mesh::local_offset(view, s.spec, mesh.shape(), mesh.coords());
  // Block i of the view's dim 0 is block[1] consecutive rows of global: one copy each.
  std::vector<ConstMatrixView> from;
  std::vector<MatrixView> to;
  for (std::int64_t i = 0; i < block[0]; ++i) {
    from.push_back(global.block((at[0] + i) * view[1] + at[1], at[2], block[1], block[2]));
    to.push_back(local.block(i * block[1], 0, block[1], block[2]));
  }
  copy_blocks(from, to);
}

Tensor gather_activation(const mesh::DeviceMesh& mesh, ConstMatrixView local, std::int64_t rows,
                         std::int64_t cols, const ActivationShard& s) {
  Tensor out({rows, cols});
  gather_activation_into(mesh, local, out.matrix(), s);
  return out;
}

void gather_activation_into(const mesh::DeviceMesh& mesh, ConstMatrixView local, MatrixView out,
                            const ActivationShard& s) {
  MESHTP_CHECK(out.contiguous(), "gather_activation: the output must be contiguous");
  const Shape view = view_of(out.rows, out.cols, s, mesh);
  const Shape block = mesh::local_shape(view, s.spec, mesh.shape());
  check_local("gather_activation", local, block);
  if (block == view) {
    copy(local, out);
    return;
  }
  Tensor mine(block);
  copy(local, mine.matrix());
  const Tensor full = mesh::DTensor(mesh, s.spec, view, std::move(mine)).full();
  meshtp::copy(full.values(), std::span<float>(out.data, full.values().size()));
}

}  // namespace meshtp::parallel
