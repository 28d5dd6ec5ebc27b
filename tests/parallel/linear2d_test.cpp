// ATP 2D linear layers (column-first, row-first, their scatter/gather variants) and Megatron
// 1D with sequence parallelism, on every mesh (d1, d2) of this world size, chunks 1/2/4:
// forward output, input gradient, weight and bias gradients equal the serial linear — on the
// host, and on the seam: the same layer on a stand-in device whose memory the host cannot read
// (inverted_device.hpp) over host-staged groups.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "core/error.hpp"
#include "inverted_device.hpp"
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

// Where a case runs: the host (device == nullptr, on `mesh`), or the stand-in device over
// `staged`, the same mesh's host-staged groups.
struct Place {
  testing::InvertedBackend* device = nullptr;
  const mesh::DeviceMesh* staged = nullptr;
};

void run_case(const mesh::DeviceMesh& mesh, const Case& c, Place place = {}) {
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
  device::Backend& backend =
      place.device != nullptr ? static_cast<device::Backend&>(*place.device) : cpu_backend();
  Linear2D layer(place.device != nullptr ? *place.staged : mesh, spec, backend);
  const ParamShard wk = cf ? ParamShard::kColumnFirstWeight : ParamShard::kRowFirstWeight;
  const ParamShard bk = cf ? ParamShard::kColumnFirstBias : ParamShard::kRowFirstBias;
  std::vector<float> w(static_cast<std::size_t>(layer.local_out() * layer.local_in()));
  std::vector<float> bl(static_cast<std::size_t>(layer.local_out()));
  std::vector<float> dw(w.size(), 0.0f), dbl(bl.size(), 0.0f);
  scatter_param(wk, W, mesh, w);
  scatter_param(bk, b, mesh, bl);
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
  // Every buffer as a backend array holding `values` (uploaded), read back by download().
  std::vector<device::Array> arrays;
  auto array_of = [&](std::span<const float> values) {
    device::Array a = backend.alloc(static_cast<std::int64_t>(values.size()), Element::kF32);
    backend.upload(a, values);
    arrays.push_back(a);
    return a;
  };
  auto alloc = [&](const ChunkedLayout& l) {
    return array_of(std::vector<float>(static_cast<std::size_t>(l.size()), std::nanf("")));
  };
  const device::Array wa = array_of(w), ba = array_of(bl), dwa = array_of(dw), dba = array_of(dbl);
  layer.bind(wa.view(1, wa.count()), ba.view(1, ba.count()), dwa.view(1, dwa.count()),
             dba.view(1, dba.count()));
  auto view = [](const device::Array& a, const ChunkedLayout& l) {
    return ChunkedMatrix(a.data(), a.type(), l);
  };
  // x and dy hold this rank's slice of X and dY.
  Tensor x_host({layer.x_layout().size()}), dy_host({layer.y_layout().size()});
  slice_activation(X.matrix(), xs, mesh, ChunkedMatrix(x_host.data(), layer.x_layout()).whole());
  slice_activation(dY.matrix(), ys, mesh, ChunkedMatrix(dy_host.data(), layer.y_layout()).whole());
  const device::Array x = array_of(x_host.values()), dy = array_of(dy_host.values());
  const device::Array xg = alloc(layer.xg_layout()), yp = alloc(layer.yp_layout());
  const device::Array y = alloc(layer.y_layout()), dyp = alloc(layer.yp_layout());
  const device::Array dxg = alloc(layer.xg_layout()), dx = alloc(layer.x_layout());
  const ChunkedMatrix xv = view(x, layer.x_layout());
  const ChunkedMatrix xgv = view(layer.gathers_input() ? xg : x, layer.xg_layout());
  const ChunkedMatrix ypv = view(yp, layer.yp_layout());
  const ChunkedMatrix yv = view(layer.scatters_output() ? y : yp, layer.y_layout());
  const ChunkedMatrix dyv = view(dy, layer.y_layout());
  const ChunkedMatrix dypv = view(layer.scatters_output() ? dyp : dy, layer.yp_layout());
  const ChunkedMatrix dxgv = view(dxg, layer.xg_layout());
  const ChunkedMatrix dxv = view(layer.gathers_input() ? dx : dxg, layer.x_layout());

  layer.forward(xv, xgv, ypv, yv, &progress);
  layer.backward(dyv, dypv, dxgv, dxv, xgv, &progress);

  // Back on the host: the arrays' values, viewed in their layouts.
  auto down = [&](const device::Array& a) {
    const std::vector<float> v = backend.download(a);
    Tensor t({a.count()});
    std::copy(v.begin(), v.end(), t.values().begin());
    return t;
  };
  Tensor y_out = down(layer.scatters_output() ? y : yp);
  Tensor dx_out = down(layer.gathers_input() ? dx : dxg);
  const Tensor dw_out = down(dwa), db_out = down(dba);
  const Tensor Yg =
      gather_activation(mesh, ChunkedMatrix(y_out.data(), layer.y_layout()).whole(), n, M, ys);
  const Tensor dXg =
      gather_activation(mesh, ChunkedMatrix(dx_out.data(), layer.x_layout()).whole(), n, K, xs);
  const Tensor dWg = gather_param(wk, dw_out.values(), {M, K}, mesh);
  const Tensor dbg = gather_param(bk, db_out.values(), {M}, mesh);
  const std::string what = describe(mesh, c) + (place.device != nullptr ? " on the seam" : "");
  EXPECT_LE(max_relative_error(Yg.values(), Y.values()), kTol) << "y: " << what;
  EXPECT_LE(max_relative_error(dXg.values(), dX.values()), kTol) << "dx: " << what;
  EXPECT_LE(max_relative_error(dWg.values(), dW.values()), kTol) << "dW: " << what;
  EXPECT_LE(max_relative_error(dbg.values(), db.values()), kTol) << "db: " << what;
}

// Every variant of this mesh and chunk count.
int run_variants(const mesh::DeviceMesh& mesh, const std::vector<int>& shape, int chunks,
                 Place place = {}) {
  int cases = 0;
  for (const auto kind : {LinearKind::kColumnFirst, LinearKind::kRowFirst}) {
    run_case(mesh, {kind, false, false, false, chunks}, place);
    if (kind == LinearKind::kColumnFirst) run_case(mesh, {kind, true, false, false, chunks}, place);
    if (kind == LinearKind::kRowFirst) run_case(mesh, {kind, false, true, false, chunks}, place);
    if (shape[1] == 1 && (16 / chunks) % shape[0] == 0) {
      run_case(mesh, {kind, false, false, true, chunks}, place);
    }
    cases += 1;
  }
  return cases;
}

TEST(Linear2D, EveryVariantRunsOnTheSeam) {
  const auto world = comm::Communicator::world();
  testing::InvertedBackend device;
  const auto staged = comm::Communicator::host_staged(world, device.memory);
  int cases = 0;
  for (const auto& shape : meshes2d(world.size())) {
    const mesh::DeviceMesh mesh(world, shape), staged_mesh(staged, shape);
    for (const int chunks : {1, 2}) {
      cases += run_variants(mesh, shape, chunks, {&device, &staged_mesh});
    }
  }
  EXPECT_GT(cases, 0);
  EXPECT_GT(device.gemm_calls, 0);
}

TEST(Linear2D, EqualsSerialOnEveryMesh) {
  const auto world = comm::Communicator::world();
  int cases = 0;
  for (const auto& shape : meshes2d(world.size())) {
    const mesh::DeviceMesh mesh(world, shape);
    for (const int chunks : {1, 2, 4}) cases += run_variants(mesh, shape, chunks);
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
