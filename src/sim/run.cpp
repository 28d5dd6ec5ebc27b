#include "sim/run.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <iterator>
#include <memory>
#include <utility>

#include "core/error.hpp"
#include "core/simulation.hpp"
#include "core/stats.hpp"
#include "core/trace.hpp"
#include "mesh/device_mesh.hpp"
#include "parallel/gemm2d/gemm2d.hpp"
#include "tensor/random.hpp"
#include "train/adamw.hpp"
#include "train/chrome_trace.hpp"
#include "train/pipeline_model.hpp"

namespace meshtp::sim {
namespace {

using layout::CollectiveKind;

constexpr const char* kWhatNames[] = {"layer", "step", "gemm2d", "collectives", "pipeline"};
constexpr std::size_t kKinds = layout::all<CollectiveKind>().size();

// A communication span's collective: "all_reduce" and its non-blocking "iall_reduce" alike;
// send, recv and sendrecv are send_recv. kNone for what is not a collective (barrier).
CollectiveKind kind_of(std::string_view span) {
  if (span == "send" || span == "recv" || span == "isend" || span == "irecv" ||
      span == "sendrecv") {
    return CollectiveKind::kSendRecv;
  }
  // Blocks of their own sizes (a mixture of experts' dispatch) are all-to-all traffic.
  if (span == "all_to_allv" || span == "iall_to_allv") return CollectiveKind::kAllToAll;
  for (const std::string_view name : {span, span.substr(span.empty() ? 0 : 1)}) {
    for (const CollectiveKind k : layout::all<CollectiveKind>()) {
      if (name == layout::name(k)) return k;
    }
  }
  return CollectiveKind::kNone;
}

// One measured region: the time of each phase on this device's clock, then the max over
// devices of everything (the slowest device sets the step).
struct Measure {
  std::vector<double> phase_s;
  double exposed_s = 0, compute_s = 0;
  std::array<double, kKinds> coll_s{}, coll_calls{};
};

Measure measure(const comm::Communicator& world, const std::vector<std::function<void()>>& phases,
                const std::string& trace) {
  world.barrier();
  Tracer& tracer = Tracer::instance();
  tracer.clear();
  tracer.enable();
  const double origin = now_seconds();
  const double wait0 = comm::comm_ledger().wait_seconds;
  const double charged0 = simhooks::hooks().charged_s;
  Measure m;
  for (const auto& phase : phases) {
    const double t0 = now_seconds();
    phase();
    m.phase_s.push_back(now_seconds() - t0);
  }
  tracer.disable();
  m.exposed_s = comm::comm_ledger().wait_seconds - wait0;
  m.compute_s = simhooks::hooks().charged_s - charged0;
  for (const TraceSpan& s : tracer.spans()) {
    if (s.kind != SpanKind::kComm) continue;
    const auto i = static_cast<std::size_t>(kind_of(s.name));
    if (i == 0) continue;
    m.coll_s[i] += s.end_s - s.start_s;
    m.coll_calls[i] += 1;
  }
  std::vector<double> all = m.phase_s;
  all.push_back(m.exposed_s);
  all.push_back(m.compute_s);
  all.insert(all.end(), m.coll_s.begin(), m.coll_s.end());
  all.insert(all.end(), m.coll_calls.begin(), m.coll_calls.end());
  world.all_reduce(std::span<double>(all), comm::ReduceOp::kMax);
  std::size_t i = 0;
  for (double& v : m.phase_s) v = all[i++];
  m.exposed_s = all[i++];
  m.compute_s = all[i++];
  for (double& v : m.coll_s) v = all[i++];
  for (double& v : m.coll_calls) v = all[i++];
  if (!trace.empty()) train::write_chrome_trace(trace, world, origin);
  tracer.clear();
  return m;
}

RunResult result_of(const Measure& m) {
  RunResult r;
  r.exposed_comm_s = m.exposed_s;
  r.compute_s = m.compute_s;
  for (std::size_t i = 1; i < kKinds; ++i) {
    if (m.coll_calls[i] == 0) continue;
    r.collectives.push_back({.kind = static_cast<CollectiveKind>(i),
                             .calls = static_cast<int>(m.coll_calls[i]),
                             .seconds = m.coll_s[i]});
  }
  return r;
}

// Values mode computes real values: give the stack real inputs, so a value check of the
// simulated build means something. Charged mode leaves every buffer as it is (never written).
void prepare(model::Stack& stack, const model::GptConfig& c) {
  if (simhooks::values_meaningless()) return;
  stack.init(1);
  stack.set_input(uniform_tensor({c.shape.batch, c.shape.seq, c.shape.hidden}, 21));
  stack.set_grad_output(uniform_tensor({c.shape.batch, c.shape.seq, c.shape.hidden}, 22));
}

RunResult run_stack(const comm::Communicator& world, model::Stack& stack, const RunSpec& spec) {
  prepare(stack, spec.model);
  std::vector<std::function<void()>> phases{[&] { stack.forward(); },
                                            [&] {
                                              stack.zero_grads();
                                              stack.backward();
                                            }};
  std::vector<train::ParamRef> params;
  std::unique_ptr<train::AdamW> adamw;
  if (spec.what == What::kStep) {
    for (int p = 0; p < stack.num_params(); ++p) {
      params.push_back({.name = stack.param_table()[static_cast<std::size_t>(p)].name,
                        .value = &stack.value(p),
                        .grad = &stack.grad(p),
                        .decay = stack.decays(p),
                        .replicas = stack.replicas(p)});
    }
    adamw = std::make_unique<train::AdamW>(stack.backend(), params, train::AdamWConfig{});
    phases.push_back([&] {
      const double norm = train::global_grad_norm(stack.backend(), params, world);
      train::clip_gradients(stack.backend(), params, norm, 1.0);
      adamw->step(1e-4f);
    });
  }
  const Measure m = measure(world, phases, spec.trace);
  RunResult r = result_of(m);
  r.forward_s = m.phase_s[0];
  r.backward_s = m.phase_s[1];
  r.optimizer_s = m.phase_s.size() > 2 ? m.phase_s[2] : 0.0;
  r.total_s = r.forward_s + r.backward_s + r.optimizer_s;
  return r;
}

// One training step of the whole layout, as the trainer runs it (train/trainer.cpp): the
// schedule's forward and backward of every microbatch with the data-parallel reduction, then
// the global gradient norm, clipping and AdamW. Token ids 0 (values are meaningless in
// charged mode; in values mode any ids do).
RunResult run_pipeline_step(const comm::Communicator& world, const RunSpec& spec) {
  train::PipelineModel model(world, spec.model, spec.model.layout.zero, train::AdamWConfig{});
  if (!simhooks::values_meaningless()) model.init(1);
  const auto n = static_cast<std::size_t>(model.replica_rows() * spec.model.shape.seq);
  const std::vector<std::int32_t> tokens(n, 0), targets(n, 0);
  const Measure m = measure(world,
                            {[&] { (void)model.forward_backward(tokens, targets); },
                             [&] {
                               const double norm = model.grad_norm(world);
                               model.clip(norm, 1.0);
                               model.step(1e-4f);
                             }},
                            spec.trace);
  RunResult r = result_of(m);
  r.schedule_s = m.phase_s[0];
  r.optimizer_s = m.phase_s[1];
  r.total_s = r.schedule_s + r.optimizer_s;
  return r;
}

parallel::Gemm2dOptions gemm2d_options(const RunSpec& s) {
  const layout::Plan& p = s.model.layout;
  MESHTP_CHECK(layout::is_gemm2d(p.strategy),
               "--what gemm2d runs a 2D GeMM algorithm (meshslice, collective, wang, summa, "
               "cannon), not '{}'",
               p.strategy);
  return {.algo = p.algorithm(layout::Linear::kMlp1),
          .dataflow = s.dataflow,
          .params = p.linear(layout::Linear::kMlp1).gemm2d,
          .progress_splits = p.progress_splits};
}

RunResult run_gemm2d(const mesh::DeviceMesh& mesh, const RunSpec& s) {
  const int nr = mesh.size(0), nc = mesh.size(1);
  const parallel::Gemm2dOptions options = gemm2d_options(s);
  const parallel::Gemm2dShape shape{
      .dataflow = options.dataflow, .m = s.m, .n = s.n, .k = s.k, .nr = nr, .nc = nc};
  parallel::validate(nr, nc, shape, options);
  const Shape ga = parallel::global_a_shape(options.dataflow, shape);
  const Shape gb = parallel::global_b_shape(options.dataflow, shape);
  Tensor a({ga[0] / nr, ga[1] / nc}), b({gb[0] / nr, gb[1] / nc}), c({s.m / nr, s.n / nc});
  parallel::Gemm2dWorkspace workspace;
  const Measure m = measure(
      mesh.comm(),
      {[&] { parallel::gemm2d(mesh, a.matrix(), b.matrix(), c.matrix(), options, workspace); }},
      s.trace);
  RunResult r = result_of(m);
  r.total_s = r.forward_s = m.phase_s[0];
  return r;
}

RunResult run_collectives(const mesh::DeviceMesh& mesh, const RunSpec& s) {
  RunResult r;
  for (int dim = 0; dim < mesh.ndim(); ++dim) {
    const comm::Communicator& group = mesh.dim_comm(dim);
    const int p = group.size();
    if (p == 1) continue;
    for (const double bytes : s.sizes) {
      const auto n = static_cast<std::int64_t>(bytes / sizeof(float));
      Tensor full({n}), part({n / p});
      const std::pair<CollectiveKind, std::function<void()>> ops[] = {
          {CollectiveKind::kAllReduce, [&] { group.all_reduce(full.values()); }},
          {CollectiveKind::kAllGather,
           [&] { group.all_gather(std::span<const float>(part.values()), full.values()); }},
          {CollectiveKind::kReduceScatter,
           [&] { group.reduce_scatter(std::span<const float>(full.values()), part.values()); }},
          {CollectiveKind::kBroadcast, [&] { group.broadcast(full.values(), 0); }},
      };
      for (const auto& [kind, op] : ops) {
        // From the last rank's call to the last rank's return: the barrier releases the ranks
        // up to one link latency apart, and a rank that calls early only waits for the
        // others (timed from its own call, every lone collective took one L more).
        mesh.comm().barrier();
        std::array<double, 2> span{now_seconds(), 0.0};
        op();
        span[1] = now_seconds();
        mesh.comm().all_reduce(std::span<double>(span), comm::ReduceOp::kMax);
        r.collectives.push_back({.kind = kind, .dim = dim, .bytes = bytes, .calls = 1,
                                 .seconds = span[1] - span[0]});
      }
    }
  }
  return r;
}

}  // namespace

const char* name(What what) { return kWhatNames[static_cast<int>(what)]; }

What parse_what(const std::string& text) {
  for (std::size_t i = 0; i < std::size(kWhatNames); ++i) {
    if (text == kWhatNames[i]) return static_cast<What>(i);
  }
  fail("unknown --what '{}' (layer, step, pipeline, gemm2d, collectives)", text);
}

int RunSpec::ranks() const {
  const layout::Plan& p = model.layout;
  return (what == What::kPipeline ? p.dp * p.pp : 1) * p.mesh[0] * p.mesh[1];
}

void validate(const RunSpec& s) {
  const std::vector<int> shape{s.mesh()[0], s.mesh()[1]};
  MESHTP_CHECK(shape[0] >= 1 && shape[1] >= 1, "mesh {}x{}: sizes must be positive", shape[0],
               shape[1]);
  const layout::Plan& p = s.model.layout;
  MESHTP_CHECK(s.what == What::kPipeline || (p.dp == 1 && p.pp == 1),
               "--what {} runs one tensor-parallel mesh: dp={} and pp={} need --what pipeline",
               name(s.what), p.dp, p.pp);
  MESHTP_CHECK(!s.fold_layers || s.what == What::kPipeline,
               "folding layers is for --what pipeline, not {}", name(s.what));
  switch (s.what) {
    case What::kLayer:
    case What::kStep: model::validate(s.model, shape); return;
    case What::kPipeline: {
      p.validate();
      model::validate(s.model, shape);
      MESHTP_CHECK(s.model.shape.batch % (p.dp * p.microbatches) == 0,
                   "batch={} does not split into dp={} × microbatches={}", s.model.shape.batch,
                   p.dp, p.microbatches);
      (void)layout::make_schedule(p.schedule, p.pp, p.microbatches, p.virtual_stages);
      return;
    }
    case What::kGemm2d:
      parallel::validate(shape[0], shape[1], {.m = s.m, .n = s.n, .k = s.k}, gemm2d_options(s));
      return;
    case What::kCollectives:
      MESHTP_CHECK(!s.sizes.empty(), "--what collectives needs message sizes");
      for (const double bytes : s.sizes) {
        for (const int p : shape) {
          MESHTP_CHECK(bytes > 0 && std::fmod(bytes, 4.0 * p) == 0,
                       "message of {} bytes is not a whole number of floats per rank of a "
                       "{}-rank group",
                       bytes, p);
        }
      }
      return;
  }
}

RunResult run(const comm::Communicator& world, const RunSpec& spec) {
  MESHTP_CHECK(spec.ranks() == world.size(), "the layout has {} devices but the simulation has {}",
               spec.ranks(), world.size());
  validate(spec);
  simhooks::hooks().fold_layers = spec.fold_layers;
  const auto tp_mesh = [&] { return mesh::DeviceMesh(world, {spec.mesh()[0], spec.mesh()[1]}); };
  RunResult r;
  switch (spec.what) {
    case What::kLayer:
    case What::kStep: {
      const mesh::DeviceMesh mesh = tp_mesh();  // the stack keeps a pointer to it
      r = run_stack(world, *model::make_stack(mesh, spec.model), spec);
      break;
    }
    case What::kPipeline:
      r = run_pipeline_step(world, spec);
      break;
    case What::kGemm2d:
      r = run_gemm2d(tp_mesh(), spec);
      break;
    case What::kCollectives:
      r = run_collectives(tp_mesh(), spec);
      break;
  }
  r.what = name(spec.what);
  r.mode = to_string(simhooks::mode());
  return r;
}

// ---- JSON ------------------------------------------------------------------------------

nlohmann::json to_json(const RunSpec& s) {
  nlohmann::json model;
  layout::write_shape(model, s.model.shape);
  return {{"what", name(s.what)},
          {"model", model},
          {"plan", layout::to_json(s.model.layout)},
          {"m", s.m},
          {"n", s.n},
          {"k", s.k},
          {"dataflow", layout::name(s.dataflow)},
          {"sizes", s.sizes},
          {"trace", s.trace},
          {"element_bytes", s.element_bytes},
          {"fold_layers", s.fold_layers}};
}

RunSpec run_spec_from_json(const nlohmann::json& j) {
  try {
    RunSpec s;
    s.what = parse_what(j.at("what").get<std::string>());
    s.model.shape = layout::read_shape(j.at("model"), "simulation spec, model");
    s.model.layout = layout::plan_from_json(j.at("plan"), "simulation spec");
    s.m = j.at("m").get<std::int64_t>();
    s.n = j.at("n").get<std::int64_t>();
    s.k = j.at("k").get<std::int64_t>();
    s.dataflow = layout::parse_dataflow(j.at("dataflow").get<std::string>());
    s.sizes = j.at("sizes").get<std::vector<double>>();
    s.trace = j.at("trace").get<std::string>();
    s.element_bytes = j.at("element_bytes").get<int>();
    s.fold_layers = j.value("fold_layers", false);
    MESHTP_CHECK(s.element_bytes == 2 || s.element_bytes == 4,
                 "simulation spec: element_bytes={} must be 2 or 4", s.element_bytes);
    return s;
  } catch (const nlohmann::json::exception& e) {
    fail("simulation spec: {}", e.what());
  }
}

nlohmann::json to_json(const RunResult& r) {
  nlohmann::json colls = nlohmann::json::array();
  for (const CollectiveTime& c : r.collectives) {
    colls.push_back({{"name", layout::name(c.kind)},
                     {"dim", c.dim},
                     {"bytes", c.bytes},
                     {"calls", c.calls},
                     {"seconds", c.seconds}});
  }
  return {{"what", r.what},
          {"mode", r.mode},
          {"total_s", r.total_s},
          {"forward_s", r.forward_s},
          {"backward_s", r.backward_s},
          {"optimizer_s", r.optimizer_s},
          {"schedule_s", r.schedule_s},
          {"exposed_comm_s", r.exposed_comm_s},
          {"compute_s", r.compute_s},
          {"collectives", colls}};
}

RunResult run_result_from_json(const nlohmann::json& j) {
  try {
    RunResult r;
    r.what = j.at("what").get<std::string>();
    r.mode = j.at("mode").get<std::string>();
    r.total_s = j.at("total_s").get<double>();
    r.forward_s = j.at("forward_s").get<double>();
    r.backward_s = j.at("backward_s").get<double>();
    r.optimizer_s = j.at("optimizer_s").get<double>();
    r.schedule_s = j.value("schedule_s", 0.0);
    r.exposed_comm_s = j.at("exposed_comm_s").get<double>();
    r.compute_s = j.at("compute_s").get<double>();
    for (const auto& c : j.at("collectives")) {
      r.collectives.push_back(
          {.kind = layout::parse_collective(c.at("name").get<std::string>()),
           .dim = c.at("dim").get<int>(),
           .bytes = c.at("bytes").get<double>(),
           .calls = c.at("calls").get<int>(),
           .seconds = c.at("seconds").get<double>()});
    }
    return r;
  } catch (const nlohmann::json::exception& e) {
    fail("simulation result: {}", e.what());
  }
}

}  // namespace meshtp::sim
