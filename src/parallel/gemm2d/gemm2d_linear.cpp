// The 2D-parallel linear layer: mode table in gemm2d_linear.hpp. Each mode is one row of
// kProducts below — the operands and dataflow of its three GeMMs — so the forward and
// backward code is the same for every mode.
#include "parallel/gemm2d/gemm2d_linear.hpp"

#include <ostream>

#include "core/error.hpp"
#include "ops/cpu_backend.hpp"
#include "parallel/gemm2d/gemm2d_impl.hpp"

namespace meshtp::parallel {
namespace {

// Operand names of a product: the layer's input, output gradient, or weight.
enum class Operand { kIn, kDout, kWeight };

struct Product {
  Dataflow dataflow;
  Operand a, b;
};

struct ModeProducts {
  Stationary mode;
  bool transposed_input;
  Product forward, backward_data, backward_weight;
};

using D = Dataflow;
using O = Operand;
constexpr ModeProducts kProducts[] = {
    //               forward                   backward-data                backward-weight
    {Stationary::kInput,
     false,
     {D::kLS, O::kIn, O::kWeight},
     {D::kOS, O::kDout, O::kWeight},
     {D::kRS, O::kDout, O::kIn}},
    {Stationary::kOutput,
     false,
     {D::kOS, O::kIn, O::kWeight},
     {D::kLS, O::kDout, O::kWeight},
     {D::kRS, O::kIn, O::kDout}},
    {Stationary::kWeight,
     false,
     {D::kLS, O::kWeight, O::kIn},
     {D::kRS, O::kDout, O::kWeight},
     {D::kOS, O::kDout, O::kIn}},
    {Stationary::kWeight,
     true,
     {D::kRS, O::kIn, O::kWeight},
     {D::kLS, O::kWeight, O::kDout},
     {D::kOS, O::kIn, O::kDout}},
};

const ModeProducts& products(const Gemm2dLinearPlan& plan) {
  for (const auto& p : kProducts) {
    if (p.mode == plan.stationary && p.transposed_input == plan.transposed_input) return p;
  }
  fail("gemm2d_linear: stationary {} takes no transposed input", plan.stationary);
}

// The weight is stored W [M, K] unless the output or the transposed input is kept.
bool weight_is_out_in(const Gemm2dLinearPlan& p) {
  return p.stationary == Stationary::kInput ||
         (p.stationary == Stationary::kWeight && !p.transposed_input);
}

// Global (m, n, k) of a product: C is m × n, from the stored shapes of its operands.
Gemm2dShape product_shape(const Gemm2dLinearPlan& plan, const Product& p) {
  const auto stored = [&](Operand o) {
    return o == O::kIn       ? plan.input_shape()
           : o == O::kWeight ? plan.weight_shape()
                             : plan.output_shape();
  };
  const Shape a = stored(p.a), b = stored(p.b);
  switch (p.dataflow) {
    case D::kOS:
      return {.dataflow = p.dataflow, .m = a[0], .n = b[1], .k = a[1]};
    case D::kLS:
      return {.dataflow = p.dataflow, .m = a[0], .n = b[0], .k = a[1]};
    case D::kRS:
      return {.dataflow = p.dataflow, .m = a[1], .n = b[1], .k = a[0]};
  }
  fail("unknown dataflow");
}

const View& pick(Operand o, const View& in, const View& dout, const View& weight) {
  return o == O::kIn ? in : o == O::kDout ? dout : weight;
}

// target += gemm2d(a, b), through a workspace buffer (gemm2d overwrites its output).
void accumulate(const mesh::DeviceMesh& mesh, const View& a, const View& b, const View& target,
                const Gemm2dOptions& options, Gemm2dWorkspace& ws, int slot) {
  const View tmp = ws.get(slot, target.rows, target.cols, target.type);
  gemm2d(mesh, a, b, tmp, options, ws);
  ws.backend().add(target, tmp);
}

}  // namespace

Shape Gemm2dLinearPlan::weight_shape() const {
  return weight_is_out_in(*this) ? Shape{m, k} : Shape{k, m};
}
Shape Gemm2dLinearPlan::input_shape() const { return transposed_input ? Shape{k, n} : Shape{n, k}; }
Shape Gemm2dLinearPlan::output_shape() const {
  return stationary == Stationary::kWeight && !transposed_input ? Shape{m, n} : Shape{n, m};
}

std::ostream& operator<<(std::ostream& os, const Gemm2dLinearPlan& p) {
  return os << "gemm2d_linear n=" << p.n << " k=" << p.k << " m=" << p.m
            << " stationary=" << p.stationary << (p.transposed_input ? " (input transposed)" : "")
            << " weight " << to_string(p.weight_shape()) << " in " << to_string(p.input_shape())
            << " out " << to_string(p.output_shape()) << ": forward " << p.forward.dataflow
            << ", backward-data " << p.backward_data.dataflow << ", backward-weight "
            << p.backward_weight.dataflow << " (" << p.forward.algo
            << ", slices=" << p.forward.params.slices << ")";
}

Gemm2dLinearPlan plan_gemm2d_linear(int nr, int nc, std::int64_t n, std::int64_t k, std::int64_t m,
                                    const Gemm2dLinearOptions& options) {
  MESHTP_CHECK(n >= 1 && k >= 1 && m >= 1,
               "gemm2d_linear sizes must be positive, got n={} k={} m={}", n, k, m);
  Gemm2dLinearPlan plan;
  plan.n = n;
  plan.k = k;
  plan.m = m;
  plan.stationary = options.stationary.value_or(
      layout::choose_stationary(n, k, m, options.allow_weight_stationary));
  plan.transposed_input = options.transposed_input;
  const ModeProducts& p = products(plan);
  const Gemm2dOptions base{
      .algo = options.algo, .params = options.params, .progress_splits = options.progress_splits};
  const std::pair<const Product*, Gemm2dOptions*> all[] = {
      {&p.forward, &plan.forward},
      {&p.backward_data, &plan.backward_data},
      {&p.backward_weight, &plan.backward_weight}};
  constexpr const char* kWhat[] = {"forward", "backward-data", "backward-weight"};
  for (int i = 0; i < 3; ++i) {
    *all[i].second = base;
    all[i].second->dataflow = all[i].first->dataflow;
    const Gemm2dShape s = product_shape(plan, *all[i].first);
    try {
      validate(nr, nc, s, *all[i].second);
    } catch (const Error& e) {
      fail("gemm2d_linear {} ({}, m={} n={} k={}, stationary={}): {}", kWhat[i],
           all[i].first->dataflow, s.m, s.n, s.k, plan.stationary, e.what());
    }
  }
  return plan;
}

void gemm2d_linear_forward(const mesh::DeviceMesh& mesh, const Gemm2dLinearPlan& plan,
                           const View& out, const View& in, const View& weight,
                           Gemm2dWorkspace& ws) {
  const Product& f = products(plan).forward;
  gemm2d(mesh, pick(f.a, in, {}, weight), pick(f.b, in, {}, weight), out, plan.forward, ws);
}

void gemm2d_linear_backward(const mesh::DeviceMesh& mesh, const Gemm2dLinearPlan& plan,
                            const View& din, const View& dweight, const View& dout, const View& in,
                            const View& weight, Gemm2dWorkspace& ws) {
  const ModeProducts& p = products(plan);
  // Slots from 64 up are the callers' (the algorithms use the low ones).
  accumulate(mesh, pick(p.backward_data.a, in, dout, weight),
             pick(p.backward_data.b, in, dout, weight), din, plan.backward_data, ws, 64);
  accumulate(mesh, pick(p.backward_weight.a, in, dout, weight),
             pick(p.backward_weight.b, in, dout, weight), dweight, plan.backward_weight, ws, 65);
}

void gemm2d_linear_forward(const mesh::DeviceMesh& mesh, const Gemm2dLinearPlan& plan,
                           MatrixView out, ConstMatrixView in, ConstMatrixView weight,
                           Gemm2dWorkspace& ws) {
  gemm2d_linear_forward(mesh, plan, host_view(out), host_view(in), host_view(weight), ws);
}

void gemm2d_linear_backward(const mesh::DeviceMesh& mesh, const Gemm2dLinearPlan& plan,
                            MatrixView din, MatrixView dweight, ConstMatrixView dout,
                            ConstMatrixView in, ConstMatrixView weight, Gemm2dWorkspace& ws) {
  gemm2d_linear_backward(mesh, plan, host_view(din), host_view(dweight), host_view(dout),
                         host_view(in), host_view(weight), ws);
}

}  // namespace meshtp::parallel
