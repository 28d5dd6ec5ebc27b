#include "layout/pipeline_schedule.hpp"

#include <algorithm>
#include <ostream>
#include <vector>

#include "core/error.hpp"

namespace meshtp::layout {
namespace {

// Megatron-LM's interleaved order (Narayanan et al. 2021 §2.2): the k-th forward of a rank
// runs chunk (k/p) mod v of microbatch (k / (p·v))·p + k mod p; backwards visit the chunks
// in reverse.
PipeOp interleaved_op(int k, bool forward, int p, int v, int rank) {
  const int group = k / (p * v), in_group = k % (p * v);
  int chunk = in_group / p;
  if (!forward) chunk = v - 1 - chunk;
  return {forward, group * p + in_group % p, chunk * p + rank};
}

}  // namespace

PipelineSchedule make_schedule(Schedule kind, int p, int m, int v) {
  MESHTP_CHECK(p >= 1 && m >= 1 && v >= 1,
               "pipeline: pp={}, microbatches={} and virtual stages={} must be at least 1", p, m,
               v);
  MESHTP_CHECK(kind == Schedule::kInterleaved || v == 1,
               "pipeline: virtual stages={} needs the interleaved schedule, not {}", v, kind);
  if (kind != Schedule::kGpipe) {
    MESHTP_CHECK(m >= p,
                 "pipeline: {} needs at least as many microbatches as stages: microbatches={} < "
                 "pp={}",
                 kind, m, p);
  }
  if (kind == Schedule::kInterleaved) {
    MESHTP_CHECK(v >= 2, "pipeline: interleaved needs virtual stages ≥ 2, got {}", v);
    MESHTP_CHECK(m % p == 0,
                 "pipeline: interleaved runs microbatches in groups of pp: microbatches={} is "
                 "not a multiple of pp={}",
                 m, p);
  }
  PipelineSchedule s{.kind = kind, .ranks = p, .microbatches = m, .virtual_stages = v};
  s.ops.resize(static_cast<std::size_t>(p));
  for (int r = 0; r < p; ++r) {
    std::vector<PipeOp>& ops = s.ops[static_cast<std::size_t>(r)];
    if (kind == Schedule::kGpipe) {
      for (int i = 0; i < m; ++i) ops.push_back({true, i, r});
      for (int i = 0; i < m; ++i) ops.push_back({false, i, r});
      continue;
    }
    // 1F1B, plain (v = 1) or interleaved: warm-up forwards, steady F/B pairs, cool-down.
    const int total = m * v;
    const int warmup =
        std::min(total, v == 1 ? p - r - 1 : (p - r - 1) * 2 + (v - 1) * p);
    const auto op = [&](int k, bool forward) {
      return v == 1 ? PipeOp{forward, k, r} : interleaved_op(k, forward, p, v, r);
    };
    int f = 0, b = 0;
    for (; f < warmup; ++f) ops.push_back(op(f, true));
    while (f < total) {
      ops.push_back(op(f++, true));
      ops.push_back(op(b++, false));
    }
    while (b < total) ops.push_back(op(b++, false));
  }
  return s;
}

double bubble_fraction(Schedule kind, int p, int m, int v) {
  const double work = kind == Schedule::kInterleaved ? static_cast<double>(v) * m : m;
  return (p - 1) / (work + p - 1);
}

ScheduleTiming simulate(const PipelineSchedule& s, double t_forward, double t_backward,
                        double t_transfer) {
  const int p = s.ranks, S = s.stages(), m = s.microbatches;
  // Per (direction, microbatch, stage): when the op finished, and when its output reached
  // the rank that consumes it (the same rank: at once). Flat arrays: the planner runs this
  // for every pipeline layout it prices.
  const auto index = [&](bool forward, int microbatch, int stage) {
    return (static_cast<std::size_t>(forward ? 0 : 1) * static_cast<std::size_t>(m) +
            static_cast<std::size_t>(microbatch)) *
               static_cast<std::size_t>(S) +
           static_cast<std::size_t>(stage);
  };
  constexpr double kNotYet = -1;
  std::vector<double> done(2 * static_cast<std::size_t>(m) * static_cast<std::size_t>(S), kNotYet);
  std::vector<double> arrived(done.size(), kNotYet);
  // A rank's link to its successor (index r) and to its predecessor (p + r); with p = 2 both
  // neighbours are one rank, so one link each way.
  std::vector<double> link_free(2 * static_cast<std::size_t>(p), 0.0);
  const auto link_of = [&](int from, int to) {
    return static_cast<std::size_t>(to == (from + 1) % p ? from : p + from);
  };
  std::vector<std::size_t> next(static_cast<std::size_t>(p), 0);
  std::vector<double> free_at(static_cast<std::size_t>(p), 0.0), busy(free_at);
  std::vector<int> in_flight(static_cast<std::size_t>(p), 0);
  ScheduleTiming t;
  t.final_backward_end.assign(static_cast<std::size_t>(S), 0.0);
  std::size_t remaining = 0;
  for (const auto& ops : s.ops) remaining += ops.size();
  while (remaining > 0) {
    bool progressed = false;
    for (int r = 0; r < p; ++r) {
      const auto u = static_cast<std::size_t>(r);
      while (next[u] < s.ops[u].size()) {
        const PipeOp& op = s.ops[u][next[u]];
        // F(i, s) needs F(i, s−1)'s output; B(i, s) needs F(i, s) (here) and B(i, s+1)'s.
        double ready = free_at[u];
        if (op.forward && op.stage > 0) {
          const double a = arrived[index(true, op.microbatch, op.stage - 1)];
          if (a == kNotYet) break;
          ready = std::max(ready, a);
        }
        if (!op.forward) {
          if (done[index(true, op.microbatch, op.stage)] == kNotYet) break;
          if (op.stage + 1 < S) {
            const double a = arrived[index(false, op.microbatch, op.stage + 1)];
            if (a == kNotYet) break;
            ready = std::max(ready, a);
          }
        }
        const double cost = op.forward ? t_forward : t_backward;
        free_at[u] = ready + cost;
        busy[u] += cost;
        const std::size_t i = index(op.forward, op.microbatch, op.stage);
        done[i] = free_at[u];
        if (!op.forward) {
          // rank·v + chunk, chunk = stage / p: a rank's ops run in order, so the last one wins.
          t.final_backward_end[static_cast<std::size_t>(r * s.virtual_stages + op.stage / p)] =
              free_at[u];
        }
        // The output goes to the next stage's rank (forward) or the previous one's.
        const int to_stage = op.forward ? op.stage + 1 : op.stage - 1;
        const int to = to_stage >= 0 && to_stage < S ? s.rank_of(to_stage) : r;
        if (to == r) {
          arrived[i] = done[i];
        } else {
          double& link = link_free[link_of(r, to)];
          link = std::max(link, done[i]) + t_transfer;
          arrived[i] = link;
        }
        in_flight[u] += op.forward ? 1 : -1;
        t.max_in_flight = std::max(t.max_in_flight, in_flight[u]);
        ++next[u];
        --remaining;
        progressed = true;
      }
    }
    MESHTP_CHECK(progressed, "pipeline schedule {} (pp={}, microbatches={}) deadlocks", s.kind, p,
                 s.microbatches);
  }
  t.makespan = *std::max_element(free_at.begin(), free_at.end());
  double idle = 0;
  for (const double b : busy) idle += 1.0 - b / t.makespan;
  t.bubble = idle / p;
  return t;
}

double exposed_transfer_s(const PipelineSchedule& s, double t_forward, double t_backward,
                          double t_transfer) {
  if (s.ranks == 1 || t_transfer <= 0) return 0;
  return simulate(s, t_forward, t_backward, t_transfer).makespan -
         simulate(s, t_forward, t_backward).makespan;
}

std::ostream& operator<<(std::ostream& os, const PipelineSchedule& s) {
  for (int r = 0; r < s.ranks; ++r) {
    os << "rank " << r << ":";
    for (const PipeOp& op : s.ops[static_cast<std::size_t>(r)]) {
      os << ' ' << (op.forward ? 'F' : 'B') << op.microbatch << '.' << op.stage;
    }
    os << '\n';
  }
  return os;
}

}  // namespace meshtp::layout
