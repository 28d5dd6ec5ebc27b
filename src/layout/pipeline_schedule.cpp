#include "layout/pipeline_schedule.hpp"

#include <algorithm>
#include <map>
#include <ostream>

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

ScheduleTiming simulate(const PipelineSchedule& s, double t_forward, double t_backward) {
  const int p = s.ranks, S = s.stages();
  // done[(forward, microbatch, stage)] = finish time
  std::map<std::tuple<bool, int, int>, double> done;
  std::vector<std::size_t> next(static_cast<std::size_t>(p), 0);
  std::vector<double> free_at(static_cast<std::size_t>(p), 0.0), busy(free_at);
  std::vector<int> in_flight(static_cast<std::size_t>(p), 0);
  ScheduleTiming t;
  std::size_t remaining = 0;
  for (const auto& ops : s.ops) remaining += ops.size();
  while (remaining > 0) {
    bool progressed = false;
    for (int r = 0; r < p; ++r) {
      const auto u = static_cast<std::size_t>(r);
      while (next[u] < s.ops[u].size()) {
        const PipeOp& op = s.ops[u][next[u]];
        std::vector<std::tuple<bool, int, int>> needs;
        if (op.forward && op.stage > 0) needs.emplace_back(true, op.microbatch, op.stage - 1);
        if (!op.forward) {
          needs.emplace_back(true, op.microbatch, op.stage);
          if (op.stage + 1 < S) needs.emplace_back(false, op.microbatch, op.stage + 1);
        }
        double ready = free_at[u];
        bool ok = true;
        for (const auto& n : needs) {
          const auto it = done.find(n);
          if (it == done.end()) {
            ok = false;
            break;
          }
          ready = std::max(ready, it->second);
        }
        if (!ok) break;
        const double cost = op.forward ? t_forward : t_backward;
        free_at[u] = ready + cost;
        busy[u] += cost;
        done[{op.forward, op.microbatch, op.stage}] = free_at[u];
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
