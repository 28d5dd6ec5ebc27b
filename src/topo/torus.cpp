#include "topo/torus.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <numeric>

#include "core/error.hpp"
#include "topo/rings.hpp"

namespace meshtp::topo {
namespace {

// SimGrid's TORUS cluster routing (kernel/routing/TorusZone.cpp, get_local_route): dimension
// order, and in each dim "+" when the target is at most half way round on the right of the
// *source* coordinate, else "−". Going "+" crosses the current node's link of that dim
// forwards; going "−" crosses the next node's link backwards.
class TorusRouter : public Router {
 public:
  TorusRouter(std::vector<int> dims, std::vector<std::vector<int>> link_of)
      : dims_(std::move(dims)), link_of_(std::move(link_of)) {}

  Route route(const Graph& graph, int src, int dst) const override {
    Route r;
    append_route(graph, src, dst, r);
    return r;
  }

  void append_route(const Graph&, int src, int dst, Route& r) const override {
    int current = src;
    int product = 1;
    for (std::size_t j = 0; j < dims_.size(); ++j) {
      const int a = dims_[j];
      // Coordinates of src and dst in dim j (torus_coords, without its vectors: a planner
      // routes every ring hop of every mesh dim).
      const int my = (src / product) % a;
      const int to = (dst / product) % a;
      const bool right = (to > my && to <= my + a / 2) || (my > a / 2 && (my + a / 2) % a >= to);
      while ((current / product) % a != to) {
        const int coord = (current / product) % a;
        if (right) {
          const int next = coord == a - 1 ? current - (a - 1) * product : current + product;
          r.push_back(Hop{.link = link_of_[static_cast<std::size_t>(current)][j], .forward = true});
          current = next;
        } else {
          const int next = coord == 0 ? current + (a - 1) * product : current - product;
          r.push_back(Hop{.link = link_of_[static_cast<std::size_t>(next)][j], .forward = false});
          current = next;
        }
      }
      product *= a;
    }
  }

