// Layer benchmark: one step (forward + backward) of a GPT block stack on a mesh, the numbers
// ATP's evaluation reports per layout (ATP §5, Figs. 10–11). The stack is model::make_stack's for the
// config's layout: ATP blocks, or every linear a 2D GeMM.
//
// Method: validate first (a small stack with the same mesh and layout is compared with the
// serial reference — y, dx and every gradient within 1e-3 relative, or
// the benchmark throws; then the real stack runs once and every output must be finite), warm
// up, then time steps between barriers. Per step, each rank measures forward, backward, the
// whole step, and its time waiting on communication (comm_ledger: blocking collectives and
// Request::wait); a sample is the max over ranks, a case reports medians over steps.
//
//   FLOPs per step = L · (72·b·s·h² + 12·b·s²·h)        (ATP §5, Table 2; forward + backward)
//   TFLOP/s per rank = FLOPs / step time / ranks
//   ratio to BLAS    = TFLOP/s per rank / one rank's BLAS rate on the block's linear shapes,
//                      timed between the steps of the same run (bench/blas_reference.hpp)
#pragma once

#include <cstdint>
#include <vector>

#include "mesh/device_mesh.hpp"
#include "model/gpt.hpp"

namespace meshtp::bench {

struct LayerBenchOptions {
  model::GptConfig config;      // shape and layout (vocab unused; layout.mesh = the mesh's shape)
  double target_seconds = 2.0;  // timed steps chosen to take about this long
  int min_iterations = 3;
  int max_iterations = 50;
  bool check = true;  // compare a small stack with the serial reference first
  bool trace = false;  // record one extra step's spans (core/trace.hpp) after the timed ones
};

struct LayerBenchSample {
  std::vector<int> mesh;
  int iterations = 0;
  double forward_s = 0.0, backward_s = 0.0, step_s = 0.0;  // medians of the max over ranks
  double comm_wait_s = 0.0;                                // per step, max over ranks
  double flops = 0.0;                                      // per step, whole model
  double tflops_per_rank = 0.0;
  // One rank's BLAS on the block's linear shapes (bench/blas_reference.hpp), one pass timed
  // after every step on every rank at once: median of the max over ranks.
  double blas_gflops = 0.0;
  double ratio_to_blas = 0.0;  // tflops_per_rank·1000 / blas_gflops
  double check_error = -1.0;  // max relative error of the small check; -1: not run
  double trace_origin_s = 0.0;  // with trace: now_seconds() right after the step's barrier
};

// The small stack the check compares with the serial reference on a d1 x d2 mesh: the same
// layout with each linear's slices capped at 8; T = d1·d2 heads of 8·S features (S the lcm of
// the capped slice counts, so each divides it), b = chunks·d1 sequences of 8·T·S tokens.
model::GptConfig check_config(const model::GptConfig& real, int d1, int d2);

// Collective over the mesh; throws meshtp::Error if the config does not fit the mesh or the
// validation fails.
LayerBenchSample run_layer_bench(const mesh::DeviceMesh& mesh, const LayerBenchOptions& options);

}  // namespace meshtp::bench
