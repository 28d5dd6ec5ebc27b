// Human-readable renderings of plans, explanations and topologies. Returns strings: library
// code never prints (the CLI writes them through cli::out()).
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

#include "plan/mesh_links.hpp"
#include "plan/planner.hpp"
#include "plan/topology.hpp"

namespace meshtp::plan {

// Header line, one row per candidate (rank, strategy, mesh, knobs, times, TFLOP/s, memory,
// B1' B2' B1 B2, status) and the best candidate.
std::string format_plan(const PlanRequest& request, const PlanResult& result);

// The per-operator breakdown of one candidate: ATP operators with their all-reduces, or
// the FC layers' three GeMMs with collectives, pipeline stages and the knob sweep.
std::string format_explanation(const PlanRequest& request, const Explanation& explanation);
nlohmann::json to_json(const Explanation& explanation);

// The levels of the hierarchy and, given a mesh, each dim's groups and bandwidths.
std::string format_topology(const Topology& topology, const std::optional<MeshLinks>& links);
nlohmann::json to_json(const MeshLinks& links);

}  // namespace meshtp::plan
