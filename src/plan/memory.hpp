// Per-rank memory of a layout (dp, pp, d1, d2, strategy, zero, recompute, microbatches): the
// tensors the runtime allocates (model/block, model/stack, model/gpt, train/pipeline_model,
// train/zero), counted element for element, so that `train` can print it beside the measured
// high-water mark (tensor/memory.hpp) and the planner prices what would actually run.
//
// Activations of one layer (Korthikanti et al., "Reducing Activation Recomputation in Large
// Transformer Models", §4.1 Eq. 1), s·b·h written sbh, a heads, bytes in fp16:
//   sbh·(34 + 5·a·s/h):  LayerNorm inputs 4, QKV input 2, Q and K 4, V 2, softmax output
//   2as²b, attention dropout mask as²b and output 2as²b, projection input 2, its dropout mask
//   1, MLP input 2, GeLU input 8, FC2 input 8, its dropout mask 1.
// meshtp has no dropout, so one block keeps that minus the three dropout tensors
// (2·sbh + 3·as²b bytes): 32·sbh + 2·as²b bytes = 16·sbh + a·s²·b elements — per rank, with
// n = s·b tokens, N = d1·d2 ranks (sizes in elements):
//
//   kept by the block              ATP (d1, d2)     Megatron-SP (t, 1)   2D GeMM (d1, d2)
//   layer input (the stack's)      nh/d2            nh/t                 nh/N
//   LN1 out, LN2 in, LN2 out       3·nh/d2          3·nh/t + 2·nh ¹      3·nh/N
//   q|k|v                          3·nh/N           3·nh/t               3·nh/N
//   projection input (gathered)    nh/d1            nh/t                 nh/N
//   FC1 out (GeLU in), GeLU out    8·nh/d1          8·nh/t               8·nh/N
//   LayerNorm mean, 1/σ (×2)       4n               4n/t                 4n/d1
//   attention probabilities        a·s²·b/N         a·s²·b/t             a·s²·b/N
//   ¹ the runtime keeps both LayerNorm outputs all-gathered over the tokens (the paper
//     re-gathers them in backward instead): 2·nh that do not shrink with t.
// ATP (t, 1) gives Korthikanti §4.2.1 Eq. 2, sbh·(10 + 24/t + 5as/(ht)), less dropout:
// sbh·(8 + 24/t) + 2·as²b/t bytes; Megatron-SP gives §4.2.2's sbh/t·(34 + 5as/h) less dropout
// plus the gathered LayerNorm outputs: sbh·(32/t + 4) + 2·as²b/t (Table 2 lists all forms).
//
//   selective recomputation (§5)  drops the probabilities of every layer; one set lives in the
//                                 workspace and is recomputed from q|k|v before the core's
//                                 backward
//   full recomputation            keeps the layer inputs of all layers and the kept set of
//                                 one block (the stack holds a single block and re-runs each
//                                 layer's forward right before its backward)
//
// Besides the kept set, a rank holds one block's backward workspace (about as much again),
// two gradient streams, the head (logits n·V/T, the gathered final LayerNorm and, for a
// moment, the buffers of gathering it: stream_gather_floats in memory.cpp), pipeline
// messages and the stage inputs of microbatches in flight (a stage keeps the activations of
// one microbatch and re-runs the forward of the others from their saved input), and
// parameters, gradient accumulators (whole; ZeRO ≥ 2: 1/dp, a block's whole only during its
// backward), AdamW moments and the ZeRO buckets (train/zero.hpp). Not counted: buffers that
// are not tensors (MPI's, index vectors) and the 2D GeMM algorithms' panel buffers (the
// planner adds those as its workspace).
#pragma once

#include <iosfwd>
#include <nlohmann/json.hpp>
#include <span>
#include <vector>

#include "layout/plan.hpp"
#include "plan/model_spec.hpp"

namespace meshtp::plan {

struct MemoryEstimate {
  double params_bytes = 0;
  double grads_bytes = 0;
  double optimizer_bytes = 0;    // AdamW moments, fp32 master/value parts (ZeRO)
  double activations_bytes = 0;  // what the forward keeps for the backward (table above)
  double workspace_bytes = 0;    // buffers: backward workspace, messages, gradient buckets

