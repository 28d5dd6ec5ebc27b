#include "plan/layout_search.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <ostream>
#include <tuple>

#include "core/error.hpp"
#include "layout/pipeline_schedule.hpp"
#include "plan/mesh_links.hpp"
#include "plan/planner.hpp"

namespace meshtp::plan {
namespace {

// Ascending, in O(√n): the batch may be up to 2^24 and the devices 2^20.
std::vector<int> divisors(int n) {
  std::vector<int> small, large;
  for (int d = 1; d <= n / d; ++d) {
    if (n % d != 0) continue;
    small.push_back(d);
    if (d != n / d) large.push_back(n / d);
  }
  small.insert(small.end(), large.rbegin(), large.rend());
  return small;
}

struct Link {
  double gbps = 0, latency_us = 0;
};

// B' and latency of dim `dim` of the row-major layout `shape` on the full topology.
Link link_of(TopologyLinks& links, const std::vector<int>& shape, int dim) {
  const Topology& t = links.topology();
  const int size = shape[static_cast<std::size_t>(dim)];
  if (size == 1) return {};
  int inner = 1;
  for (std::size_t k = static_cast<std::size_t>(dim) + 1; k < shape.size(); ++k) inner *= shape[k];
  if (!t.graph) {
    const ModelledLink& m = links.group_link(size, inner);
    return {m.link_gbps, m.latency_us};
  }
  const int n = t.device_count();
  const MeshLinks& mesh = inner == 1 ? links.mesh(n / size, size) : links.mesh(n / inner, inner);
  const DimLinks& d = mesh.dims[inner == 1 ? 1 : 0];
  return {d.link_gbps.value_or(0), d.modelled.latency_us};
}

RingParams ring(const Topology& t, const Link& l) {
  return {.t_launch_s = t.launch_us * kUs,
          .l_sync_s = l.latency_us * kUs,
          .bw_bytes_per_s = std::max(l.gbps, 1e-9) * kGB};
}

// The virtual stages tried: 1, and with a pipeline the interleaved v ∈ {2, 3, 4} that divide
// a rank's layers when m is a multiple of p (the runtime's condition, pipeline_schedule.hpp).
std::vector<int> virtual_stages(int layers_per_rank, int pp, int m) {
  std::vector<int> out{1};
  if (pp == 1 || m % pp != 0) return out;
  for (int v = 2; v <= 4; ++v) {
    if (layers_per_rank % v == 0) out.push_back(v);
  }
  return out;
}

}  // namespace

void price_layout(LayoutCandidate& c, const LayoutTraffic& t) {
  const layout::Plan& p = c.plan;
  const int pp = p.pp, m = p.microbatches, v = p.virtual_stages, dp = p.dp;
  c.bubble = layout::bubble_fraction(p.schedule, pp, m, v);
  // Per boundary crossing, the activation forward and its gradient back; interleaved, a
  // microbatch crosses v times as many boundaries (every chunk's end is a rank's edge).
  const double p2p = 2 * (t.stream_bytes / t.pipe.bw_bytes_per_s + t.pipe.l_sync_s);
  c.t_p2p_s = pp > 1 ? v * (m + pp - 1) * p2p : 0;
  c.t_dp_s = 0;
  if (dp > 1) {
    const double shard = t.params_bytes / dp;
    // ZeRO ≥ 2 reduce-scatters every microbatch's gradient into the sharded accumulators.
    c.t_dp_s = p.zero >= 2 ? m * ring_collective_time(t.data, dp, shard)
                           : ring_all_reduce_time(t.data, dp, t.params_bytes);
    if (p.zero >= 1) c.t_dp_s += ring_collective_time(t.data, dp, shard);
    // ZeRO-3 gathers every block before each forward (the rematerialised one too) and
    // backward of every microbatch.
    const int gathers = pp > 1 ? 3 : 2;
    if (p.zero == 3) c.t_dp_s += gathers * m * ring_collective_time(t.data, dp, shard);
  }
  c.t_step_s = (c.t_stage_s + c.t_rerun_s) * m / (1 - c.bubble) + c.t_p2p_s + c.t_dp_s;
}

void LayoutRequest::validate() const {
  topology.validate();
  model.validate();
  MESHTP_CHECK(devices == topology.device_count(),
               "topology '{}' has {} devices but --devices is {}", topology.name,
               topology.device_count(), devices);
  MESHTP_CHECK(!strategies.empty(), "no strategy selected");
  MESHTP_CHECK(max_tp >= 1 && max_microbatches >= 1,
               "max tp={} and max microbatches={} must be at least 1", max_tp, max_microbatches);
}

Topology tp_topology(const Topology& topology, int d1, int d2) {
  TopologyLinks links(topology);
  return tp_topology(links, d1, d2);
}

Topology tp_topology(TopologyLinks& links, int d1, int d2) {
  const Topology& topology = links.topology();
  const int n = topology.device_count();
  const std::vector<int> shape{n / (d1 * d2), d1, d2};
  Topology t = topology;
  t.name = fmt::format("{} (a {}x{} stage)", topology.name, d1, d2);
  t.graph.reset();
  t.calibration = {};
  t.levels.clear();
  const Link l0 = link_of(links, shape, 1), l1 = link_of(links, shape, 2);
  const auto level = [](const char* name, int members, double gbps, double latency_us) {
    Level l;
    l.name = name;
    l.members = members;
    l.group_gbps = gbps;
    l.latency_us = latency_us;
    return l;
  };
  if (d1 > 1) t.levels.push_back(level("tp-dim0", d1, d2 * l0.gbps, l0.latency_us));
  if (d2 > 1) t.levels.push_back(level("tp-dim1", d2, l1.gbps, l1.latency_us));
  if (t.levels.empty()) t.levels.push_back(level("device", 1, 1, 0));
  return t;
}

std::vector<LayoutCandidate> search_layouts(const LayoutRequest& r) {
  return search_layouts(r, 0).ranked;
}

LayoutSearch search_layouts(const LayoutRequest& r, std::size_t keep) {
  r.validate();
  const ModelSpec& model = r.model;
  const int n = r.devices;
  const double e = model.element_bytes();
  // The tensor-parallel stage price, one per (strategy, mesh, chunks, microbatch rows,
  // layers, recompute): the same for every dp, zero and schedule.
  std::map<std::tuple<int, int, int, int, int, int, int>, Candidate> stages;
  // The full topology's links and each mesh's stage topology, computed once.
  TopologyLinks links(r.topology);
  std::map<std::pair<int, int>, Topology> stage_topologies;
  const auto stage_topology = [&](int d1, int d2) -> const Topology& {
    auto it = stage_topologies.find({d1, d2});
    if (it == stage_topologies.end()) {
      it = stage_topologies.emplace(std::pair{d1, d2}, tp_topology(links, d1, d2)).first;
    }
    return it->second;
  };
  // A pipeline schedule's buffer counts, one replay per (schedule, pp, m, v) instead of one
  // per pipeline rank of every layout.
  std::map<std::tuple<int, int, int, int>, std::vector<PipelineBuffers>> schedules;
  const auto buffers_of = [&](const layout::Plan& plan) -> const std::vector<PipelineBuffers>& {
    const auto key = std::tuple{static_cast<int>(plan.schedule), plan.pp, plan.microbatches,
                                plan.virtual_stages};
    auto it = schedules.find(key);
    if (it == schedules.end()) it = schedules.emplace(key, pipeline_buffers(plan)).first;
    return it->second;
  };
  // The ranking: feasible first, then by step time, then in the order enumerated (the
  // stable sort of the whole list). With `keep`, the kept are a heap whose top ranks last.
  struct Found {
    LayoutCandidate c;
    std::int64_t order = 0;
  };
  const auto ranks_before = [](const Found& a, const Found& b) {
    if (a.c.feasible != b.c.feasible) return a.c.feasible;
    if (a.c.t_step_s != b.c.t_step_s) return a.c.t_step_s < b.c.t_step_s;
    return a.order < b.order;
  };
  std::vector<Found> kept;
  LayoutSearch result;
  // Whether a layout found now whose step takes at least `t_lower` seconds ranks after the
  // `keep` kept: they are all feasible and no slower (a tie ranks it after, found later).
  const auto bounded_out = [&](double t_lower) {
    return keep > 0 && kept.size() == keep && kept.front().c.feasible &&
           t_lower >= kept.front().c.t_step_s;
  };
  const auto add = [&](Found f) {
    if (keep == 0) {
      kept.push_back(std::move(f));
    } else if (kept.size() < keep || ranks_before(f, kept.front())) {
      kept.push_back(std::move(f));
      std::push_heap(kept.begin(), kept.end(), ranks_before);
      if (kept.size() > keep) {
        std::pop_heap(kept.begin(), kept.end(), ranks_before);
        kept.pop_back();
      }
    }
  };
  for (const int tp : divisors(n)) {
    if (tp > r.max_tp) continue;
    for (const int pp : divisors(n / tp)) {
      if (model.layers % pp != 0) continue;
      const int dp = n / (tp * pp);
      if (model.batch % dp != 0) continue;
      const Link pipe = link_of(links, {dp, pp, tp}, 1);
      const Link data = link_of(links, {dp, pp, tp}, 0);
      for (const int m : divisors(model.batch / dp)) {
        // 1F1B needs m ≥ p; with pp = 1, m > 1 is gradient accumulation (smaller
        // activations, the same work).
        if (m > r.max_microbatches || m < pp) continue;
        for (const auto& [d1, d2] : enumerate_meshes(tp)) {
          for (const Strategy requested : r.strategies) {
            // ATP on a mesh with a dim of size 1 is Megatron's (candidate.hpp).
            const Strategy strategy = candidate_strategy(requested, {d1, d2});
            if (strategy == Strategy::kMegatron && d1 > 1 && d2 > 1) continue;
            if (strategy == Strategy::kTp1d && d2 != 1) continue;  // mesh (N, 1) only
            // The runtime's ATP block shards whole heads over all d1·d2 ranks
            // (model/block.hpp validate).
            if (!layout::is_gemm2d(strategy) && model.heads % (d1 * d2) != 0) continue;
            for (const int chunks : r.chunks) {
              ModelSpec mb = model;
              mb.batch = model.batch / (dp * m);
              mb.layers = model.layers / pp;
              const auto stage_of = [&](Recompute recompute) -> const Candidate& {
                mb.recompute = recompute;
                const auto key = std::tuple{static_cast<int>(strategy), d1, d2, chunks,
                                            mb.batch, mb.layers, static_cast<int>(recompute)};
                auto it = stages.find(key);
                if (it == stages.end()) {
                  PlanRequest sub{.topology = stage_topology(d1, d2),
                                  .model = mb,
                                  .devices = tp,
                                  .strategies = {strategy},
                                  .chunks = {chunks}};
                  it = stages.emplace(key, evaluate(sub, strategy, d1, d2, chunks)).first;
                }
                return it->second;
              };
              for (const Recompute recompute :
                   {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
                const Candidate& stage = stage_of(recompute);
                if (!stage.valid) continue;
                // The boundary rematerialisation: one more forward of the stage per
                // microbatch, the planner's own price of it (full recomputation's surplus).
                const double rerun = pp > 1 ? stage_of(Recompute::kFull).t_step_s -
                                                  stage_of(Recompute::kNone).t_step_s
                                            : 0;
                const std::vector<int> vs = virtual_stages(model.layers / pp, pp, m);
                const int zeros = dp > 1 ? 4 : 1;
                // A bound for all of them: no bubble, no transfers.
                if (bounded_out((stage.t_step_s + rerun) * m)) {
                  result.searched += static_cast<std::int64_t>(vs.size()) * zeros;
                  continue;
                }
                mb.recompute = recompute;
                layout::Plan plan = to_plan(stage);
                plan.dp = dp;
                plan.pp = pp;
                plan.microbatches = m;
                plan.recompute = recompute;
                plan.provenance.reset();
                const double stream_bytes = block_floats(mb, plan).input * e;
                const double params_bytes =
                    rank_memory(model, plan, 0, HeadBuffers::kSharded, buffers_of(plan))
                        .params_bytes;
                for (const int v : vs) {
                  plan.virtual_stages = v;
                  plan.schedule = v > 1   ? layout::Schedule::kInterleaved
                                  : m > 1 ? layout::Schedule::k1F1B
                                          : layout::Schedule::kGpipe;
                  for (int zero = 0; zero < zeros; ++zero) {
                    plan.zero = zero;
                    LayoutCandidate c;
                    c.plan = plan;
                    c.t_stage_s = stage.t_step_s;
                    c.t_rerun_s = rerun;
                    price_layout(c, {.pipe = ring(r.topology, pipe),
                                     .data = ring(r.topology, data),
                                     .stream_bytes = stream_bytes,
                                     .params_bytes = params_bytes});
                    const std::int64_t order = result.searched++;
                    // The memory model is most of a layout's price: not for one that ranks
                    // after the kept whether it fits or not.
                    if (bounded_out(c.t_step_s)) continue;
                    ++result.priced;
                    c.memory =
                        peak_rank_memory(model, plan, HeadBuffers::kSharded, buffers_of(plan));
                    c.feasible = c.memory.total_gib() <= r.topology.memory_gib;
                    add({std::move(c), order});
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  std::sort(kept.begin(), kept.end(), ranks_before);
  result.ranked.reserve(kept.size());
  for (Found& f : kept) result.ranked.push_back(std::move(f.c));
  return result;
}

std::ostream& operator<<(std::ostream& os, const LayoutCandidate& c) {
  const layout::Plan& p = c.plan;
  return os << fmt::format(
             "dp={} pp={}{} tp={}x{} {} m={} zero={} recompute={}: step {:.4g} s (stage {:.4g}{} s "
             "× {}, bubble {:.1f}%, p2p {:.3g} s, dp {:.3g} s), {:.1f} GiB{}",
             p.dp, p.pp, p.virtual_stages > 1 ? fmt::format(" v={}", p.virtual_stages) : "",
             p.mesh[0], p.mesh[1], layout::name(p.strategy), p.microbatches, p.zero,
             layout::name(p.recompute), c.t_step_s, c.t_stage_s,
             c.t_rerun_s > 0 ? fmt::format(" + rerun {:.4g}", c.t_rerun_s) : "", p.microbatches,
             100 * c.bubble, c.t_p2p_s, c.t_dp_s, c.memory.total_gib(),
             c.feasible ? "" : " infeasible");
}

nlohmann::json to_json(const LayoutCandidate& c) {
  return {{"plan", layout::to_json(c.plan)},
          {"feasible", c.feasible},
          {"t_step_s", c.t_step_s},
          {"t_stage_s", c.t_stage_s},
          {"t_rerun_s", c.t_rerun_s},
          {"bubble", c.bubble},
          {"t_p2p_s", c.t_p2p_s},
          {"t_dp_s", c.t_dp_s},
          {"memory_gib", c.memory.total_gib()}};
}

}  // namespace meshtp::plan
