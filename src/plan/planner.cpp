#include "plan/planner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <ostream>

#include "core/error.hpp"
#include "plan/provenance.hpp"

namespace meshtp::plan {

void PlanRequest::validate() const {
  topology.validate();
  model.validate();
  MESHTP_CHECK(devices >= 1, "--devices={} must be at least 1", devices);
  MESHTP_CHECK(devices == topology.device_count(),
               "topology '{}' has {} devices but --devices is {}", topology.name,
               topology.device_count(), devices);
  MESHTP_CHECK(!strategies.empty(), "no strategy selected");
  MESHTP_CHECK(!chunks.empty(), "no chunk count selected");
  for (const int c : chunks) MESHTP_CHECK(c >= 1, "chunks={} must be at least 1", c);
}

void require_dense_table(const ModelSpec& model) {
  // The tensor-parallel table prices dense layers; the experts are priced by the 3D search.
  MESHTP_CHECK(!model.is_moe(),
               "model '{}' is a mixture of experts (num_experts={}): the tensor-parallel table "
               "prices dense layers only; plan it with --3d (expert parallelism, docs/moe.md)",
               model.name, model.num_experts);
}

std::ostream& operator<<(std::ostream& os, const PlanRequest& r) {
  os << "plan request: " << r.model << " on " << r.topology << ", " << r.devices
     << " devices, strategies";
  for (const Strategy s : r.strategies) os << ' ' << name(s);
  os << ", chunks";
  for (const int c : r.chunks) os << ' ' << c;
  return os;
}

std::ostream& operator<<(std::ostream& os, const PlanResult& result) {
  for (const Candidate& c : result.candidates) os << c << '\n';
  if (const Candidate* best = result.best_candidate()) return os << "best: " << *best;
  return os << "best: none";
}

std::vector<std::array<int, 2>> enumerate_meshes(int n) {
  std::vector<std::array<int, 2>> meshes;
  for (int d1 = n; d1 >= 1; --d1) {
    if (n % d1 == 0) meshes.push_back({d1, n / d1});
  }
  return meshes;
}

namespace {

// Model-level reasons a sequence/2D-sharded layer cannot run on (d1, d2).
std::optional<std::string> sharded_layer_reason(const ModelSpec& m, Strategy s, int d1, int d2) {
  const int dims[2] = {d1, d2};
  for (int i = 0; i < 2; ++i) {
    if (m.hidden % dims[i] != 0) {
      return fmt::format("hidden={} is not divisible by mesh dim {} (size {})", m.hidden, i,
                         dims[i]);
    }
  }
  if (s == Strategy::kTp1d) {
    if (m.heads % d1 != 0) {
      return fmt::format("heads={} is not divisible by mesh dim 0 (size {})", m.heads, d1);
    }
    if (m.tokens() % d1 != 0) {
      return fmt::format("tokens b*s={} is not divisible by mesh dim 0 (size {}) for sequence "
                         "parallelism", m.tokens(), d1);
    }
    return std::nullopt;
  }
  // 2D: tokens (whole sequences) over mesh rows, heads over mesh columns, so the attention
  // core runs locally.
  if (m.heads % d2 != 0) {
    return fmt::format("heads={} is not divisible by mesh dim 1 (size {})", m.heads, d2);
  }
  if (m.batch % d1 != 0) {
    return fmt::format("batch={} is not divisible by mesh dim 0 (size {}): the attention core "
                       "needs whole sequences on a mesh row", m.batch, d1);
  }
  return std::nullopt;
}

void fill_bandwidths(Candidate& c, const MeshLinks& links) {
  for (std::size_t i = 0; i < 2; ++i) {
    c.link_gbps[i] = links.dims[i].link_gbps;
    c.allreduce_gbps[i] = links.dims[i].allreduce_gbps;
    if (links.dims[i].size > 1) c.bandwidth_source[i] = links.dims[i].source;
  }
}

}  // namespace

std::vector<ElementwiseCall> elementwise_calls(const ModelSpec& m, Strategy strategy, int d1,
                                               int d2) {
  std::vector<ElementwiseCall> out;
  for (const layout::AtpCall& call : layout::elementwise_traffic(
           strategy,
           {.d1 = d1, .d2 = d2, .tokens = m.tokens(), .hidden = m.hidden,
            .element_bytes = static_cast<int>(m.element_bytes())},
           m.layers)) {
    const double runs = !call.backward && m.recompute == Recompute::kFull ? 2 : 1;
    out.push_back({call, runs * call.launches});
  }
  return out;
}

Candidate evaluate(const PlanRequest& request, Strategy strategy, int d1, int d2, int chunks,
                   Explanation* explanation) {
  return evaluate(request, mesh_links(request.topology, d1, d2), strategy, d1, d2, chunks,
                  explanation);
}

Candidate evaluate(const PlanRequest& request, const MeshLinks& links, Strategy strategy, int d1,
                   int d2, int chunks, Explanation* explanation) {
  const ModelSpec& m = request.model;
  Candidate c;
  c.strategy = strategy;
  c.mesh = {d1, d2};
  c.chunks = chunks;
  fill_bandwidths(c, links);
  const GemmModel gemm = request.topology.gemm_model();
  const double elementwise_gbps = request.topology.effective_elementwise_gbps();
  const double n = static_cast<double>(d1) * d2;
  if (explanation != nullptr) explanation->links = links;
  const ElementwiseLayout ew_layout = strategy == Strategy::kTp1d
                                          ? ElementwiseLayout::kSequenceParallel
                                      : is_gemm2d(strategy) ? ElementwiseLayout::kFullySharded
                                                            : ElementwiseLayout::kAtp;

  double workspace = 0;
  if (strategy == Strategy::kAtp || strategy == Strategy::kMegatron) {
    if (auto reason = atp_invalid_reason(m, d1, d2, chunks)) {
      c.reason = *reason;
    } else {
      const ElementwiseEstimate ew =
          elementwise_estimate(m, ew_layout, d1, d2, elementwise_gbps);
      const AtpEstimate e = atp_estimate(m, links, chunks, gemm, ew);
      c.valid = true;
      c.t_comm_s = e.t_comm_s;
      c.t_compute_s = e.t_compute_s;
      c.t_step_s = e.t_step_s;
      c.t_elementwise_s = m.layers * ew.layer_s(m.recompute);
      if (explanation != nullptr) {
        explanation->atp = e;
        explanation->elementwise = ew;
      }
    }
  } else {
    c.chunks = 1;
    if (auto reason = sharded_layer_reason(m, strategy, d1, d2)) {
      c.reason = *reason;
    } else {
      const double forward_weight = m.recompute == Recompute::kFull ? 2.0 : 1.0;
      // The attention core (QKᵀ and A·V, 4·b·s²·h forward) is local in these layouts: b·a/n
      // (sequence, head) pairs (core/gemm_model.hpp attention_seconds).
      const double hd = static_cast<double>(m.hidden) / m.heads;
      const double pairs = static_cast<double>(m.batch) * m.heads / n;
      // Fused (model.attention): the tiles it visits (flash_attention_seconds), re-run by
      // full recomputation only.
      const bool fused = m.attention == Attention::kFused;
      const auto core = [&](bool backward) {
        return fused ? flash_attention_seconds(gemm, m.seq, hd, pairs, backward)
                     : attention_seconds(gemm, m.seq, hd, pairs, m.element_bytes(), backward);
      };
      const double attention_fwd = core(/*backward=*/false);
      const double attention_bwd = core(/*backward=*/true);
      const double attention =
          attention_fwd *
              (forward_weight + (m.recompute == Recompute::kSelective && !fused ? 1 : 0)) +
          attention_bwd;
      const ElementwiseEstimate ew =
          elementwise_estimate(m, ew_layout, d1, d2, elementwise_gbps);
      const double elementwise = ew.layer_s(m.recompute);
      double layer_total = attention + elementwise, layer_comm = 0;
      double layer_compute = attention + elementwise;
      c.valid = true;
      for (const FcShape& fc : fc_layers(m)) {
        const FcTuning t =
            strategy == Strategy::kTp1d
                ? tp1d_fc(fc, links, gemm, m.element_bytes(), forward_weight)
                : tune_fc(layout::algorithm_of(strategy), fc, links, gemm, m.element_bytes(),
                          forward_weight, request.topology.step_overhead_s(), request.stationary);
        if (t.invalid_reason) {
          c.valid = false;
          c.reason = fmt::format("{}: {}", name(fc.layer), *t.invalid_reason);
          c.fc.clear();
          break;
        }
        c.fc.push_back(FcChoice{.layer = fc.layer,
                                .stationary = t.stationary,
                                .forward = t.passes[0].shape.dataflow,
                                .params = t.params,
                                .time_s = t.total_s,
                                .comm_s = t.comm_s,
                                .compute_s = t.compute_s});
        layer_total += t.total_s;
        layer_comm += t.comm_s;
        layer_compute += t.compute_s;
        workspace = std::max(workspace, t.workspace_bytes);
        if (explanation != nullptr) explanation->fc.push_back(t);
      }
      if (c.valid) {
        c.t_step_s = m.layers * layer_total;
        c.t_comm_s = m.layers * layer_comm;
        // The LayerNorm statistics and partial gradients: blocking, nothing overlaps them.
        for (const ElementwiseCall& e : elementwise_calls(m, strategy, d1, d2)) {
          const double t = e.count * collective_time(links.dims[e.call.mesh_dim], e.call.kind,
                                                     e.call.message_bytes);
          c.t_comm_s += t;
          c.t_step_s += t;
          if (explanation != nullptr) explanation->elementwise_comm_s += t;
        }
        c.t_compute_s = m.layers * layer_compute;
        c.t_elementwise_s = m.layers * elementwise;
        if (explanation != nullptr) {
          explanation->attention_s = attention;
          explanation->elementwise = ew;
        }
      }
    }
  }
  if (c.valid) {
    // What the runtime would allocate for this layout (its head sharded), its 2D GeMMs'
    // buffers included; 1D TP's collective buffers on top.
    layout::Plan p = to_plan(c);
    p.recompute = m.recompute;
    p.attention = m.attention;
    c.memory = rank_memory(m, p, 0, HeadBuffers::kSharded);
    if (!layout::is_gemm2d(p.strategy)) c.memory.workspace_bytes += workspace;
    c.tflops_per_rank = c.t_step_s > 0 ? m.model_flops() / n / c.t_step_s / 1e12 : 0;
    const double capacity = request.topology.memory_gib;
    c.feasible = c.memory.total_gib() <= capacity;
    if (!c.feasible) {
      c.reason = fmt::format("needs {:.1f} GiB per rank but the device has {} GiB",
                             c.memory.total_gib(), capacity);
    }
  }
  c.validate();
  if (explanation != nullptr) {
    explanation->candidate = c;
    explanation->elementwise_layout = ew_layout;
  }
  return c;
}

PlanResult plan(const PlanRequest& request) {
  request.validate();
  require_dense_table(request.model);
  PlanResult result;
  result.made_for = provenance_of(request.topology, request.model);
  auto wanted = [&](Strategy s) {
    return std::find(request.strategies.begin(), request.strategies.end(), s) !=
           request.strategies.end();
  };
  TopologyLinks topology_links(request.topology);
  for (const auto& [d1, d2] : enumerate_meshes(request.devices)) {
    const MeshLinks& links = topology_links.mesh(d1, d2);
    const bool one_dim = d1 == 1 || d2 == 1;
    if (wanted(one_dim ? Strategy::kMegatron : Strategy::kAtp) ||
        (one_dim && wanted(Strategy::kAtp))) {
      for (const int chunks : request.chunks) {
        result.candidates.push_back(evaluate(
            request, links, one_dim ? Strategy::kMegatron : Strategy::kAtp, d1, d2, chunks));
      }
    }
    if (d2 == 1 && wanted(Strategy::kTp1d)) {
      result.candidates.push_back(evaluate(request, links, Strategy::kTp1d, d1, d2, 1));
    }
    for (const Strategy s : request.strategies) {
      if (is_gemm2d(s)) result.candidates.push_back(evaluate(request, links, s, d1, d2, 1));
    }
  }
  auto klass = [](const Candidate& c) { return c.feasible ? 0 : c.valid ? 1 : 2; };
  std::stable_sort(result.candidates.begin(), result.candidates.end(),
                   [&](const Candidate& a, const Candidate& b) {
                     if (klass(a) != klass(b)) return klass(a) < klass(b);
                     if (!a.valid) return false;
                     return a.t_step_s < b.t_step_s;
                   });
  if (!result.candidates.empty() && result.candidates.front().feasible) result.best = 0;
  return result;
}

Explanation explain(const PlanRequest& request, const Candidate& candidate) {
  request.validate();
  Explanation e;
  evaluate(request, candidate.strategy, candidate.mesh[0], candidate.mesh[1], candidate.chunks,
           &e);
  return e;
}

nlohmann::json to_json(const PlanResult& result) {
  nlohmann::json candidates = nlohmann::json::array();
  for (const Candidate& c : result.candidates) {
    candidates.push_back(to_json(c));
    add_provenance(candidates.back(), result.made_for);
  }
  const Candidate* best = result.best_candidate();
  nlohmann::json best_row = best ? to_json(*best) : nlohmann::json(nullptr);
  add_provenance(best_row, result.made_for);
  return {{"candidates", std::move(candidates)}, {"best", std::move(best_row)}};
}

}  // namespace meshtp::plan