 private:
  std::vector<int> dims_;
  std::vector<std::vector<int>> link_of_;  // device → dim → link id (−1: dim of size 1)
};

std::int64_t product(const std::vector<int>& v) {
  std::int64_t p = 1;
  for (const int x : v) p *= x;
  return p;
}

}  // namespace

std::vector<int> torus_coords(const std::vector<int>& dims, int id) {
  std::vector<int> c(dims.size());
  for (std::size_t j = 0; j < dims.size(); ++j) {
    c[j] = id % dims[j];
    id /= dims[j];
  }
  return c;
}

int torus_id(const std::vector<int>& dims, const std::vector<int>& coords) {
  int id = 0;
  for (std::size_t j = dims.size(); j-- > 0;) id = id * dims[j] + coords[j];
  return id;
}

Graph torus(const TorusSpec& spec) {
  MESHTP_CHECK(!spec.dims.empty(), "torus: dims must not be empty");
  for (std::size_t j = 0; j < spec.dims.size(); ++j) {
    MESHTP_CHECK(spec.dims[j] >= 1, "torus: dims[{}]={} must be at least 1", j, spec.dims[j]);
  }
  MESHTP_CHECK(product(spec.dims) <= (1 << 20), "torus: {} devices is more than 2^20",
               product(spec.dims));
  const int n = static_cast<int>(product(spec.dims));
  Graph g(n);
  std::vector<std::vector<int>> link_of(static_cast<std::size_t>(n),
                                        std::vector<int>(spec.dims.size(), -1));
  int stride = 1;
  for (std::size_t j = 0; j < spec.dims.size(); ++j) {
    const int a = spec.dims[j];
    if (a >= 2) {
      for (int i = 0; i < n; ++i) {
        const int coord = (i / stride) % a;
        const int next = coord == a - 1 ? i - (a - 1) * stride : i + stride;
        link_of[static_cast<std::size_t>(i)][j] =
            g.add_link(fmt::format("torus-{}-d{}", i, j), i, next, spec.link_gbps,
                       spec.latency_us, Sharing::kSplitDuplex);
      }
    }
    stride *= a;
  }
  g.set_router(std::make_shared<TorusRouter>(spec.dims, std::move(link_of)));
  g.torus_dims = spec.dims;
  return g;
}

Graph tpuv4_slice(const TorusSpec& spec) {
  MESHTP_CHECK(spec.dims.size() == 3, "tpuv4: dims must have 3 entries (a 3D torus), got {}",
               spec.dims.size());
  for (std::size_t j = 0; j < 3; ++j) {
    MESHTP_CHECK(spec.dims[j] >= 4 && spec.dims[j] % 4 == 0, "tpuv4: dims[{}]={} must be a "
                 "multiple of 4 (a slice is made of whole 4x4x4 cubes)", j, spec.dims[j]);
  }
  return torus(spec);
}

// ---- ring-folded placement ----------------------------------------------------------------

namespace {

// How one torus dim is shared between the two mesh dims: q positions go to mesh dim 1, p to
// mesh dim 0; `v_inner` lays the dim-1 part contiguously (x = u·q + v, v reversed on odd
// u), otherwise the dim-0 part.
struct AxisShare {
  int p = 1;
  int q = 1;
  bool v_inner = true;
  int position(int u, int v) const {
    if (v_inner) return u * q + (u % 2 == 0 ? v : q - 1 - v);
    return v * p + (v % 2 == 0 ? u : p - 1 - u);
  }
};

// Reflected mixed-radix Gray code (radix[0] fastest): digit k of index i is i's ordinary
// digit, reversed when i / (radix[0]·…·radix[k]) is odd. Consecutive indices differ by ±1 in
// one digit; with an even top radix the last code is (0, …, 0, top−1), one step from the
// first. Radix (2, 2, 2): 000 100 110 010 011 111 101 001.
std::vector<int> gray_digits(const std::vector<int>& radix, int i) {
  std::vector<int> d(radix.size());
  int rest = i;
  for (std::size_t k = 0; k < radix.size(); ++k) {
    const int b = rest % radix[k];
    rest /= radix[k];
    d[k] = rest % 2 == 1 ? radix[k] - 1 - b : b;
  }
  return d;
}

struct Fold {
  std::vector<AxisShare> axes;
  std::vector<int> order0, order1;  // torus dims giving parts to mesh dim 0 / 1, fastest first
};

std::vector<int> place(const Fold& f, const std::vector<int>& dims, int d1, int d2) {
  std::vector<int> radix0, radix1;
  for (const int k : f.order0) radix0.push_back(f.axes[static_cast<std::size_t>(k)].p);
  for (const int k : f.order1) radix1.push_back(f.axes[static_cast<std::size_t>(k)].q);
  std::vector<int> out(static_cast<std::size_t>(d1) * d2);
  std::vector<int> u(dims.size(), 0), v(dims.size(), 0), x(dims.size(), 0);
  for (int i = 0; i < d1; ++i) {
    const std::vector<int> g0 = gray_digits(radix0, i);
    std::fill(u.begin(), u.end(), 0);
    for (std::size_t k = 0; k < f.order0.size(); ++k) {
      u[static_cast<std::size_t>(f.order0[k])] = g0[k];
    }
    for (int j = 0; j < d2; ++j) {
      const std::vector<int> g1 = gray_digits(radix1, j);
      std::fill(v.begin(), v.end(), 0);
      for (std::size_t k = 0; k < f.order1.size(); ++k) {
        v[static_cast<std::size_t>(f.order1[k])] = g1[k];
      }
      for (std::size_t k = 0; k < dims.size(); ++k) x[k] = f.axes[k].position(u[k], v[k]);
      out[static_cast<std::size_t>(i) * d2 + j] = torus_id(dims, x);
    }
  }
  return out;
}

// Parts of one mesh dim in snake order: split parts first, whole torus dims after, an even
// whole dim last (it closes the ring through its wraparound).
std::vector<int> part_order(const std::vector<AxisShare>& axes, bool dim1) {
  std::vector<int> split, whole;
  for (int k = 0; k < static_cast<int>(axes.size()); ++k) {
    const AxisShare& s = axes[static_cast<std::size_t>(k)];
    const int part = dim1 ? s.q : s.p;
    if (part <= 1) continue;
    (part == s.p * s.q ? whole : split).push_back(k);
  }
  std::stable_partition(whole.begin(), whole.end(), [&](int k) {
    const AxisShare& s = axes[static_cast<std::size_t>(k)];
    return (dim1 ? s.q : s.p) % 2 == 1;
  });
  split.insert(split.end(), whole.begin(), whole.end());
  return split;
}

}  // namespace

std::vector<int> fold_on_torus(const Graph& graph, const std::vector<int>& dims, int d1, int d2) {
  MESHTP_CHECK(static_cast<std::int64_t>(d1) * d2 == product(dims), "fold: mesh {}x{} has {} "
               "ranks but the torus has {} devices", d1, d2, static_cast<std::int64_t>(d1) * d2,
               product(dims));
  // Enumerate q_k | a_k with Π q_k = d2, each split laid out both ways.
  std::vector<Fold> folds;
  Fold f;
  f.axes.resize(dims.size());
  auto recurse = [&](auto&& self, std::size_t k, int remaining) -> void {
    if (k == dims.size()) {
      if (remaining != 1) return;
      std::vector<std::size_t> splits;
      for (std::size_t i = 0; i < dims.size(); ++i) {
        if (f.axes[i].p > 1 && f.axes[i].q > 1) splits.push_back(i);
      }
      for (unsigned mask = 0; mask < (1u << splits.size()); ++mask) {
        Fold g = f;
        for (std::size_t s = 0; s < splits.size(); ++s) {
          g.axes[splits[s]].v_inner = !(mask >> s & 1u);
        }
        g.order0 = part_order(g.axes, false);
        g.order1 = part_order(g.axes, true);
        folds.push_back(std::move(g));
      }
      return;
    }
    const int a = dims[k];
    for (int q = 1; q <= a; ++q) {
      if (a % q != 0 || remaining % q != 0) continue;
      f.axes[k] = AxisShare{.p = a / q, .q = q, .v_inner = true};
      self(self, k + 1, remaining / q);
    }
  };
  recurse(recurse, 0, d2);
  MESHTP_CHECK(!folds.empty(), "fold: mesh {}x{} cannot be folded onto torus dims {}", d1, d2,
               fmt::join(dims, "x"));
  // Key: (worse dim's B', better dim's B', −longest hop latency), compared lexicographically.
  const std::vector<int> shape{d1, d2};
  std::vector<int> best;
  std::array<double, 3> best_key{};
  for (const Fold& fold : folds) {
    std::vector<int> p = place(fold, dims, d1, d2);
    std::vector<double> bw;
    double latency = 0;
    for (int dim = 0; dim < 2; ++dim) {
      if (shape[static_cast<std::size_t>(dim)] == 1) continue;
      const DimRings r = ring_dim(graph, p, shape, dim);
      bw.push_back(r.link_gbps);
      latency = std::max(latency, r.latency_us);
    }
    std::sort(bw.begin(), bw.end());
    const std::array<double, 3> key{bw.empty() ? 0 : bw.front(), bw.empty() ? 0 : bw.back(),
                                    -latency};
    if (best.empty() || best_key < key) {
      best_key = key;
      best = std::move(p);
    }
  }
  return best;
}

}  // namespace meshtp::topo
