#include "plan/report.hpp"

#include <fmt/format.h>

namespace meshtp::plan {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// "RS1 AR0": an ATP op's collectives, kind and mesh dim; "-" for none.
std::string calls_label(const std::vector<layout::AtpCall>& calls) {
  std::string out;
  for (const layout::AtpCall& c : calls) {
    const char* kind = c.kind == CollectiveKind::kAllReduce       ? "AR"
                       : c.kind == CollectiveKind::kAllGather     ? "AG"
                       : c.kind == CollectiveKind::kReduceScatter ? "RS"
                                                                  : "?";
    out += fmt::format("{}{}{}", out.empty() ? "" : " ", kind, c.mesh_dim);
  }
  return out.empty() ? "-" : out;
}

std::string gbps(const std::optional<double>& v) {
  return v ? fmt::format("{:.4g}", *v) : std::string("-");
}

std::string status(const Candidate& c) {
  if (c.feasible) return "ok";
  return (c.valid ? "infeasible: " : "invalid: ") + c.reason;
}

std::string dim_line(const DimLinks& d, int devices) {
  if (d.size == 1) return fmt::format("dim {}: size 1, no communication", d.dim);
  std::string where;
  if (!d.modelled.bottleneck_link.empty()) {
    where = fmt::format("graph: bottleneck {}, longest hop {} link(s)", d.modelled.bottleneck_link,
                        d.modelled.max_hops);
  } else {
    std::string levels;
    for (const int l : d.modelled.levels) {
      levels += fmt::format("{}{}", levels.empty() ? "" : ",", l);
    }
    where = fmt::format("crosses level(s) {}, bottleneck level {}, {} concurrent group(s)",
                        levels, d.modelled.bottleneck_level, d.modelled.sharers);
  }
  return fmt::format(
      "dim {}: {} groups of {} ranks, stride {}; {}; modelled B'={:.4g} GB/s; used B'={:.4g} "
      "GB/s, all-reduce B={:.4g} GB/s ({}); T_launch={:.3g} us, L_sync={:.3g} us",
      d.dim, devices / d.size, d.size, d.stride, where, d.modelled.link_gbps, *d.link_gbps,
      *d.allreduce_gbps, name(d.source), d.all_reduce.t_launch_s * 1e6,
      d.all_reduce.l_sync_s * 1e6);
}

std::string links_block(const MeshLinks& links) {
  std::string out = fmt::format("mesh {}x{}:\n", links.mesh[0], links.mesh[1]);
  const int n = links.mesh[0] * links.mesh[1];
  for (const DimLinks& d : links.dims) out += "  " + dim_line(d, n) + "\n";
  if (links.dim_sharing > 0) {
    out += fmt::format(
        "  the two dims' collectives slow each other: sharing {:.3g} (two collectives at once "
        "take max + sharing x min; 1: one after the other)\n",
        links.dim_sharing);
  }
  return out;
}

// The elementwise ops of one layer, one row per op and pass.
std::string elementwise_block(const Explanation& e, const ModelSpec& m) {
  const ElementwiseEstimate& ew = e.elementwise;
  std::string out = fmt::format(
      "elementwise ops ({} layout; {:.4g} GB/s, {} B per element touched):\n"
      "{:<5} {:<10} {:>12} {:>8} {:>10} {:>9}\n",
      name(e.elementwise_layout), ew.gbps, m.element_bytes(), "pass", "op", "elem/rank",
      "touches", "MiB/rank", "ms");
  for (const ElementwiseOp& op : ew.ops) {
    out += fmt::format("{:<5} {:<10} {:>12.0f} {:>8g} {:>10.2f} {:>9.3f}\n",
                       op.backward ? "bwd" : "fwd", op.name, op.elements, op.factor,
                       op.touched() * m.element_bytes() / kMiB, op.seconds * 1e3);
  }
  out += fmt::format("elementwise: forward {:.3f} ms, backward {:.3f} ms; layer {:.3f} ms "
                     "(recompute {}); step {:.4g} s\n",
                     ew.forward_s * 1e3, ew.backward_s * 1e3, ew.layer_s(m.recompute) * 1e3,
                     name(m.recompute), e.candidate.t_elementwise_s);
  return out;
}

}  // namespace

