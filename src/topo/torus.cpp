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
//
// So in dim j (size a, device stride p = a_0·…·a_{j−1}) a route is one straight run along
// one ring: the ring through the node it has reached, whose coordinates are dst's in the
// dims before j and src's in the dims after; from x = src's coordinate to y = dst's,
// "+" over L = (y − x) mod a links, or "−" over L = (x − y) mod a. Number the links of that
// ring by position (position x: the link from the node at x to the node at x + 1): "+"
// crosses positions x, x+1, …, x+L−1 forwards, "−" crosses x−1, …, x−L = y backwards — in
// both cases the cyclic range [s, s + L) of positions, s = x ("+") or y ("−").
class TorusRouter : public Router {
 public:
  TorusRouter(std::vector<int> dims, std::vector<int> link_of, double latency_us)
      : dims_(std::move(dims)), link_of_(std::move(link_of)), latency_us_(latency_us) {
    int n = 1;
    for (const int a : dims_) {
      strides_.push_back(n);
      n *= a;
    }
    coords_.resize(static_cast<std::size_t>(n) * dims_.size());
    for (int id = 0; id < n; ++id) {
      for (std::size_t j = 0; j < dims_.size(); ++j) {
        coords_[static_cast<std::size_t>(id) * dims_.size() + j] = (id / strides_[j]) % dims_[j];
      }
    }
  }

  Route route(const Graph& graph, int src, int dst) const override {
    Route r;
    append_route(graph, src, dst, r);
    return r;
  }

  void append_route(const Graph&, int src, int dst, Route& r) const override {
    int current = src;
    for (std::size_t j = 0; j < dims_.size(); ++j) {
      const int a = dims_[j];
      const int p = strides_[j];
      const int from = coord(src, j);
      const int to = coord(dst, j);
      if (from == to) continue;
      const bool up = plus(from, to, a);
      // Walks the run link by link from position `from`; `x` is the current node's
      // coordinate in dim j.
      const int base = current - from * p;
      for (int x = from; x != to;) {
        if (up) {
          r.push_back(Hop{.link = link(base + x * p, j), .forward = true});
          x = x == a - 1 ? 0 : x + 1;
        } else {
          x = x == 0 ? a - 1 : x - 1;
          r.push_back(Hop{.link = link(base + x * p, j), .forward = false});
        }
      }
      current = base + to * p;
    }
  }

  // Each message adds at most one run per dim, counted in a difference array per (dim,
  // direction) indexed by the device at each ring position: +1 at the run's first position,
  // −1 after its last (a run that wraps past position a − 1 is two: [s, a) and [0, s+L−a)).
  // A prefix sum along every ring then gives the crossings of each link direction: O(dims)
  // a message and O(devices · dims) a call, instead of O(hops). Every link of a torus has
  // the spec's latency, so a route of h hops takes h of them added in order, and the
  // slowest route is the longest.
  RouteTotals count_routes(const Graph&, const std::vector<Message>& messages,
                           std::vector<int>& crossings) const override {
    const std::size_t k = dims_.size();
    const std::size_t n = coords_.size() / k;
    // diffs[(j·2 + dir)·n + device]: the difference array of dim j, dir 0 "+", 1 "−".
    std::vector<int> diffs(k * 2 * n, 0);
    RouteTotals totals;
    for (const Message& m : messages) {
      int current = m.src;
      int hops = 0;
      for (std::size_t j = 0; j < k; ++j) {
        const int a = dims_[j];
        const int p = strides_[j];
        const int from = coord(m.src, j);
        const int to = coord(m.dst, j);
        if (from == to) continue;
        const bool up = plus(from, to, a);
        const int length = up ? (to - from + a) % a : (from - to + a) % a;
        const int first = up ? from : to;
        const int base = current - from * p;
        int* diff = diffs.data() + (j * 2 + (up ? 0 : 1)) * n;
        diff[base + first * p] += 1;
        const int end = first + length;
        if (end < a) {
          diff[base + end * p] -= 1;
        } else if (end > a) {
          diff[base] += 1;
          diff[base + (end - a) * p] -= 1;
        }
        hops += length;
        current = base + to * p;
      }
      totals.max_hops = std::max(totals.max_hops, hops);
    }
    for (std::size_t j = 0; j < k; ++j) {
      if (dims_[j] < 2) continue;  // no links, no runs
      const std::size_t p = static_cast<std::size_t>(strides_[j]);
      for (const std::size_t dir : {0, 1}) {
        int* diff = diffs.data() + (j * 2 + dir) * n;
        for (std::size_t id = 0; id < n; ++id) {
          // Devices in id order: the previous position on id's ring (id − p) is summed.
          if (coords_[id * k + j] > 0) diff[id] += diff[id - p];
          if (diff[id] != 0) {
            crossings[static_cast<std::size_t>(link(static_cast<int>(id), j)) * 2 + dir] +=
                diff[id];
          }
        }
      }
    }
    for (int h = 0; h < totals.max_hops; ++h) totals.max_latency_us += latency_us_;
    return totals;
  }

 private:
  // SimGrid's rule: "+" when `to` is 1 to a/2 steps to the right of `from`.
  static bool plus(int from, int to, int a) {
    return (to > from && to <= from + a / 2) || (from > a / 2 && (from + a / 2) % a >= to);
  }
  int coord(int id, std::size_t j) const {
    return coords_[static_cast<std::size_t>(id) * dims_.size() + j];
  }
  int link(int id, std::size_t j) const {
    return link_of_[static_cast<std::size_t>(id) * dims_.size() + j];
  }

  std::vector<int> dims_;
  std::vector<int> link_of_;  // device · dims + dim → link id (−1: dim of size 1)
  double latency_us_;         // every link's
  std::vector<int> strides_;  // device id distance between neighbours in each dim
  std::vector<int> coords_;   // device · dims + dim → coordinate
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
  std::vector<int> link_of(static_cast<std::size_t>(n) * spec.dims.size(), -1);
  int stride = 1;
  for (std::size_t j = 0; j < spec.dims.size(); ++j) {
    const int a = spec.dims[j];
    if (a >= 2) {
      for (int i = 0; i < n; ++i) {
        const int coord = (i / stride) % a;
        const int next = coord == a - 1 ? i - (a - 1) * stride : i + stride;
        link_of[static_cast<std::size_t>(i) * spec.dims.size() + j] =
            g.add_link(fmt::format("torus-{}-d{}", i, j), i, next, spec.link_gbps, spec.latency_us,
                       Sharing::kSplitDuplex);
      }
    }
    stride *= a;
  }
  g.set_router(std::make_shared<TorusRouter>(spec.dims, std::move(link_of), spec.latency_us));
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
