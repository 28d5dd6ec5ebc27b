#include "model/stream_io.hpp"

#include "core/error.hpp"

namespace meshtp::model {

void scatter_stream(const StreamGeometry& g, const mesh::DeviceMesh& mesh, const Tensor& global,
                    Tensor& local) {
  const std::int64_t n = g.shape.batch * g.shape.seq, h = g.shape.hidden;
  MESHTP_CHECK(global.numel() == n * h && global.dim(-1) == h,
               "stream tensor has shape {}, expected [{}, {}, {}]", to_string(global.shape()),
               g.shape.batch, g.shape.seq, h);
  const ConstMatrixView whole{global.data(), n, h, h};
  parallel::slice_activation(whole, g.shard, mesh,
                             parallel::ChunkedMatrix(local.data(), g.layout).whole());
}

Tensor gather_stream(const StreamGeometry& g, const mesh::DeviceMesh& mesh, const Tensor& local) {
  const parallel::ChunkedLayout& l = g.layout;
  Tensor out = parallel::gather_activation(mesh, {local.data(), l.rows(), l.cols, l.cols},
                                           g.shape.batch * g.shape.seq, g.shape.hidden, g.shard);
  out.reshape({g.shape.batch, g.shape.seq, g.shape.hidden});
  return out;
}

}  // namespace meshtp::model