std::string format_plan(const PlanRequest& r, const PlanResult& result) {
  const ModelSpec& m = r.model;
  std::string out = fmt::format(
      "plan: {} (L={} h={} heads={} b={} s={} {}, recompute {}) on {} ({} devices, {} GiB, "
      "{} TFLOP/s, {} GB/s elementwise ({}))\n",
      m.name, m.layers, m.hidden, m.heads, m.batch, m.seq, name(m.precision),
      name(m.recompute), r.topology.name, r.devices, r.topology.memory_gib,
      r.topology.effective_tflops(), r.topology.effective_elementwise_gbps(),
      name(r.topology.elementwise_source()));
  out += fmt::format("{:>3} {:<10} {:>7} {:<16} {:>10} {:>10} {:>10} {:>10} {:>7} {:>7} {:>8} "
                     "{:>8} {:>8} {:>8}  {}\n",
                     "#", "strategy", "mesh", "knobs", "step s", "comm s", "compute s",
                     "elemw s", "TFLOP/s", "mem GiB", "B1' GB/s", "B2' GB/s", "B1 GB/s",
                     "B2 GB/s", "status");
  int rank = 0;
  for (const Candidate& c : result.candidates) {
    ++rank;
    const std::string mesh = fmt::format("{}x{}", c.mesh[0], c.mesh[1]);
    if (c.valid) {
      out += fmt::format("{:>3} {:<10} {:>7} {:<16} {:>10.4g} {:>10.4g} {:>10.4g} {:>10.4g} "
                         "{:>7.1f} {:>7.1f} {:>8} {:>8} {:>8} {:>8}  {}\n",
                         rank, name(c.strategy), mesh, c.knobs(), c.t_step_s, c.t_comm_s,
                         c.t_compute_s, c.t_elementwise_s, c.tflops_per_rank,
                         c.memory.total_gib(),
                         gbps(c.link_gbps[0]), gbps(c.link_gbps[1]), gbps(c.allreduce_gbps[0]),
                         gbps(c.allreduce_gbps[1]), status(c));
    } else {
      out += fmt::format("{:>3} {:<10} {:>7} {:<16} {:>10} {:>10} {:>10} {:>10} {:>7} {:>7} "
                         "{:>8} {:>8} {:>8} {:>8}  {}\n",
                         rank, name(c.strategy), mesh, c.knobs(), "-", "-", "-", "-", "-", "-",
                         gbps(c.link_gbps[0]), gbps(c.link_gbps[1]), gbps(c.allreduce_gbps[0]),
                         gbps(c.allreduce_gbps[1]), status(c));
    }
  }
  if (const Candidate* best = result.best_candidate()) {
    out += fmt::format("best: {} {}x{} {}: {:.4g} s/step, {:.1f} TFLOP/s per rank, {:.1f} GiB "
                       "per rank\n",
                       name(best->strategy), best->mesh[0], best->mesh[1], best->knobs(),
                       best->t_step_s, best->tflops_per_rank, best->memory.total_gib());
  } else {
    out += "best: none — no candidate is both valid and fits in device memory\n";
  }
  return out;
}

