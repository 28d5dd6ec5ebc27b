#include "layout/plan.hpp"

#include <fmt/format.h>

#include <limits>
#include <ostream>
#include <vector>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/json_util.hpp"
#include "core/parse.hpp"

namespace meshtp::layout {
namespace {

using nlohmann::json;

// Field `key` of `j` as a name of the enum E.
template <Named E>
E read_enum(const json& j, const char* key, const std::string& where) {
  try {
    return parse<E>(read_string(j, key, where));
  } catch (const Error& e) {
    fail("{}: field '{}': {}", where, key, e.what());
  }
}

// An optional field of `j`, read as T when present; `where` names the file and object.
template <typename T>
void read(const json& j, const char* key, const std::string& where, T& out) {
  const auto it = j.find(key);
  if (it == j.end()) return;
  if constexpr (std::is_same_v<T, bool>) {
    MESHTP_CHECK(it->is_boolean(), "{}: field '{}' must be true or false, got {}", where, key,
                 it->dump());
    out = it->get<bool>();
  } else if constexpr (std::is_same_v<T, int>) {
    // The whole 64-bit value is range-checked before narrowing: 2^32 + 1 is an error, not 1.
    out = read_int(j, key, where, std::numeric_limits<int>::min(), std::numeric_limits<int>::max());
  } else if constexpr (std::is_same_v<T, double>) {
    out = read_number(j, key, where);
  } else if constexpr (std::is_same_v<T, std::string>) {
    out = read_string(j, key, where);
  } else {
    out = read_enum<T>(j, key, where);
  }
}

std::string linear_text(const Plan& p, Linear l) {
  const LinearPlan& x = p.linear(l);
  const std::string_view algorithm = x.algorithm             ? name(*x.algorithm)
                                     : is_gemm2d(p.strategy) ? name(algorithm_of(p.strategy))
                                                             : "?";
  return fmt::format("{}={}/{}/S{}", name(l), algorithm,
                     x.stationary ? name(*x.stationary) : "auto", x.gemm2d.slices);
}

}  // namespace

Algorithm Plan::algorithm(Linear l) const {
  const LinearPlan& x = linear(l);
  return x.algorithm ? *x.algorithm : algorithm_of(strategy);
}

void Plan::validate() const {
  const auto positive = [](const char* what, int v) {
    MESHTP_CHECK(v >= 1, "plan: {}={} must be at least 1", what, v);
  };
  positive("dp", dp);
  positive("pp", pp);
  positive("microbatches", microbatches);
  positive("virtual_stages", virtual_stages);
  positive("chunks", chunks);
  positive("progress_splits", progress_splits);
  positive("cp", cp);
  positive("ep", ep);
  MESHTP_CHECK(attention == Attention::kUnfused || !is_gemm2d(strategy),
               "plan: attention=fused runs in the ATP blocks (atp, megatron, tp1d), not {}",
               strategy);
  MESHTP_CHECK(etp >= 0, "plan: etp={} must be at least 0 (0: the attention's tensor parallelism)",
               etp);
  MESHTP_CHECK(first_stage_layers >= 0 && last_stage_layers >= 0,
               "plan: first_stage_layers={} and last_stage_layers={} must be at least 0 (0: "
               "even stages)",
               first_stage_layers, last_stage_layers);
  MESHTP_CHECK(!uneven() || pp > 1,
               "plan: first_stage_layers={} / last_stage_layers={} need a pipeline, pp={}",
               first_stage_layers, last_stage_layers, pp);

  MESHTP_CHECK(mesh[0] >= 1 && mesh[1] >= 1, "plan: mesh {}x{} has a dim smaller than 1", mesh[0],
               mesh[1]);
  MESHTP_CHECK(zero >= 0 && zero <= 3, "plan: zero={} must be 0, 1, 2 or 3", zero);
  MESHTP_CHECK(virtual_stages == 1 || schedule == Schedule::kInterleaved,
               "plan: virtual_stages={} needs schedule interleaved, not {}", virtual_stages,
               schedule);
  if (strategy == Strategy::kTp1d) {
    MESHTP_CHECK(mesh[1] == 1 && sequence_parallel,
                 "plan: strategy tp1d is Megatron with sequence parallelism on mesh Nx1, got "
                 "mesh {}x{} sequence_parallel={}",
                 mesh[0], mesh[1], sequence_parallel);
  }
  MESHTP_CHECK(strategy != Strategy::kMegatron || mesh[0] == 1 || mesh[1] == 1,
               "plan: strategy megatron is 1D: mesh {}x{} needs a dim of 1 (atp for 2D)", mesh[0],
               mesh[1]);
  MESHTP_CHECK(!sequence_parallel || mesh[1] == 1,
               "plan: sequence_parallel needs a mesh Nx1, got {}x{}", mesh[0], mesh[1]);
  for (const Linear l : all<Linear>()) {
    const LinearPlan& x = linear(l);
    // Formatted only on failure: the planner validates every layout it prices.
    MESHTP_CHECK(x.gemm2d.slices >= 1, "plan: {} slices={} must be at least 1", name(l),
                 x.gemm2d.slices);
    // A plan (and its file) holds the slice count only; the rest is the planner's own.
    MESHTP_CHECK(x.gemm2d.summa_packets == 0 && x.gemm2d.wang_decomposed == Direction::kHorizontal,
                 "plan: {} summa_packets={} and wang_decomposed={} are the planner's, not a "
                 "plan's (a plan holds the slice count only)",
                 name(l), x.gemm2d.summa_packets, name(x.gemm2d.wang_decomposed));
    MESHTP_CHECK(is_gemm2d(strategy) || x == LinearPlan{},
                 "plan: per-linear settings ({}) apply to the 2D GeMM strategies, not {}",
                 linear_text(*this, l), strategy);
  }
  if (is_gemm2d(strategy)) {
    MESHTP_CHECK(chunks == 1 && !sequence_parallel,
                 "plan: chunks={} / sequence_parallel={} apply to atp, megatron, tp1d, not {}",
                 chunks, sequence_parallel, strategy);
  }
}

void Plan::check_ranks(int n, std::string_view where) const {
  if (cp > 1) {
    MESHTP_CHECK(ranks() == n,
                 "the layout dp={} × pp={} × cp={} × mesh {}x{} = {} ranks, but there are {} "
                 "({}): make dp·pp·cp·d1·d2 equal the number of ranks",
                 dp, pp, cp, mesh[0], mesh[1], ranks(), n, where);
  }
  MESHTP_CHECK(ranks() == n,
               "the layout dp={} × pp={} × mesh {}x{} = {} ranks, but there are {} ({}): make "
               "dp·pp·d1·d2 equal the number of ranks",
               dp, pp, mesh[0], mesh[1], ranks(), n, where);
}

int Plan::stage_layers(int layers, int stage) const {
  MESHTP_CHECK(stage >= 0 && stage < pp, "pipeline stage {} of pp={}", stage, pp);
  if (!uneven()) {
    MESHTP_CHECK(layers % (pp * virtual_stages) == 0,
                 "layers={} do not split into pp={} × virtual stages={}", layers, pp,
                 virtual_stages);
    return layers / pp;
  }
  const int ends = (first_stage_layers > 0 ? 1 : 0) + (last_stage_layers > 0 ? 1 : 0);
  const int middle_stages = pp - ends;
  const int rest = layers - first_stage_layers - last_stage_layers;
  MESHTP_CHECK(middle_stages >= 1 && rest >= middle_stages && rest % middle_stages == 0,
               "layers={} with first_stage_layers={} and last_stage_layers={} leave {} for the "
               "other {} stages of pp={}: not a positive whole number each",
               layers, first_stage_layers, last_stage_layers, rest, middle_stages, pp);
  if (stage == 0 && first_stage_layers > 0) return first_stage_layers;
  if (stage == pp - 1 && last_stage_layers > 0) return last_stage_layers;
  return rest / middle_stages;
}

void Plan::require_runtime(std::string_view where, bool runs_cp) const {
  MESHTP_CHECK(cp_comm != CpComm::kAllGather,
               "{}: cp_comm={} (the Llama 3 paper's all-gather context parallelism): meshtp's "
               "runtime exchanges K and V by ring, a2a or a2a+ring only; the planner prices "
               "{} (meshtp plan --3d --evaluate) and exports it (--emit megatron)",
               where, cp_comm, cp_comm);
  MESHTP_CHECK(cp == 1 || runs_cp,
               "{}: cp={} ({}): only `meshtp train` runs context parallelism; the planner "
               "prices it (meshtp plan --3d --evaluate) and exports it (--emit megatron)",
               where, cp, cp_comm);
  MESHTP_CHECK(!uneven(),
               "{}: first_stage_layers={}, last_stage_layers={}: meshtp's runtime runs even "
               "pipeline stages only; the planner prices uneven ones and exports them "
               "(--emit megatron)",
               where, first_stage_layers, last_stage_layers);
  // The runtime folds the experts onto the tensor-parallel ranks of a stage, times its
  // context-parallel ranks (model/block.hpp; Megatron-Core's MoE parallel folding): ep × etp
  // = d1·cp on a mesh N×1 (ep = N·cp, etp = 1 where the plan leaves them unset).
  const bool runtime_experts = mesh[1] == 1 && ep * expert_tp() == mesh[0] * cp;
  MESHTP_CHECK((ep == 1 && etp == 0) || runtime_experts,
               "{}: ep={} etp={} on mesh {}x{} with cp={}: meshtp's runtime folds the experts "
               "onto the tensor-parallel × context-parallel ranks of a mesh N×1, ep × etp = "
               "N·cp = {}; the planner prices other foldings (meshtp plan --3d --evaluate)",
               where, ep, expert_tp(), mesh[0], mesh[1], cp, mesh[0] * cp);
}

Plan Plan::as_runtime_runs(const ModelShape& shape) const {
  Plan p = *this;
  if (shape.is_moe() && ep == 1 && etp == 0) {
    p.ep = mesh[0] * cp;  // as require_runtime: the experts fold onto N×1's N·cp ranks
    p.etp = 1;
  }
  return p;
}

std::ostream& operator<<(std::ostream& os, const Plan& p) {
  os << fmt::format("dp={} mesh={}x{} {}", p.dp, p.mesh[0], p.mesh[1], p.strategy);
  if (p.cp > 1) os << fmt::format(" cp={} {}", p.cp, p.cp_comm);
  if (p.ep > 1 || p.etp > 0) os << fmt::format(" ep={} etp={}", p.ep, p.expert_tp());
  if (p.pp > 1) {
    os << fmt::format(" pp={} microbatches={} {}", p.pp, p.microbatches, p.schedule);
    if (p.virtual_stages > 1) os << fmt::format(" virtual_stages={}", p.virtual_stages);
    if (p.uneven()) {
      os << fmt::format(" first_stage_layers={} last_stage_layers={}", p.first_stage_layers,
                        p.last_stage_layers);
    }
  }
  if (p.zero > 0) os << " zero=" << p.zero;
  if (p.progress_splits != Plan{}.progress_splits) os << " progress_splits=" << p.progress_splits;
  if (p.recompute != Recompute::kNone) os << " recompute=" << p.recompute;
  if (p.attention != Attention::kUnfused) os << " attention=" << p.attention;
  if (is_gemm2d(p.strategy)) {
    for (const Linear l : all<Linear>()) os << ' ' << linear_text(p, l);
  } else {
    os << " chunks=" << p.chunks << (p.sequence_parallel ? " sequence_parallel" : "");
  }
  return os;
}

json to_json(const Plan& p) {
  json j{{"dp", p.dp},
         {"pp", p.pp},
         {"microbatches", p.microbatches},
         {"schedule", name(p.schedule)},
         {"virtual_stages", p.virtual_stages},
         {"zero", p.zero},
         {"recompute", name(p.recompute)},
         {"mesh", p.mesh},
         {"strategy", name(p.strategy)},
         {"chunks", p.chunks},
         {"sequence_parallel", p.sequence_parallel},
         {"progress_splits", p.progress_splits}};
  // Written only where they are not the default: a plan without them reads as before.
  if (p.cp != 1 || p.cp_comm != CpComm::kRing) {
    j["cp"] = p.cp;
    j["cp_comm"] = name(p.cp_comm);
  }
  if (p.ep != 1 || p.etp != 0) {
    j["ep"] = p.ep;
    j["etp"] = p.etp;
  }
  if (p.attention != Attention::kUnfused) j["attention"] = name(p.attention);
  if (p.uneven()) {
    j["first_stage_layers"] = p.first_stage_layers;
    j["last_stage_layers"] = p.last_stage_layers;
  }
  if (is_gemm2d(p.strategy)) {
    json& linears = j["linears"];
    for (const Linear l : all<Linear>()) {
      const LinearPlan& x = p.linear(l);
      json& o = linears[std::string(name(l))];
      if (x.algorithm) o["algorithm"] = name(*x.algorithm);
      o["stationary"] = x.stationary ? name(*x.stationary) : "auto";
      o["slices"] = x.gemm2d.slices;
    }
  }
  if (p.provenance) {
    j["provenance"] = {{"topology", p.provenance->topology},
                       {"model", p.provenance->model},
                       {"predicted_step_s", p.provenance->predicted_step_s},
                       {"predicted_comm_s", p.provenance->predicted_comm_s}};
    if (p.provenance->shape) write_shape(j["provenance"]["model_shape"], *p.provenance->shape);
  }
  return j;
}

Plan plan_from_json(const json& j, const std::string& source) {
  const std::string where = fmt::format("plan {}", source);
  check_fields(
      j,
      {"dp", "pp", "microbatches", "schedule", "virtual_stages", "zero", "recompute", "mesh",
       "strategy", "chunks", "sequence_parallel", "progress_splits", "linears", "provenance",
       "cp", "cp_comm", "first_stage_layers", "last_stage_layers", "ep", "etp", "attention"},
      where);
  Plan p;
  read(j, "dp", where, p.dp);
  read(j, "pp", where, p.pp);
  read(j, "microbatches", where, p.microbatches);
  read(j, "schedule", where, p.schedule);
  read(j, "virtual_stages", where, p.virtual_stages);
  read(j, "zero", where, p.zero);
  read(j, "recompute", where, p.recompute);
  read(j, "strategy", where, p.strategy);
  read(j, "chunks", where, p.chunks);
  read(j, "sequence_parallel", where, p.sequence_parallel);
  read(j, "progress_splits", where, p.progress_splits);
  read(j, "cp", where, p.cp);
  read(j, "cp_comm", where, p.cp_comm);
  read(j, "ep", where, p.ep);
  read(j, "etp", where, p.etp);
  read(j, "attention", where, p.attention);
  read(j, "first_stage_layers", where, p.first_stage_layers);
  read(j, "last_stage_layers", where, p.last_stage_layers);
  if (j.contains("mesh")) {
    const json& m = j["mesh"];
    MESHTP_CHECK(m.is_array() && m.size() == 2,
                 "{}: field 'mesh' must be two integers like [2, 2], got {}", where, m.dump());
    const std::vector<int> dims =
        read_int_list(j, "mesh", where, 1, std::numeric_limits<int>::max());
    p.mesh = {dims[0], dims[1]};
  }
  if (j.contains("linears")) {
    const json& ls = j["linears"];
    check_fields(ls, {"qkv", "proj", "mlp1", "mlp2"}, where + ", linears");
    for (const auto& [key, value] : ls.items()) {
      const std::string at = fmt::format("{}, linear {}", where, key);
      check_fields(value, {"algorithm", "stationary", "slices"}, at);
      LinearPlan& x = p.linears[static_cast<std::size_t>(parse<Linear>(key))];
      if (value.contains("algorithm")) x.algorithm = read_enum<Algorithm>(value, "algorithm", at);
      if (value.contains("stationary") && value["stationary"] != "auto") {
        x.stationary = read_enum<Stationary>(value, "stationary", at);
      }
      read(value, "slices", at, x.gemm2d.slices);
    }
  }
  if (j.contains("provenance")) {
    const json& pj = j["provenance"];
    const std::string at = where + ", provenance";
    check_fields(pj, {"topology", "model", "model_shape", "predicted_step_s", "predicted_comm_s"},
                 at);
    Provenance& pv = p.provenance.emplace();
    read(pj, "topology", at, pv.topology);
    read(pj, "model", at, pv.model);
    if (pj.contains("model_shape")) {
      const std::string shape_at = at + ", model_shape";
      check_fields(pj["model_shape"], shape_keys(), shape_at);
      pv.shape = read_shape(pj["model_shape"], shape_at);
      pv.shape->validate(shape_at);
    }
    read(pj, "predicted_step_s", at, pv.predicted_step_s);
    read(pj, "predicted_comm_s", at, pv.predicted_comm_s);
  }
  try {
    p.validate();
  } catch (const Error& e) {
    fail("{}: {}", where, e.what());
  }
  return p;
}

ModelFit model_fit(const Plan& plan, const ModelShape& shape) {
  ModelFit fit;
  if (!plan.provenance || !plan.provenance->shape) return fit;
  const ModelShape& made = *plan.provenance->shape;
  bool other = false;
  const auto compare = [&](const char* key, std::int64_t was, std::int64_t is, bool is_batch) {
    if (was == is) return;
    fit.differences +=
        fmt::format("{}{} {} ≠ {}", fit.differences.empty() ? "" : ", ", key, was, is);
    other |= !is_batch;
  };
  compare("layers", made.layers, shape.layers, false);
  compare("hidden", made.hidden, shape.hidden, false);
  compare("heads", made.heads, shape.heads, false);
  compare("seq", made.seq, shape.seq, false);
  compare("num_experts", made.num_experts, shape.num_experts, false);
  compare("top_k", made.top_k, shape.top_k, false);
  // The embedding and head priced; 0 on either side is a user of the layers alone
  // (simulate's layer runs), which the vocabulary does not change.
  if (made.vocab != 0 && shape.vocab != 0) compare("vocab", made.vocab, shape.vocab, false);
  compare("batch", made.batch, shape.batch, true);
  fit.kind = other                     ? ModelFit::kOther
             : fit.differences.empty() ? ModelFit::kSame
                                       : ModelFit::kBatchOnly;
  return fit;
}

std::string check_model_fit(const Plan& plan, const ModelShape& shape, std::string_view name,
                            std::string_view source) {
  const ModelFit fit = model_fit(plan, shape);
  MESHTP_CHECK(fit.kind != ModelFit::kOther,
               "{} was made for model '{}', not this one '{}' ({}): make a plan for this model "
               "with `meshtp plan --out`",
               source, plan.provenance->model, name, fit.differences);
  if (fit.kind != ModelFit::kBatchOnly) return "";
  return fmt::format(
      "{} was made for another batch ({}): its layout runs, but was priced for "
      "that batch",
      source, fit.differences);
}

Plan load_plan(const std::string& path) {
  return plan_from_json(parse_json(read_file(path), fmt::format("'{}'", path)),
                        fmt::format("'{}'", path));
}

void save_plan(const std::string& path, const Plan& plan) {
  plan.validate();
  write_file_atomically(path, to_json(plan).dump(2) + "\n");
}

int cp_a2a_size(CpComm comm, int cp, int heads_per_tp_rank) {
  if (comm == CpComm::kRing || comm == CpComm::kAllGather) return 1;
  if (comm == CpComm::kA2a) return cp;
  int best = 1;
  for (int u = 2; u < cp; ++u) {
    if (cp % u == 0 && heads_per_tp_rank % u == 0) best = u;
  }
  return best;
}

Plan build_plan(const PlanSpelling& s, std::array<int, 2> mesh) {
  Plan p{.dp = s.dp,
         .pp = s.pp,
         .microbatches = s.microbatches,
         .zero = s.zero,
         .recompute = parse_recompute(s.recompute),
         .mesh = mesh,
         .strategy = parse_strategy(s.strategy),
         .chunks = s.chunks,
         .sequence_parallel = s.sequence_parallel || s.strategy == "tp1d",
         .progress_splits = s.progress_splits,
         .attention = parse<Attention>(s.attention),
         .cp = s.cp,
         .cp_comm = parse<CpComm>(s.cp_comm),
         .ep = s.ep,
         .etp = s.etp};
  // --schedule gpipe|1f1b|interleaved[:V]
  const std::size_t colon = s.schedule.find(':');
  p.schedule = parse_schedule(s.schedule.substr(0, colon));
  if (p.schedule == Schedule::kInterleaved) {
    const std::string v = colon == std::string::npos ? "2" : s.schedule.substr(colon + 1);
    const std::vector<int> parsed = parse_positive_ints(v, "--schedule interleaved:V");
    MESHTP_CHECK(parsed.size() == 1, "--schedule '{}': interleaved:V takes one number", s.schedule);
    p.virtual_stages = parsed[0];
  } else {
    MESHTP_CHECK(colon == std::string::npos,
                 "--schedule '{}': only interleaved takes virtual stages (interleaved:V)",
                 s.schedule);
  }
  if (is_gemm2d(p.strategy)) {
    const LinearPlan l{.stationary = s.stationary == "auto"
                                         ? std::nullopt
                                         : std::optional(parse_stationary(s.stationary)),
                       .gemm2d = s.gemm2d};
    p.linears.fill(l);
  } else {
    MESHTP_CHECK(s.stationary == "auto" && s.gemm2d.slices == 1,
                 "--stationary {} / --slices {} apply to the 2D GeMM strategies, not --strategy {}",
                 s.stationary, s.gemm2d.slices, s.strategy);
  }
  p.validate();
  return p;
}

Plan build_plan(const PlanSpelling& spelling, const std::optional<std::array<int, 2>>& mesh,
                int ranks, const std::string& where) {
  std::array<int, 2> tp_mesh{};
  if (mesh) {
    tp_mesh = *mesh;
  } else {
    const int outer = spelling.dp * spelling.pp * spelling.cp;
    MESHTP_CHECK(spelling.dp >= 1 && spelling.pp >= 1 && spelling.cp >= 1 && ranks % outer == 0,
                 "dp={} × pp={}{} does not divide the {} ranks ({})", spelling.dp, spelling.pp,
                 spelling.cp > 1 ? fmt::format(" × cp={}", spelling.cp) : "", ranks, where);
    tp_mesh = {ranks / outer, 1};
  }
  const Plan p = build_plan(spelling, tp_mesh);
  p.check_ranks(ranks, where);
  return p;
}

}  // namespace meshtp::layout
