// ATP 2D linear layers (column-first, row-first, their scatter/gather variants) and Megatron
// 1D with sequence parallelism, on every mesh (d1, d2) of this world size, chunks 1/2/4:
// forward output, input gradient, weight and bias gradients equal the serial linear.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "core/error.hpp"
#include "mesh2d.hpp"
#include "ops/linear.hpp"
#include "parallel/activation_shard.hpp"
#include "parallel/linear2d.hpp"
#include "parallel/param_shard.hpp"
#include "tensor/random.hpp"

namespace meshtp::parallel {
namespace {

constexpr double kTol = 1e-5;

struct Case {
  LinearKind kind;
  bool scatter = false, gather = false, sp = false;
  int chunks = 1;
};

std::string describe(const mesh::DeviceMesh& mesh, const Case& c) {
  return fmt::format("{} {} chunks={}{}{}{} rank {}", mesh.to_string(),
                     c.kind == LinearKind::kColumnFirst ? "column-first" : "row-first", c.chunks,
                     c.scatter ? " scatter" : "", c.gather ? " gather" : "", c.sp ? " SP" : "",
                     mesh.rank());
}

void run_case(const mesh::DeviceMesh& mesh, const Case& c) {
  const std::int64_t n = 16, K = 24, M = 48;
  const bool cf = c.kind == LinearKind::kColumnFirst;
  const Tensor X = uniform_tensor({n, K}, 1), W = uniform_tensor({M, K}, 2);
  const Tensor b = uniform_tensor({M}, 3), dY = uniform_tensor({n, M}, 4);
  // Serial reference.
  Tensor Y({n, M}), dX({n, K}), dW({M, K}), db({M});
  linear_forward(Y.matrix(), X.matrix(), W.matrix(), b.values());
  linear_backward(dX.matrix(), dW.matrix(), db.values(), dY.matrix(), X.matrix(), W.matrix());

  const Linear2DSpec spec{.kind = c.kind, .in_features = K, .out_features = M, .rows = n,
                          .chunks = c.chunks, .sequence_parallel = c.sp,
                          .scatter_output = c.scatter, .gather_input = c.gather};
  Linear2D layer(mesh, spec);
  const ParamShard wk = cf ? ParamShard::kColumnFirstWeight : ParamShard::kRowFirstWeight;
  const ParamShard bk = cf ? ParamShard::kColumnFirstBias : ParamShard::kRowFirstBias;
  std::vector<float> w(static_cast<std::size_t>(layer.local_out() * layer.local_in()));
  std::vector<float> bl(static_cast<std::size_t>(layer.local_out()));
  std::vector<float> dw(w.size(), 0.0f), dbl(bl.size(), 0.0f);
  scatter_param(wk, W, mesh, w);
  scatter_param(bk, b, mesh, bl);
  layer.bind(w, bl, dw, dbl);
  Progress progress(3);
  layer.watch(progress);

  // How x and y are split: see linear2d.hpp's placements.
  using mesh::Replicate, mesh::Shard;
  // The stream (features over dim 1, token rows over dim 0 under SP); the other side features
  // over dim 0, or over both dims when the heads are scattered / gathered.
  const ActivationShard stream{c.chunks, {c.sp ? mesh::Placement{Shard{1}} : Replicate{}, Shard{2}}};
  const ActivationShard split{c.chunks, {Shard{2}, Replicate{}}};
  const ActivationShard heads{c.chunks, {Shard{2}, Shard{2}}};
  const ActivationShard xs = cf ? stream : c.gather ? heads : split;
  const ActivationShard ys = cf ? (c.scatter ? heads : split) : stream;
  auto alloc = [](const ChunkedLayout& l) { return Tensor({l.size()}); };
  Tensor x = alloc(layer.x_layout()), xg = alloc(layer.xg_layout());
  Tensor yp = alloc(layer.yp_layout()), y = alloc(layer.y_layout());
  Tensor dy = alloc(layer.y_layout()), dyp = alloc(layer.yp_layout());
  Tensor dxg = alloc(layer.xg_layout()), dx = alloc(layer.x_layout());
  auto view = [](Tensor& t, const ChunkedLayout& l) { return ChunkedMatrix(t.data(), l); };
  const ChunkedMatrix xv = view(x, layer.x_layout());
  const ChunkedMatrix xgv = layer.gathers_input() ? view(xg, layer.xg_layout())
                                                  : ChunkedMatrix(x.data(), layer.xg_layout());
  const ChunkedMatrix ypv = view(yp, layer.yp_layout());
  const ChunkedMatrix yv = layer.scatters_output() ? view(y, layer.y_layout())
                                                   : ChunkedMatrix(yp.data(), layer.y_layout());
  const ChunkedMatrix dyv = view(dy, layer.y_layout());
  const ChunkedMatrix dypv = layer.scatters_output()
                                 ? view(dyp, layer.yp_layout())
                                 : ChunkedMatrix(dy.data(), layer.yp_layout());
  const ChunkedMatrix dxgv = view(dxg, layer.xg_layout());
  const ChunkedMatrix dxv = layer.gathers_input() ? view(dx, layer.x_layout())
                                                  : ChunkedMatrix(dxg.data(), layer.x_layout());
  slice_activation(X.matrix(), xs, mesh, xv.whole());
  slice_activation(dY.matrix(), ys, mesh, dyv.whole());

  layer.forward(xv, xgv, ypv, yv, &progress);
  layer.backward(dyv, dypv, dxgv, dxv, xgv, &progress);

  const Tensor Yg = gather_activation(mesh, yv.whole(), n, M, ys);
  const Tensor dXg = gather_activation(mesh, dxv.whole(), n, K, xs);
  const Tensor dWg = gather_param(wk, dw, {M, K}, mesh);
  const Tensor dbg = gather_param(bk, dbl, {M}, mesh);
  const std::string what = describe(mesh, c);
  EXPECT_LE(max_relative_error(Yg.values(), Y.values()), kTol) << "y: " << what;
  EXPECT_LE(max_relative_error(dXg.values(), dX.values()), kTol) << "dx: " << what;
  EXPECT_LE(max_relative_error(dWg.values(), dW.values()), kTol) << "dW: " << what;
  EXPECT_LE(max_relative_error(dbg.values(), db.values()), kTol) << "db: " << what;
}

TEST(Linear2D, EqualsSerialOnEveryMesh) {
  const auto world = comm::Communicator::world();
  int cases = 0;
  for (const auto& shape : meshes2d(world.size())) {
    const mesh::DeviceMesh mesh(world, shape);
    for (const int chunks : {1, 2, 4}) {
      for (const auto kind : {LinearKind::kColumnFirst, LinearKind::kRowFirst}) {
        run_case(mesh, {kind, false, false, false, chunks});
        if (kind == LinearKind::kColumnFirst) run_case(mesh, {kind, true, false, false, chunks});
        if (kind == LinearKind::kRowFirst) run_case(mesh, {kind, false, true, false, chunks});
        if (shape[1] == 1 && (16 / chunks) % shape[0] == 0) {
          run_case(mesh, {kind, false, false, true, chunks});
        }
        cases += 1;
      }
    }
  }
  EXPECT_GT(cases, 0);
}

TEST(Linear2D, MegatronCollectivesOnNBy1) {
  // (N, 1): column-first is ColumnParallelLinear (f: nothing forward, all-reduce backward),
  // row-first is RowParallelLinear (f̄: all-reduce forward, nothing backward).
  const auto world = comm::Communicator::world();
  if (world.size() == 1) GTEST_SKIP() << "no communication on one rank";
  const mesh::DeviceMesh mesh(world, {world.size(), 1});
  using K = CollectiveKind;
  const Linear2D col(mesh, column_parallel_linear(8, 8, 8));
  EXPECT_EQ(col.collective(0), K::kNone);
  EXPECT_EQ(col.collective(1), K::kNone);
  EXPECT_EQ(col.collective(2), K::kNone);
  EXPECT_EQ(col.collective(3), K::kAllReduce);
  const Linear2D row(mesh, row_parallel_linear(8, 8, 8));
  EXPECT_EQ(row.collective(1), K::kAllReduce);
  EXPECT_EQ(row.collective(3), K::kNone);
  // Sequence parallelism: all-gather / reduce-scatter instead (Megatron-SP's g and ḡ).
  const Linear2D col_sp(mesh, column_parallel_linear(8, 8, 8 * world.size(), 1, true));
  EXPECT_EQ(col_sp.collective(0), K::kAllGather);
  EXPECT_EQ(col_sp.collective(3), K::kReduceScatter);
  const Linear2D row_sp(mesh, row_parallel_linear(8, 8, 8 * world.size(), 1, true));
  EXPECT_EQ(row_sp.collective(1), K::kReduceScatter);
  EXPECT_EQ(row_sp.collective(2), K::kAllGather);
}

TEST(Linear2D, ValidationNamesTheValues) {
  const Linear2DSpec bad{.kind = LinearKind::kColumnFirst, .in_features = 10,
                         .out_features = 8, .rows = 8};
  try {
    validate(bad, {2, 4});
    FAIL() << "in=10 over d2=4 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("in features 10 not divisible by mesh dim 1 (size 4)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(validate({.kind = LinearKind::kRowFirst, .in_features = 8, .out_features = 8,
                         .rows = 9, .chunks = 2},
                        {1, 1}),
               Error);
  EXPECT_THROW(validate({.kind = LinearKind::kRowFirst, .in_features = 8, .out_features = 8,
                         .rows = 8, .sequence_parallel = true},
                        {2, 2}),
               Error);
}

}  // namespace
}  // namespace meshtp::parallel