  double total_bytes() const {
    return params_bytes + grads_bytes + optimizer_bytes + activations_bytes + workspace_bytes;
  }
  double total_gib() const;
};

std::ostream& operator<<(std::ostream& os, const MemoryEstimate& m);
// {"params_gib", "grads_gib", "optimizer_gib", "activations_gib", "buffers_gib"}: the parts
// (the planner's JSON, 2D and --3d alike).
nlohmann::json to_json(const MemoryEstimate& m);

// One block on microbatches of model.batch sequences, tensor-parallel as p (mesh, strategy,
// sequence_parallel), in elements per rank (the table above).
struct BlockFloats {
  double kept = 0;       // every kept row but the probabilities and the layer input
  double scores = 0;     // the attention probabilities
  double input = 0;      // the layer input (a slice of the residual stream)
  double workspace = 0;  // forward temporaries and backward buffers, one set per stack
};
BlockFloats block_floats(const ModelSpec& model, const layout::Plan& p);

// This runtime's blocks under a 2-byte precision (model/block.hpp, Block::operands_): the
// elements of one layer's saved GeMM inputs and FC1 output, which it stores in that precision
// (every other buffer is fp32; the norms, FC1 and the activation write through backward
// buffers the forward leaves free). ATP: ln1's and ln2's outputs [n, h/d2], FC1's output
// [n, m/d1] (m: 4h, or SwiGLU's 2f) and the activation [n, f/d1], q | k | v [n, q·h/N] and
// the attention output gathered [n, h/d1] (the fused core's own [n, h/N] too, for d2 > 1);
// sequence parallelism on t ranks: the norms' outputs on n/t rows and, for t > 1, gathered
// [n, h], the rest as ATP's; a MoE layer its ln2 output, its shared experts' MLP in place of
// the dense one (FC1's output and the activation [n, S/t] each, S = shared_ffn, and ln2's
// gathered output only where S > 0), and its routed experts' gathered rows and activation
// (plan/moe.hpp MoeFloats::operands, rank_memory adds them); the 2D-GeMM blocks the norms'
// outputs, q | k | v, the attention output, FC1's output and the activation, each
// [n/d1, ·/d2].
//   `workspace`: the fp32 elements each stack's workspace adds, the running block's q | k | v
//   and attention output, what RoPE and the attention core read and write;
//   `workspace_operands`: its elements then stored in that precision too, the attention
//   output before the all-gather [n, h/N] (d2 > 1).
struct StoredOperands {
  double kept = 0;
  double workspace = 0;
  double workspace_operands = 0;
};
StoredOperands stored_operands(const ModelSpec& model, const layout::Plan& p);

// Bytes one layer keeps between its forward and backward without recomputation (kept +
// scores + input, in model.element_bytes()), microbatches of model.batch sequences. Under
// `runtime` megatron also its dropout where the model drops out (megatron_drops_out: two
// masks, the attention dropout's mask and output)
// and, with sequence parallelism, less the two re-gathered LayerNorm outputs: Korthikanti
// §4.2 Eq. 2 (tensor parallel) and §4.2.2 (sequence parallel) exactly, plus the LayerNorm
// statistics (4 per token) the paper leaves out.
double layer_activation_bytes(const ModelSpec& model, const layout::Plan& p,
                              layout::Runtime runtime = layout::Runtime::kMeshtp);

// The runtime's embedding and head hold the residual stream of a microbatch whole on every
// tensor-parallel rank (the embedding's output, the gathered final LayerNorm and its
// gradient, [n, h] each: model/gpt.cpp). kRuntime counts them so; kSharded prices them split
// over the TP ranks as Megatron-LM's sequence-parallel head would: the planner uses it, so
// that a large model's plan is not decided by three unsharded [n, h] buffers of this runtime.
enum class HeadBuffers { kRuntime, kSharded };

// How many pipeline message buffers and saved stage inputs (one stream slice each) one
// pipeline rank holds at once, at most, and during a backward op: a replay of p's schedule
// (memory.cpp says what is allocated when). Per pipeline rank; empty without a pipeline.
// The same for every layout with p's (schedule, pp, microbatches, virtual stages): the
// search computes it once for all of them. The same replay counts, for Megatron-LM's
// runtime, the most (microbatch, chunk) forwards not yet backwarded: each keeps its
// activations.
struct PipelineBuffers {
  int peak = 0, backward_peak = 0;
  int in_flight = 0;  // forwarded, not yet backwarded (microbatch, chunk) pairs, at most
};
std::vector<PipelineBuffers> pipeline_buffers(const layout::Plan& p);

// Pipeline rank `pipeline_rank` of layout p (any of its TP and DP ranks: they hold the same),
// for a step of model.batch sequences (split over p.dp replicas and p.microbatches), with
// p.recompute. Throws if p does not divide the model (layers by pp·v, batch by dp·m).
//
// `runtime` (layout/vocabulary.hpp) differs only with a pipeline (pp > 1 or v > 1):
//   meshtp    a chunk keeps the activations of one microbatch (the one in its backward) and
//             the saved stage input of every other in flight, whose forward it re-runs; plus
//             the discarded output of that re-run forward (the stream slice `input`)
//   megatron  every (microbatch, chunk) forwarded and not yet backwarded keeps what its
//             recomputation keeps (none: every layer's kept set, probabilities and input;
//             selective: the same less the probabilities; full: the layer inputs only), at
//             most in_flight of them (1F1B: p − r on rank r, Narayanan et al. 2021 §2.2);
//             full recomputation adds one block's kept set while a layer is re-run; one
//             set of a layer's backward buffers per rank (two gradient streams, the
//             workspace), where this runtime's stacks own one each; its
//             blocking point-to-point ops hold 4 stream slices (an activation and a
//             gradient, received and sent), not a buffer per posted receive
//   megatron  with sequence parallelism on t > 1 ranks, every layer keeps 2·nh fewer: the
//             two LayerNorm outputs are re-gathered in the backward (Korthikanti §4.2.2),
//             not kept gathered (the table's ¹)
//   megatron  drops out on GPT-family layers (Korthikanti §4.1; none on the Llama family's:
//             megatron_drops_out, model_spec.hpp): every layer keeps the masks of the projection's
//             and FC2's dropouts (one byte per element of a stream slice) unless fully
//             recomputed, and the attention dropout's mask (one byte) and output (one
//             element) per probability where it keeps the probabilities; selective
//             recomputation holds one set of them in the workspace, full recomputation the
//             re-run block's
// Without a pipeline and sequence parallelism the two differ only by dropout.
//
// Context parallelism (p.cp > 1): `model` is what one cp rank runs — seq the s/cp tokens of
// each sequence it holds (cp_rank_model; the search prices its candidates so) — except the
// learned position table, whole (s rows). meshtp's runtime adds, for the one attention core
// running at a time, the context-parallel layer's transient buffers (cp_layer_floats).
MemoryEstimate rank_memory(const ModelSpec& model, const layout::Plan& p, int pipeline_rank,
                           HeadBuffers head = HeadBuffers::kRuntime,
                           layout::Runtime runtime = layout::Runtime::kMeshtp);
// The largest over the pipeline ranks (by total).
MemoryEstimate peak_rank_memory(const ModelSpec& model, const layout::Plan& p,
                                HeadBuffers head = HeadBuffers::kRuntime,
                                layout::Runtime runtime = layout::Runtime::kMeshtp);
// Both with `pipeline` = pipeline_buffers(p) already at hand.
MemoryEstimate rank_memory(const ModelSpec& model, const layout::Plan& p, int pipeline_rank,
                           HeadBuffers head, std::span<const PipelineBuffers> pipeline,
                           layout::Runtime runtime = layout::Runtime::kMeshtp);
MemoryEstimate peak_rank_memory(const ModelSpec& model, const layout::Plan& p, HeadBuffers head,
                                std::span<const PipelineBuffers> pipeline,
                                layout::Runtime runtime = layout::Runtime::kMeshtp);

// The model one rank of a context-parallel layout runs: seq/cp tokens of every sequence
// (unchanged when p.cp is 1).
ModelSpec cp_rank_model(ModelSpec model, const layout::Plan& p);
// meshtp's context-parallel attention core (parallel/context_parallel.cpp): the most floats of
// its transient tensors at once for one batch chunk of microbatch `mb` (mb.seq: a cp rank's
// s/cp) — the travelling key/value blocks and their gradient accumulators of the ring, and
// the all-to-all's exchanged q | k | v (| out | dout) and gradients. 0 when p.cp is 1.
double cp_layer_floats(const ModelSpec& mb, const layout::Plan& p);

}  // namespace meshtp::plan