std::string format_explanation(const PlanRequest& r, const Explanation& e) {
  const Candidate& c = e.candidate;
  std::string out = fmt::format("explain: {} {}x{} {} on {} — one layer of {} (×{} layers)\n",
                                name(c.strategy), c.mesh[0], c.mesh[1], c.knobs(),
                                r.topology.name, r.model.name, r.model.layers);
  out += links_block(e.links);
  if (!c.valid) return out + "invalid: " + c.reason + "\n";
  if (e.atp) {
    const AtpEstimate& a = *e.atp;
    out += fmt::format("{:<5} {:<10} {:>11} {:>11} {:>9} {:>10} {:>9}\n", "pass", "op",
                       "GFLOP/rank", "compute ms", "colls", "MiB/rank", "comm ms");
    for (const AtpOp& op : a.ops) {
      out += fmt::format("{:<5} {:<10} {:>11.2f} {:>11.3f} {:>9} {:>10.2f} {:>9.3f}\n",
                         op.backward ? "bwd" : "fwd", op.name, op.flops_per_rank / 1e9,
                         op.compute_s * 1e3,
                         calls_label(op.calls), op.sent_bytes / kMiB, op.comm_s * 1e3);
    }
    out += elementwise_block(e, r.model);
    out += fmt::format(
        "forward  ({} chunk(s)): compute {:.3f} ms (elementwise {:.3f}), comm {:.3f} ms → "
        "{:.3f} ms\n"
        "backward (dX all-reduce under dW, then elementwise): compute {:.3f} ms (elementwise "
        "{:.3f}), comm {:.3f} ms → {:.3f} ms\n"
        "recompute {:.3f} ms; layer {:.3f} ms; step {:.4g} s (comm {:.4g} s, compute {:.4g} s)\n",
        a.chunks, a.compute_fwd_s * 1e3, a.elementwise_fwd_s * 1e3, a.comm_fwd_s * 1e3,
        a.forward_s * 1e3, a.compute_bwd_s * 1e3, a.elementwise_bwd_s * 1e3,
        a.comm_bwd_s * 1e3, a.backward_s * 1e3, a.recompute_s * 1e3, a.layer_s * 1e3,
        a.t_step_s, a.t_comm_s, a.t_compute_s);
    return out;
  }
  out += fmt::format("{:<5} {:<6} {:<10} {:<3} {:>22} {:>26} {:>26} {:>9} {:>9} {:>9} {:>9} "
                     "{:>9}\n",
                     "fc", "stn", "pass", "df", "m x n x k", "vertical (dim 0)",
                     "horizontal (dim 1)", "prolog ms", "steady ms", "iters", "epilog ms",
                     "total ms");
  for (const FcTuning& t : e.fc) {
    for (const FcPassCost& p : t.passes) {
      // (GCC 12 warns falsely (-Wrestrict) on assigning short literals to these strings,
      // so every value is constructed, not assigned.)
      std::string v("-"), h("-"), df("-"), mnk("1D TP");
      if (p.tp1d) {
        if (p.tp1d->kind != CollectiveKind::kNone) {
          v = fmt::format("{} {:.2f} MiB", name(p.tp1d->kind), p.tp1d->bytes_per_rank / kMiB);
        }
      } else {
        const Gemm2dTraffic tr =
            gemm2d_traffic(layout::algorithm_of(c.strategy), p.shape, t.params);
        auto dir = [](const DirectionTraffic& d) {
          if (d.kind == CollectiveKind::kNone) return std::string("-");
          return fmt::format("{} {} {:.2f} MiB", d.matrix, name(d.kind), d.bytes_per_rank / kMiB);
        };
        v = dir(tr.vertical);
        h = dir(tr.horizontal);
        df = std::string(name(p.shape.dataflow));
        mnk = fmt::format("{}x{}x{}", p.shape.m, p.shape.n, p.shape.k);
      }
      const PipelineEstimate& s = p.estimate;
      out += fmt::format("{:<5} {:<6} {:<10} {:<3} {:>22} {:>26} {:>26} {:>9.3f} {:>9.3f} {:>9} "
                         "{:>9.3f} {:>9.3f}{}\n",
                         name(t.fc.layer), name(t.stationary), name(p.pass), df, mnk, v, h,
                         s.prologue_s * 1e3, s.steady_s * 1e3, s.iterations, s.epilogue_s * 1e3,
                         s.total_s * 1e3, p.weight != 1 ? fmt::format(" ×{}", p.weight) : "");
    }
    if (t.sweep.size() > 1) {
      std::string sweep;
      for (const KnobPoint& point : t.sweep) {
        sweep +=
            fmt::format("{}{}:{:.3f}", sweep.empty() ? "" : " ", point.knob, point.total_s * 1e3);
      }
      out += fmt::format("      {} sweep (knob:ms): {}\n", name(t.fc.layer), sweep);
    }
  }
  out += elementwise_block(e, r.model);
  out += fmt::format("attention core (local) {:.3f} ms per layer; elementwise {:.3f} ms per "
                     "layer; LayerNorm and bias collectives {:.3f} ms per step; step {:.4g} s "
                     "(comm {:.4g} s, compute {:.4g} s)\n",
                     e.attention_s * 1e3, e.elementwise.layer_s(r.model.recompute) * 1e3,
                     e.elementwise_comm_s * 1e3, c.t_step_s, c.t_comm_s, c.t_compute_s);
  return out;
}

