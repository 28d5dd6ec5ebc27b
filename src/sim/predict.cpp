#include "sim/predict.hpp"

#include <fmt/format.h>

#include <numeric>

#include "core/error.hpp"
#include "plan/autotune.hpp"
#include "plan/candidate.hpp"
#include "plan/gemm2d_cost.hpp"
#include "plan/layout_search.hpp"
#include "plan/mesh_links.hpp"
#include "plan/planner.hpp"

namespace meshtp::sim {
namespace {

using layout::Algorithm;

// The planner's knob for the plan's `slices`: S itself for MeshSlice and SUMMA; the other
// algorithms have none (0).
int planner_knob(Algorithm algorithm, int slices) {
  return algorithm == Algorithm::kMeshSlice || algorithm == Algorithm::kSumma ? slices : 0;
}

Prediction predict_model(const plan::PlanRequest& request, const RunSpec& spec) {
  plan::require_dense_table(request.model);  // a MoE model: --what pipeline prices its step
  Prediction p;
  const layout::Plan& plan = spec.model.layout;
  const plan::Explanation e = plan::explain(
      request, plan::evaluate(request, plan.strategy, plan.mesh[0], plan.mesh[1], plan.chunks));
  const plan::Candidate& c = e.candidate;
  if (!c.valid) {
    p.note = "the planner cannot price it: " + c.reason;
    return p;
  }
  const double layers_model = request.model.layers;
  double step = c.t_step_s, comm = c.t_comm_s;
  if (layout::is_gemm2d(plan.strategy)) {
    for (const plan::FcTuning& t : e.fc) {
      const Algorithm algorithm = plan.algorithm(t.fc.layer);
      const int knob = planner_knob(algorithm, plan.linear(t.fc.layer).gemm2d.slices);
      if (knob == 0 || t.sweep.empty()) continue;
      double at_knob = -1;
      for (const plan::KnobPoint& point : t.sweep) {
        if (point.knob == knob) at_knob = point.total_s;
      }
      if (at_knob < 0) {
        p.note += fmt::format("{}: the planner has no time for knob {}; ", t.fc.layer, knob);
        continue;
      }
      step += layers_model * (at_knob - t.total_s);
      comm += layers_model * (at_knob - t.total_s);  // the knob moves communication only
    }
  }
  const double scale = static_cast<double>(spec.model.shape.layers) / layers_model;
  p.available = true;
  p.total_s = step * scale;
  p.comm_s = comm * scale;
  p.compute_s = c.t_compute_s * scale;
  p.exposed_s = p.total_s - p.compute_s;
  if (spec.what == What::kStep) p.note += "the optimizer is not priced; ";
  return p;
}

Prediction predict_pipeline(const plan::Topology& topology, plan::ModelSpec model, int devices,
                            const RunSpec& spec) {
  model.recompute = spec.model.layout.recompute;
  const plan::LayoutCandidate c =
      plan::evaluate_layout({.topology = topology, .model = model, .devices = devices},
                            spec.model.layout.as_runtime_runs(model));
  const plan::LayoutParts parts = plan::parts(c);
  Prediction p;
  p.available = true;
  p.total_s = c.t_step_s;
  p.compute_s = parts.compute_s + parts.optimizer_s;
  p.comm_s = parts.tp_comm_s + parts.p2p_s + parts.dp_s;
  p.exposed_s = p.total_s - p.compute_s;
  p.note = fmt::format(
      "compute {:.4g} s, TP communication {:.4g} s, bubble {:.4g} s ({:.1f}%), point to point "
      "{:.4g} s, data parallel {:.4g} s, optimizer {:.4g} s; ",
      parts.compute_s, parts.tp_comm_s, parts.bubble_s, 100 * c.bubble, parts.p2p_s, parts.dp_s,
      parts.optimizer_s);
  return p;
}

Prediction predict_gemm2d(const plan::PlanRequest& request, const RunSpec& spec) {
  Prediction p;
  const layout::Plan& plan = spec.model.layout;
  MESHTP_CHECK(layout::is_gemm2d(plan.strategy),
               "--what gemm2d runs a 2D GeMM algorithm, not '{}'", plan.strategy);
  const Algorithm algorithm = plan.algorithm(layout::Linear::kMlp1);
  const plan::Gemm2dShape shape{.dataflow = spec.dataflow,
                                .m = spec.m,
                                .n = spec.n,
                                .k = spec.k,
                                .nr = plan.mesh[0],
                                .nc = plan.mesh[1],
                                .element_bytes = spec.element_bytes};
  const plan::Gemm2dParams& params = plan.linear(layout::Linear::kMlp1).gemm2d;
  if (auto reason = shape.invalid_reason()) {
    p.note = *reason;
    return p;
  }
  if (auto reason = layout::gemm2d_invalid_reason(algorithm, shape, params)) {
    p.note = *reason;
    return p;
  }
  const plan::MeshLinks links = plan::mesh_links(request.topology, shape.nr, shape.nc);
  const plan::PipelineEstimate e =
      plan::gemm2d_estimate(algorithm, shape, params, links, request.topology.gemm_model(),
                            request.topology.step_overhead_s());
  p.available = true;
  p.total_s = e.total_s;
  p.comm_s = e.comm_s;
  p.compute_s = e.compute_s;
  p.exposed_s = e.total_s - e.compute_s;
  return p;
}

Prediction predict_collectives(const plan::PlanRequest& request, const RunSpec& spec) {
  Prediction p;
  const plan::MeshLinks links = plan::mesh_links(request.topology, spec.mesh()[0], spec.mesh()[1]);
  for (int dim = 0; dim < 2; ++dim) {
    const plan::DimLinks& d = links.dims[static_cast<std::size_t>(dim)];
    if (d.size == 1) continue;
    for (const double bytes : spec.sizes) {
      const double shard = bytes / d.size;
      using layout::CollectiveKind;
      const std::pair<CollectiveKind, double> times[] = {
          {CollectiveKind::kAllReduce, plan::ring_all_reduce_time(d.all_reduce, d.size, bytes)},
          {CollectiveKind::kAllGather, plan::ring_collective_time(d.all_gather, d.size, shard)},
          {CollectiveKind::kReduceScatter,
           plan::ring_collective_time(d.reduce_scatter, d.size, shard)},
          {CollectiveKind::kBroadcast, plan::summa_panel_time(d.all_gather, d.size, bytes, 0)},
      };
      for (const auto& [kind, seconds] : times) {
        p.collectives.push_back(
            {.kind = kind, .dim = dim, .bytes = bytes, .calls = 1, .seconds = seconds});
      }
    }
  }
  p.available = true;
  return p;
}

}  // namespace

plan::ModelSpec runtime_model(plan::ModelSpec model) {
  model.recompute = plan::Recompute::kNone;
  model.vocab = 0;
  return model;
}

plan::Topology simulated_topology(plan::Topology topology) {
  topology.calibration.groups.clear();
  topology.rings_on_graph = true;
  topology.host_staged = false;  // the platform's links are the levels', no shared host memory
  return topology;
}

Prediction predict(const plan::Topology& topology, const plan::ModelSpec& model, int devices,
                   const RunSpec& spec) {
  plan::PlanRequest request{
      .topology = simulated_topology(topology), .model = runtime_model(model), .devices = devices};
  // The precision the simulation ran (values mode: fp32).
  request.model.precision = spec.element_bytes == 4 ? plan::Precision::kFp32 : model.precision;
  request.model.attention = spec.model.layout.attention;  // the core the simulation ran
  request.validate();
  switch (spec.what) {
    case What::kLayer:
    case What::kStep: return predict_model(request, spec);
    case What::kGemm2d: return predict_gemm2d(request, spec);
    case What::kCollectives: return predict_collectives(request, spec);
    case What::kPipeline: {
      plan::ModelSpec whole = model;  // with its vocabulary: the pipeline runs the head
      whole.precision = request.model.precision;
      return predict_pipeline(request.topology, whole, devices, spec);
    }
  }
  return {};
}

}  // namespace meshtp::sim
