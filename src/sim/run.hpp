// What the simulated meshtp runs for `meshtp simulate` (docs/simulation.md): the runtime's own
// schedule — the same block stacks, 2D GeMMs and collectives `meshtp train` / `bench` run —
// measured in simulated time. Collective over the world of simulated devices.
//
//   what         runs (once: simulated time is deterministic, so one run is the measurement)
//   layer        forward + backward of the block stack (the caller sets model.layers = 1)
//   step         a training step of the L-layer block stack: forward, backward, the global
//                gradient norm (an all-reduce), clipping and the AdamW update. The byte-level
//                runtime's embedding and LM head are left out: the planner prices the layers.
//   pipeline     a training step of the whole (dp, pp, d1, d2) layout as `train` runs it
//                (train/pipeline_model.hpp): embedding, blocks, head and loss of every
//                microbatch through the plan's pipeline schedule, the boundary activations
//                and gradients point to point, the data-parallel gradient reduction, then the
//                global gradient norm and AdamW. The model's real vocabulary (its head).
//                fold_layers: core/simulation.hpp's layer folding
//   gemm2d       one 2D GeMM C = A·B (m, n, k, dataflow) with the layout's mlp1 algorithm
//                and slices
//   collectives  all_reduce, all_gather, reduce_scatter and broadcast of each size on each
//                mesh dim of size > 1, every group of the dim at once
//
// The layout is a layout::Plan (model.layout), the same the runtime's `--plan` runs; the
// block stack comes from model::make_stack, like `train` and `bench layer`.
//
// Measured per run, as the max over devices: the time of each phase, the time blocked in
// communication (comm_ledger: blocking collectives + Request::wait = the exposed
// communication), the charged compute, and per collective the calls and the time from start
// to completion (trace spans; a non-blocking one counts until the device sees it complete).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "layout/vocabulary.hpp"
#include "model/gpt.hpp"

namespace meshtp::sim {

enum class What { kLayer, kStep, kGemm2d, kCollectives, kPipeline };
const char* name(What what);
What parse_what(const std::string& text);  // throws naming the text and the valid names

struct RunSpec {
  What what = What::kLayer;
  // Shape and layout (vocab unused; model.layout.mesh is the simulated mesh).
  model::GptConfig model{};
  // gemm2d: C is m × n, contraction k.
  std::int64_t m = 0, n = 0, k = 0;
  layout::Dataflow dataflow = layout::Dataflow::kOS;
  // collectives: message sizes in bytes (the user buffer, as `bench collectives`).
  std::vector<double> sizes{};
  std::string trace{};  // a Chrome trace of the run (train/chrome_trace.hpp) goes here
  // The model's precision: 2 (fp16, bf16) or 4 (fp32) bytes per element on the wire and in
  // elementwise traffic (charged mode: core/simulation.hpp element_bytes). The runtime computes
  // in fp32 whatever this says; values mode moves fp32.
  int element_bytes = 4;
  // pipeline: each block stack runs its first block and charges the others its time
  // (core/simulation.hpp fold_layers; charged mode only).
  bool fold_layers = false;

  const std::array<int, 2>& mesh() const { return model.layout.mesh; }
  int ranks() const;  // the devices the spec runs on: pipeline dp·pp·d1·d2, else d1·d2
};
nlohmann::json to_json(const RunSpec& spec);
RunSpec run_spec_from_json(const nlohmann::json& j);  // throws naming a missing/bad field

struct CollectiveTime {
  layout::CollectiveKind kind = layout::CollectiveKind::kNone;
  int dim = -1;      // mesh dim (collectives mode), −1 when summed over dims
  double bytes = 0;  // message size (collectives mode)
  int calls = 0;     // blocking + non-blocking
  double seconds = 0;
};

struct RunResult {
  std::string what;
  double total_s = 0;  // the run: step, layer, gemm2d (0 for collectives)
  double forward_s = 0, backward_s = 0, optimizer_s = 0;
  double schedule_s = 0;      // pipeline: every microbatch forward and backward, the dp reduction
  double exposed_comm_s = 0;  // blocked on communication
  double compute_s = 0;       // charged compute (GeMM + elementwise)
  std::vector<CollectiveTime> collectives;
  std::string mode;  // charged | values (core/simulation.hpp)
};
nlohmann::json to_json(const RunResult& result);
RunResult run_result_from_json(const nlohmann::json& j);

// Throws meshtp::Error naming the problem unless the runtime can run `spec` on its mesh (the
// model shards, the algorithm applies). Pure: no communication.
void validate(const RunSpec& spec);

// Runs `spec` on the world (its mesh must have the world's size). Throws meshtp::Error naming
// the problem before any communication; every rank reaches the same verdict.
RunResult run(const comm::Communicator& world, const RunSpec& spec);

}  // namespace meshtp::sim
