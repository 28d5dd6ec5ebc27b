// The sharded norms (parallel/layernorm_sharded.hpp) against the serial ops: LayerNorm and
// RMSNorm whose hidden dim is split over mesh dim 1 of every mesh of this world size
// (degenerate 1xP and Px1 included), forward, backward (gradients added into nonzero ones) and
// the fused residual, on host memory through the CPU backend and on the inverted stand-in
// (inverted_device.hpp: memory the host cannot read) over host-staged collectives. The split
// phases run their sums through the backend and the group's all-reduce, so a phase computed
// off the backend, or statistics not summed over the group, fails here. Also the refusals.
#include <gtest/gtest.h>

#include <sstream>

#include "error_of.hpp"
#include "inverted_device.hpp"
#include "mesh/device_mesh.hpp"
#include "ops/layernorm.hpp"
#include "ops/residual.hpp"
#include "ops/rmsnorm.hpp"
#include "parallel/layernorm_sharded.hpp"
#include "parallel/mesh2d.hpp"
#include "tensor/random.hpp"

namespace meshtp::parallel {
namespace {

using layout::Norm;
using test_support::error_of;
using testing::InvertedBackend;

constexpr std::int64_t kRows = 5, kHidden = 24;  // 24 splits over 1, 2, 3, 4, 6 and 8 ranks

// The whole problem, the same on every rank, and its serial answer (the ops).
struct Problem {
  Norm norm;
  Tensor x = uniform_tensor({kRows, kHidden}, 1), dy = uniform_tensor({kRows, kHidden}, 2);
  Tensor residual = uniform_tensor({kRows, kHidden}, 3);
  Tensor w = uniform_tensor({1, kHidden}, 4), b = uniform_tensor({1, kHidden}, 5);
  Tensor dw0 = uniform_tensor({1, kHidden}, 6), db0 = uniform_tensor({1, kHidden}, 7);
  Tensor dx0 = uniform_tensor({kRows, kHidden}, 8);
  // Serial results.
  Tensor y{Shape{kRows, kHidden}}, mean{Shape{1, kRows}}, rstd{Shape{1, kRows}};
  Tensor dx, dw, db;

