// k-dimensional tori (ATP Fig. 7b's 2D torus, TPUv4's 3D torus) and the ring-folded
// placement of a logical 2D mesh on them (MeshSlice's TPUv4 setup: each logical mesh dim is
// a ring, laid on the torus so that consecutive ranks are physical neighbours).
//
// Devices. dims = (a_0, …, a_{k−1}), device id = x_0 + a_0·(x_1 + a_1·(x_2 + …)) (x_0 varies
// fastest). Device i owns one link per dim of size ≥ 2, to its "+1" neighbour with
// wraparound (i → i + a_0 for dim 1, …), named "torus-<i>-d<j>"; the link is split-duplex,
// so a ring gets `link_gbps` per direction. Routing is dimension order (dim 0 first) in the
// shorter direction, ties broken exactly as SimGrid's TORUS cluster does, so a platform
// written as a TORUS cluster and the planner use the same hops. A route is then one straight
// run per dim, so the router counts many routes' link crossings run by run
// (Router::count_routes: O(dims) a route, not O(hops)) for the planner's ring pricing.
//
// TPUv4 slices (TPUv4 §2): 4×4×4 cubes of chips wired by ICI inside a
// cube and by optical circuit switches across cube faces; a slice whose dims are multiples
// of 4 closes every dim into a ring, so the slice is a 3D torus with 6 links per chip. The
// OCS is a passive mirror: it adds no hop, so the slice is routed like any torus.
//
// Worked example: dims (4, 4), route 0 → 10 (x 0→2, y 0→2): x first, 0→1→2 (two "+"
// hops; 2 is exactly half way, SimGrid goes "+"), then y 2→6→10: four hops.
#pragma once

#include <array>
#include <vector>

#include "topo/graph.hpp"

namespace meshtp::topo {

struct TorusSpec {
  std::vector<int> dims;  // a_0 fastest
  double link_gbps = 0;   // per link and direction
  double latency_us = 0;  // per link
};

// Throws meshtp::Error naming the bad dim or value.
Graph torus(const TorusSpec& spec);
// A TPUv4 slice: a 3D torus whose dims are multiples of 4 (whole 4×4×4 cubes).
Graph tpuv4_slice(const TorusSpec& spec);

// Coordinates of device `id` on `dims`, and back.
std::vector<int> torus_coords(const std::vector<int>& dims, int id);
int torus_id(const std::vector<int>& dims, const std::vector<int>& coords);

// Ring-folded placement of mesh (d1, d2) on a torus: device of each row-major rank
// r = i·d2 + j. Each torus dim is given wholly to one mesh dim, or split a = p·q between
// them; inside a mesh dim its parts are walked in snake order (boustrophedon), so
// consecutive ranks are neighbours and a dim made of whole torus dims closes its ring in one
// hop. Of all such folds, the one whose worse mesh dim has the highest ring bandwidth wins
// (then the better dim, then the shorter ring latency; topo/rings.hpp prices them).
// Worked example: (32, 8) on 4×8×8 gives dim 1 = the torus' y ring and dim 0 = the 4×8 x–z
// plane snaked into a ring of 32: every ring hop is one link.
std::vector<int> fold_on_torus(const Graph& graph, const std::vector<int>& dims, int d1, int d2);

}  // namespace meshtp::topo
