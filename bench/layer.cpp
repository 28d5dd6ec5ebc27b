#include "bench/layer.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "bench/blas_reference.hpp"
#include "comm/communicator.hpp"
#include "core/error.hpp"
#include "core/simulation.hpp"
#include "core/stats.hpp"
#include "core/trace.hpp"
#include "model/reference.hpp"
#include "tensor/random.hpp"

namespace meshtp::bench {
namespace {

// Every parameter random and off its init, so a misplaced shard of any of them shows.
std::map<std::string, Tensor> random_weights(int layers, std::int64_t hidden) {
  std::map<std::string, Tensor> w;
  std::uint64_t seed = 1000;
  for (const auto& e : model::stack_param_table(layers, hidden)) {
    Tensor t = uniform_tensor(e.shape, ++seed, e.shape.size() == 2 ? 0.3f : 0.2f);
    if (e.init == model::Init::kOnes) {
      for (auto& v : t.values()) v += 1.0f;
    }
    w.emplace(e.name, std::move(t));
  }
  return w;
}

// The check runs at most this many slices per linear: S > 1 takes every slicing code path
// whatever S is, while the check's sizes grow with S twice (features and tokens), so at
// S = 128 on 2x2 its reference stack alone took 2 GiB per rank (h = s = 4096).
constexpr int kCheckSlices = 8;

}  // namespace

model::GptConfig check_config(const model::GptConfig& real, int d1, int d2) {
  model::GptConfig c = real;
  int slices = 1;
  for (layout::LinearPlan& l : c.layout.linears) {
    l.gemm2d.slices = std::min(l.gemm2d.slices, kCheckSlices);
    slices = std::lcm(slices, l.gemm2d.slices);
  }
  layout::ModelShape& m = c.shape;
  m.layers = std::min<std::int64_t>(real.shape.layers, 2);
  m.heads = d1 * d2;
  m.hidden = 8 * m.heads * slices;
  m.batch = c.layout.chunks * d1;
  m.seq = 8 * d1 * d2 * slices;
  return c;
}

namespace {

double check_against_reference(const mesh::DeviceMesh& mesh, const model::GptConfig& real) {
  const model::GptConfig c = check_config(real, mesh.size(0), mesh.size(1));
  const layout::ModelShape& m = c.shape;
  const Shape shape{m.batch, m.seq, m.hidden};
  const Tensor x = uniform_tensor(shape, 11), dy = uniform_tensor(shape, 12);
  const auto weights = random_weights(static_cast<int>(m.layers), m.hidden);
  model::ReferenceStack serial(model::stack_config(c), weights);
  const Tensor y_ref = serial.forward(x);
  const Tensor dx_ref = serial.backward(dy);
  const std::unique_ptr<model::Stack> stack = model::make_stack(mesh, c);
  stack->load(SafetensorsFile{"check weights", weights, {}});
  stack->set_input(x);
  stack->forward();
  stack->set_grad_output(dy);
  stack->zero_grads();
  stack->backward();
  double err = std::max(max_relative_error(stack->gather_output().values(), y_ref.values()),
                        max_relative_error(stack->gather_grad_input().values(), dx_ref.values()));
  for (const auto& [name, g] : stack->gather_grads()) {
    err = std::max(err, max_relative_error(g.values(), serial.grads().at(name).values()));
  }
  return err;
}

bool all_finite(device::Backend& be, const device::Array& a) {
  return device::read_on_host(be, a, [](std::span<const float> v) {
    return std::all_of(v.begin(), v.end(), [](float x) { return std::isfinite(x); });
  });
}
device::Array array_of(const parallel::ChunkedMatrix& m) {
  const std::span<float> v = m.span();
  // A view of the stack's own stream (not owning it): for the finiteness check.
  return device::Array(std::shared_ptr<void>(v.data(), [](void*) {}), Element::kF32,
                       static_cast<std::int64_t>(v.size()));
}

}  // namespace

namespace {

LayerBenchSample run(const mesh::DeviceMesh& mesh, const LayerBenchOptions& o,
                     model::Stack& stack) {
  const layout::ModelShape& c = o.config.shape;
  LayerBenchSample r;
  r.mesh = mesh.shape();
  r.flops = static_cast<double>(c.layers) * c.layer_flops();
  // On the simulated build's charged devices nothing is computed: no values to validate.
  const bool validate_values = !simhooks::values_meaningless();
  if (o.check && validate_values) {
    r.check_error = check_against_reference(mesh, o.config);
    MESHTP_CHECK(r.check_error <= 1e-3,
                 "layer benchmark check failed on mesh {}x{}: max relative error {} vs the "
                 "serial reference",
                 r.mesh[0], r.mesh[1], r.check_error);
  }

  const auto& world = mesh.comm();
  stack.init(7);
  const Shape shape{c.batch, c.seq, c.hidden};
  stack.set_input(uniform_tensor(shape, 21));
  stack.set_grad_output(uniform_tensor(shape, 22));
  // backward consumes grad_output: keep this rank's block (in the stack's backend) to restore
  // before every step. Every phase ends at the backend's synchronize(): a GPU's queue drained.
  device::Backend& be = stack.backend();
  const device::Array dy_now = array_of(stack.grad_output());
  device::Array dy_local = be.alloc(dy_now.count(), Element::kF32);
  be.copy(dy_local, dy_now);

  // times: forward, backward, step, comm wait (max over ranks), then this rank's start.
  auto step = [&](double times[5]) {
    device::Array dy = array_of(stack.grad_output());
    be.copy(dy, dy_local);
    be.synchronize();
    world.barrier();
    times[4] = now_seconds();
    const double wait0 = comm::comm_ledger().wait_seconds;
    const double t0 = now_seconds();
    {
      const ScopedSpan span("forward", SpanKind::kPhase);
      stack.forward();
      be.synchronize();
    }
    const double t1 = now_seconds();
    {
      const ScopedSpan span("backward", SpanKind::kPhase);
      stack.backward();
      be.synchronize();
    }
    const double t2 = now_seconds();
    times[0] = t1 - t0;
    times[1] = t2 - t1;
    times[2] = t2 - t0;
    times[3] = comm::comm_ledger().wait_seconds - wait0;
    world.all_reduce(std::span<double>(times, 4), comm::ReduceOp::kMax);
  };
  double t[5];
  step(t);  // warm-up, and the finiteness check
  int finite = 1;
  if (validate_values) {
    finite =
        all_finite(be, array_of(stack.output())) && all_finite(be, array_of(stack.grad_input()));
    for (int p = 0; p < stack.num_params(); ++p) {
      finite = finite && all_finite(be, stack.grad(p));
    }
  }
  world.all_reduce(std::span<int>(&finite, 1), comm::ReduceOp::kSum);
  MESHTP_CHECK(finite == world.size(),
               "layer benchmark on mesh {}x{}: non-finite outputs or gradients on {} rank(s)",
               r.mesh[0], r.mesh[1], world.size() - finite);
  step(t);
  r.iterations = std::clamp(static_cast<int>(o.target_seconds / std::max(t[2], 1e-6)),
                            o.min_iterations, o.max_iterations);
  // The baseline: BLAS on the host, the backend's own GeMM on a device.
  BlasReference blas(c.batch * c.seq, c.hidden, 0, be.device_memory() != nullptr ? &be : nullptr);
  std::vector<double> fwd, bwd, all, wait, blas_s;
  for (int it = 0; it < r.iterations; ++it) {
    step(t);
    fwd.push_back(t[0]);
    bwd.push_back(t[1]);
    all.push_back(t[2]);
    wait.push_back(t[3]);
    double b = blas.time_pass();  // every rank at once, as in the step
    world.all_reduce(std::span<double>(&b, 1), comm::ReduceOp::kMax);
    blas_s.push_back(b);
  }
  r.forward_s = median(fwd);
  r.backward_s = median(bwd);
  r.step_s = median(all);
  r.comm_wait_s = median(wait);
  r.tflops_per_rank = r.flops / r.step_s / mesh.size() / 1e12;
  r.blas_gflops = blas.flops() / median(blas_s) / 1e9;
  r.ratio_to_blas = r.tflops_per_rank * 1e3 / r.blas_gflops;
  if (o.trace) {
    Tracer& tracer = Tracer::instance();
    tracer.clear();
    tracer.enable();
    step(t);
    tracer.disable();
    r.trace_origin_s = t[4];
  }
  return r;
}

}  // namespace

LayerBenchSample run_layer_bench(const mesh::DeviceMesh& mesh, const LayerBenchOptions& o) {
  return run(mesh, o, *model::make_stack(mesh, o.config));  // validates
}

}  // namespace meshtp::bench