nlohmann::json to_json(const MeshLinks& links) {
  nlohmann::json dims = nlohmann::json::array();
  for (const DimLinks& d : links.dims) {
    nlohmann::json j{{"dim", d.dim}, {"size", d.size}, {"stride", d.stride}};
    if (d.size > 1) {
      j["source"] = name(d.source);
      j["link_gbps"] = *d.link_gbps;
      j["allreduce_gbps"] = *d.allreduce_gbps;
      j["modelled_link_gbps"] = d.modelled.link_gbps;
      if (d.modelled.bottleneck_link.empty()) {
        j["levels"] = d.modelled.levels;
        j["bottleneck_level"] = d.modelled.bottleneck_level;
        j["concurrent_groups"] = d.modelled.sharers;
      } else {
        j["bottleneck_link"] = d.modelled.bottleneck_link;
        j["flows"] = d.modelled.sharers;
        j["max_hops"] = d.modelled.max_hops;
      }
      j["t_launch_us"] = d.all_reduce.t_launch_s * 1e6;
      j["l_sync_us"] = d.all_reduce.l_sync_s * 1e6;
    }
    dims.push_back(std::move(j));
  }
  return {{"mesh", {links.mesh[0], links.mesh[1]}}, {"dims", std::move(dims)}};
}

nlohmann::json to_json(const Explanation& e) {
  nlohmann::json j{{"candidate", to_json(e.candidate)}, {"links", to_json(e.links)}};
  if (e.candidate.valid) {
    nlohmann::json ops = nlohmann::json::array();
    for (const ElementwiseOp& op : e.elementwise.ops) {
      ops.push_back({{"op", op.name},
                     {"pass", op.backward ? "bwd" : "fwd"},
                     {"elements_per_rank", op.elements},
                     {"touches", op.factor},
                     {"seconds", op.seconds}});
    }
    j["elementwise"] = {{"layout", name(e.elementwise_layout)},
                        {"gbps", e.elementwise.gbps},
                        {"ops", std::move(ops)},
                        {"forward_s", e.elementwise.forward_s},
                        {"backward_s", e.elementwise.backward_s}};
  }
  if (e.atp) {
    nlohmann::json ops = nlohmann::json::array();
    for (const AtpOp& op : e.atp->ops) {
      ops.push_back({{"op", op.name},
                     {"pass", op.backward ? "bwd" : "fwd"},
                     {"flops_per_rank", op.flops_per_rank},
                     {"compute_s", op.compute_s},
                     {"collectives", calls_label(op.calls)},
                     {"sent_bytes", op.sent_bytes},
                     {"comm_s", op.comm_s}});
    }
    j["layer"] = {{"ops", std::move(ops)},
                  {"forward_s", e.atp->forward_s},
                  {"backward_s", e.atp->backward_s},
                  {"recompute_s", e.atp->recompute_s},
                  {"layer_s", e.atp->layer_s}};
  }
  if (!e.fc.empty()) {
    nlohmann::json fcs = nlohmann::json::array();
    for (const FcTuning& t : e.fc) {
      nlohmann::json passes = nlohmann::json::array();
      for (const FcPassCost& p : t.passes) {
        nlohmann::json pj{{"pass", name(p.pass)},
                          {"weight", p.weight},
                          {"prologue_s", p.estimate.prologue_s},
                          {"steady_s", p.estimate.steady_s},
                          {"iterations", p.estimate.iterations},
                          {"epilogue_s", p.estimate.epilogue_s},
                          {"total_s", p.estimate.total_s},
                          {"comm_s", p.estimate.comm_s},
                          {"compute_s", p.estimate.compute_s}};
        if (!p.tp1d) {
          pj["dataflow"] = name(p.shape.dataflow);
          pj["m"] = p.shape.m;
          pj["n"] = p.shape.n;
          pj["k"] = p.shape.k;
        }
        passes.push_back(std::move(pj));
      }
      nlohmann::json sweep = nlohmann::json::array();
      for (const KnobPoint& point : t.sweep) {
        sweep.push_back(
            {{"knob", point.knob}, {"total_s", point.total_s}, {"serial_s", point.serial_s}});
      }
      fcs.push_back({{"layer", name(t.fc.layer)},
                     {"stationary", name(t.stationary)},
                     {"total_s", t.total_s},
                     {"passes", std::move(passes)},
                     {"sweep", std::move(sweep)}});
    }
    j["fc"] = std::move(fcs);
    j["attention_s"] = e.attention_s;
    j["elementwise_comm_s"] = e.elementwise_comm_s;
  }
  return j;
}

