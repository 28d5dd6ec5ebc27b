#include "bench/plan_validation.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "bench/collectives.hpp"
#include "bench/layer.hpp"
#include "core/error.hpp"
#include "core/stats.hpp"
#include "mesh/device_mesh.hpp"
#include "model/gpt.hpp"

namespace meshtp::bench {
namespace {

// The runtime's model for candidate c: the model's shape, the candidate's plan.
model::GptConfig gpt_config(const plan::ModelSpec& m, const plan::Candidate& c,
                            int progress_splits) {
  model::GptConfig config{.shape = m, .layout = plan::to_plan(c)};
  config.shape.vocab = model::kByteVocab;  // unused: the block stack runs, not the embedding
  config.layout.progress_splits = progress_splits;
  return config;
}

// Each collective the planner charges for `c`, timed once (distinct sizes only).
std::vector<plan::ReplayedCollective> replay(const mesh::DeviceMesh& mesh,
                                             const plan::PlanRequest& request,
                                             const plan::Candidate& c, double seconds) {
  CollectivesOptions options;
  options.target_seconds_per_case = seconds;
  std::map<std::tuple<int, layout::CollectiveKind, std::int64_t>, double> measured;
  std::vector<plan::ReplayedCollective> out;
  if (layout::is_gemm2d(c.strategy)) return out;  // pipelined: no replay (see the header)
  for (const plan::PlannedCollective& p : plan::planned_collectives(request, c)) {
    const std::int64_t bytes = std::llround(p.bytes);
    const auto key = std::make_tuple(p.mesh_dim, p.collective, bytes);
    if (!measured.contains(key)) {
      measured[key] =
          time_collective(mesh.dim_comm(p.mesh_dim), mesh.comm(), p.collective, bytes, options)
              .median_seconds;
    }
    out.push_back({.planned = p, .measured_s = measured[key]});
  }
  return out;
}

std::string label(const plan::Candidate& c) {
  return fmt::format("{} {}x{} c={}", layout::name(c.strategy), c.mesh[0], c.mesh[1], c.chunks);
}

}  // namespace

RunnableCandidates runnable_candidates(const plan::PlanRequest& request,
                                       const plan::PlanResult& result, int top,
                                       int progress_splits) {
  RunnableCandidates out;
  for (const plan::Candidate& c : result.candidates) {
    if (static_cast<int>(out.chosen.size()) == top) break;
    if (!c.feasible) {
      out.skipped.push_back(fmt::format("{}: {}", label(c), c.reason));
      continue;
    }
    try {
      model::validate(gpt_config(request.model, c, progress_splits), {c.mesh[0], c.mesh[1]});
    } catch (const Error& e) {
      out.skipped.push_back(fmt::format("{}: runtime: {}", label(c), e.what()));
      continue;
    }
    out.chosen.push_back(c);
  }
  return out;
}

std::vector<plan::ValidationRow> validate_candidates(const comm::Communicator& world,
                                                     const plan::PlanRequest& request,
                                                     const std::vector<plan::Candidate>& chosen,
                                                     const PlanValidationOptions& o) {
  std::vector<mesh::DeviceMesh> meshes;
  for (const plan::Candidate& c : chosen) {
    meshes.emplace_back(world, std::vector<int>{c.mesh[0], c.mesh[1]});
  }
  struct Samples {
    std::vector<double> step, wait, forward, backward;
    std::vector<std::vector<plan::ReplayedCollective>> replayed;  // per round
    int iterations = 0;
    double check_error = -1;
  };
  std::vector<Samples> samples(chosen.size());
  for (int round = 0; round < o.rounds; ++round) {
    for (std::size_t i = 0; i < chosen.size(); ++i) {
      LayerBenchOptions layer;
      layer.config = gpt_config(request.model, chosen[i], o.progress_splits);
      layer.target_seconds = o.seconds / o.rounds;
      layer.check = o.check && round == 0;
      const LayerBenchSample s = run_layer_bench(meshes[i], layer);
      Samples& x = samples[i];
      x.step.push_back(s.step_s);
      x.wait.push_back(s.comm_wait_s);
      x.forward.push_back(s.forward_s);
      x.backward.push_back(s.backward_s);
      x.iterations += s.iterations;
      if (round == 0) x.check_error = s.check_error;
      x.replayed.push_back(
          replay(meshes[i], request, chosen[i], std::min(0.1, o.seconds / o.rounds / 4)));
    }
  }
  std::vector<plan::ValidationRow> rows;
  for (std::size_t i = 0; i < chosen.size(); ++i) {
    const Samples& x = samples[i];
    // Per collective, the median over rounds; the replayed comm is Σ count × that.
    std::vector<plan::ReplayedCollective> collectives = x.replayed.front();
    double replay_comm = 0;
    for (std::size_t k = 0; k < collectives.size(); ++k) {
      std::vector<double> t;
      for (const auto& round : x.replayed) t.push_back(round[k].measured_s);
      collectives[k].measured_s = median(t);
      replay_comm += collectives[k].planned.count * collectives[k].measured_s;
    }
    rows.push_back({.predicted = chosen[i],
                    .measured = {.step_s = median(x.step),
                                 .wait_s = median(x.wait),
                                 .replay_comm_s = replay_comm,
                                 .forward_s = median(x.forward),
                                 .backward_s = median(x.backward),
                                 .iterations = x.iterations,
                                 .check_error = x.check_error},
                    .collectives = std::move(collectives)});
  }
  return rows;
}

}  // namespace meshtp::bench