  explicit Problem(Norm n) : norm(n), dx(dx0), dw(dw0), db(db0) {
    if (norm == Norm::kLayerNorm) {
      layernorm_forward(y.matrix(), mean.values(), rstd.values(), x.matrix(), w.values(),
                        b.values());
      layernorm_backward(dx.matrix(), dw.values(), db.values(), dy.matrix(), x.matrix(), w.values(),
                         mean.values(), rstd.values());
    } else {
      rmsnorm_forward(y.matrix(), rstd.values(), x.matrix(), w.values());
      rmsnorm_backward(dx.matrix(), dw.values(), dy.matrix(), x.matrix(), w.values(),
                       rstd.values());
    }
  }
  bool layer_norm() const { return norm == Norm::kLayerNorm; }
};

// Columns [c0, c0 + n) of a host matrix, as a packed tensor.
Tensor columns(const Tensor& t, std::int64_t c0, std::int64_t n) {
  Tensor out({t.dim(0), n});
  for (std::int64_t i = 0; i < t.dim(0); ++i) {
    for (std::int64_t j = 0; j < n; ++j) out.matrix()(i, j) = t.matrix()(i, c0 + j);
  }
  return out;
}

// One rank's shard of the problem in some backend's memory, run, and read back to the host.
struct Shard {
  device::Backend& be;
  std::vector<device::Array> arrays;
  View put(const Tensor& t) {
    arrays.push_back(be.alloc(t.numel(), Element::kF32));
    be.upload(arrays.back(), t.values());
    return arrays.back().view(t.dim(0), t.dim(1));
  }
  View scratch(std::int64_t n) {
    arrays.push_back(be.alloc(n, Element::kF64));
    return arrays.back().view(1, n);
  }
  Tensor get(const View& v) {
    for (const device::Array& a : arrays) {
      if (a.data() != v.data) continue;
      Tensor t({v.rows, v.cols});
      const std::vector<float> got = be.download(a);
      std::copy(got.begin(), got.end(), t.values().begin());
      return t;
    }
    ADD_FAILURE() << "no array holds the view";
    return {};
  }
};

struct ShardResult {
  Tensor y, mean, rstd, dx, dw, db, sum, y_fused;
};

ShardResult run_shard(device::Backend& be, const comm::Communicator& group, const Problem& p) {
  const std::int64_t c = kHidden / group.size(), c0 = group.rank() * c;
  const bool ln = p.layer_norm();
  Shard s{be, {}};
  const View x = s.put(columns(p.x, c0, c)), dy = s.put(columns(p.dy, c0, c));
  const View w = s.put(columns(p.w, c0, c)), b = ln ? s.put(columns(p.b, c0, c)) : View{};
  const View y = s.put(Tensor({kRows, c}, std::nanf(""))), rstd = s.put(Tensor({1, kRows}));
  const View mean = ln ? s.put(Tensor({1, kRows})) : View{};
  const View dx = s.put(columns(p.dx0, c0, c)), dw = s.put(columns(p.dw0, c0, c));
  const View db = ln ? s.put(columns(p.db0, c0, c)) : View{};
  const View sums = s.scratch(2 * kRows + 3);  // longer than needed: the head is used
  norm_sharded_forward(be, p.norm, y, mean, rstd, x, w, b, kHidden, &group, sums);
  norm_sharded_backward(be, p.norm, dx, dw, db, dy, x, w, mean, rstd, kHidden, &group, sums);
  // The fused residual: sum = (x − r) + r, then the norm of it.
  Tensor x_minus_r = columns(p.x, c0, c);
  const Tensor r = columns(p.residual, c0, c);
  for (std::int64_t i = 0; i < x_minus_r.numel(); ++i) x_minus_r.values()[i] -= r.values()[i];
  const View a = s.put(x_minus_r), b_in = s.put(r);
  const View sum = s.put(Tensor({kRows, c})), y_fused = s.put(Tensor({kRows, c}));
  residual_norm_sharded_forward(be, p.norm, sum, y_fused, mean, rstd, a, b_in, w, b, kHidden,
                                &group, sums);
  ShardResult out{s.get(y),  ln ? s.get(mean) : Tensor(), s.get(rstd), s.get(dx),
                  s.get(dw), ln ? s.get(db) : Tensor(),   s.get(sum),  s.get(y_fused)};
  return out;
}

// The shard against the serial answer's columns (the statistics whole).
void expect_matches_serial(const ShardResult& got, const Problem& p, int parts, int part,
                           const std::string& where) {
  const std::int64_t c = kHidden / parts, c0 = part * c;
  const auto near = [&](const Tensor& a, const Tensor& b, const char* what) {
    EXPECT_LE(max_relative_error(a.values(), b.values()), 2e-5) << what << ", " << where;
  };
  near(got.y, columns(p.y, c0, c), "y");
  near(got.rstd, p.rstd, "rstd");
  if (p.layer_norm()) near(got.mean, p.mean, "mean");
  near(got.dx, columns(p.dx, c0, c), "dx");
  near(got.dw, columns(p.dw, c0, c), "dw");
  if (p.layer_norm()) near(got.db, columns(p.db, c0, c), "db");
  near(got.sum, columns(p.x, c0, c), "residual sum");
  near(got.y_fused, columns(p.y, c0, c), "y after the residual");
}

TEST(NormSharded, EqualsSerialOnEveryMeshOnHostAndOnTheStandIn) {
  const auto world = comm::Communicator::world();
  InvertedBackend stand_in;
  const auto staged = comm::Communicator::host_staged(world, stand_in.memory);
  for (const Norm norm : layout::all<Norm>()) {
    const Problem p(norm);
    for (const auto& shape : meshes2d(world.size())) {
      if (kHidden % shape[1] != 0) continue;
      const mesh::DeviceMesh host_mesh(world, shape), device_mesh(staged, shape);
      const comm::Communicator& group = host_mesh.dim_comm(1);
      std::ostringstream where;
      where << layout::name(norm) << ", rank " << world.rank() << " of mesh "
            << host_mesh.to_string();
      const ShardResult host = run_shard(cpu_backend(), group, p);
      expect_matches_serial(host, p, group.size(), group.rank(), where.str() + " (host)");
      const ShardResult dev = run_shard(stand_in, device_mesh.dim_comm(1), p);
      expect_matches_serial(dev, p, group.size(), group.rank(), where.str() + " (stand-in)");
      // The stand-in runs the CPU's ops on the same values: bit for bit the host's.
      EXPECT_EQ(dev.y.values()[0], host.y.values()[0]) << where.str();
      EXPECT_EQ(dev.dx.values()[0], host.dx.values()[0]) << where.str();
    }
  }
  if (world.size() > 1) {
    EXPECT_GT(stand_in.memory->to_host_calls, 0);  // the sums were staged
  }
}

TEST(NormSharded, RefusesWhatDoesNotAdd) {
  const auto world = comm::Communicator::world();
  if (world.size() == 1) GTEST_SKIP() << "a serial norm takes no scratch";
  Tensor x({kRows, 3}), y({kRows, 3}), w({1, 3}), b({1, 3}), mean({1, kRows}), rstd({1, kRows});
  std::vector<double> sums(2 * kRows);
  const auto run = [&](std::int64_t hidden, std::span<double> scratch) {
    norm_sharded_forward(cpu_backend(), Norm::kLayerNorm, host_view(y.matrix()),
                         host_view(mean.matrix()), host_view(rstd.matrix()), host_view(x.matrix()),
                         host_view(w.matrix()), host_view(b.matrix()), hidden, &world,
                         host_view(scratch));
  };
  EXPECT_EQ(error_of([&] { run(3 * world.size() + 1, sums); }),
            fmt::format("norm_sharded_forward: 3 local features × {} ranks != hidden={}",
                        world.size(), 3 * world.size() + 1));
  EXPECT_EQ(error_of([&] { run(3 * world.size(), std::span<double>(sums).first(7)); }),
            "norm_sharded_forward: scratch is fp64 1x7 (ld 7), needs fp64 1x10 (2 per row)");
  // The views' types are the backend's to check: an fp32 scratch is refused naming it.
  InvertedBackend stand_in;
  const auto staged = comm::Communicator::host_staged(world, stand_in.memory);
  device::Array f32 = stand_in.alloc(2 * kRows, Element::kF32);
  EXPECT_NE(error_of([&] {
              norm_sharded_forward(stand_in, Norm::kRmsNorm, {}, {}, {}, host_view(x.matrix()), {},
                                   {}, 3 * world.size(), &staged, f32.view(1, 2 * kRows));
            }).find("scratch is fp32 1x10 (ld 10), needs fp64 1x5"),
            std::string::npos);
}

}  // namespace
}  // namespace meshtp::parallel