std::string format_topology(const Topology& t, const std::optional<MeshLinks>& links) {
  std::string out = fmt::format(
      "topology {}: {} devices, {} GiB and {} TFLOP/s each{}, "
      "elementwise {} GB/s ({}), T_launch {} us{}\n",
      t.name, t.device_count(), t.memory_gib, t.effective_tflops(),
      t.calibration.gemm_tflops ? " (calibrated)" : "", t.effective_elementwise_gbps(),
      name(t.elementwise_source()), t.launch_us,
      t.calibration.step_overhead_us
          ? fmt::format(", 2D GeMM step {} us (calibrated)", *t.calibration.step_overhead_us)
          : "");
  if (!t.description.empty()) out += "  " + t.description + "\n";
  if (t.graph) {
    out += fmt::format("graph: {} (placement {})\n", t.graph->json.dump(),
                       topo::name(t.graph->placement));
  } else {
    out += fmt::format("{:>5} {:<8} {:>8} {:>8} {:>13} {:>12}\n", "level", "name", "members",
                       "devices", "group GB/s", "latency us");
  }
  for (std::size_t j = 0; j < t.levels.size(); ++j) {
    const Level& l = t.levels[j];
    out += fmt::format("{:>5} {:<8} {:>8} {:>8} {:>13.4g} {:>12.3g}", j, l.name, l.members,
                       t.devices_per_member(static_cast<int>(j)), l.group_gbps, l.latency_us);
    if (l.p2p_uniform_gbps > 0) out += fmt::format("   p2p {:.4g} GB/s", l.p2p_uniform_gbps);
    if (!l.p2p_gbps.empty()) {
      out += "   p2p row 0:";
      for (const double v : l.p2p_gbps[0]) out += fmt::format(" {:.4g}", v);
    }
    out += "\n";
  }
  for (const GroupCalibration& g : t.calibration.groups) {
    out += fmt::format("calibrated group: {} ranks, stride {}:", g.size, g.stride);
    auto fit = [&out](const char* what, const std::optional<CollectiveFit>& f) {
      if (f) {
        out += fmt::format(
            " {} (T_launch {} us, L_sync {} us, BW {:.4g} GB/s{})", what, f->t_launch_us,
            f->l_sync_us, f->bw_gbps,
            f->measured.empty() ? "" : fmt::format(", {} measured sizes", f->measured.size()));
      }
    };
    fit("all_reduce", g.all_reduce);
    fit("all_gather", g.all_gather);
    fit("reduce_scatter", g.reduce_scatter);
    out += "\n";
  }
  if (links) out += links_block(*links);
  return out;
}

}  // namespace meshtp::plan
