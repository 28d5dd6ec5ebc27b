#include "plan/emit.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <memory>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/text.hpp"
#include "plan/context_parallel.hpp"
#include "plan/moe.hpp"

namespace meshtp::plan {
// The helpers in a namespace of their own: the unity build compiles this file with others.
namespace emit_detail {
namespace {

using layout::Plan;
using layout::Schedule;

// What a framework lacks to run a layout; kNone: it runs it.
enum class Gap {
  kNone,
  kGemm2d,               // every linear a 2D GeMM algorithm
  kMesh2d,               // ATP on a d1×d2 mesh, both > 1
  kMeshColumn,           // ATP on a 1×N mesh: not Megatron's N×1
  kChunks,               // meshtp's chunked overlap of the TP collectives
  kGpipe,                // pp > 1 and m > 1 under GPipe
  kNoSequenceParallel,   // torchtitan: its TP always shards the sequence
  kShardBesidePipeline,  // torchtitan: FSDP under a pipeline keeps ZeRO-1's memory
  kAccumulation,         // torchtitan: gradients synchronised every accumulation step
  kSelective,            // torchtitan: no attention-core recomputation
  kSequenceParallel,     // DeepSpeed AutoTP: no sequence parallelism
  kTensorAndPipeline,    // DeepSpeed: AutoTP not under the pipeline engine
  kZero3Tensor,          // DeepSpeed: AutoTP takes ZeRO 0–2
  kZeroPipeline,         // DeepSpeed: the pipeline engine takes ZeRO 0–1
  kInterleaved,          // DeepSpeed: one stage per pipeline rank
  kFp32WithoutFsdp,      // torchtitan: 2-byte precision with TP or PP but no FSDP runs fp32
  kContextParallel,      // DeepSpeed: no context parallelism in its config
  kCpComm,               // torchtitan: ring or all-gather only (no Ulysses all-to-all)
  kUneven,               // DeepSpeed: uneven stages are PipelineModule code, not config
  kUnevenInterleaved,    // Megatron-LM, torchtitan: each stage's layers divisible by v
  kMoeTensorNoSp,        // Megatron-LM: MoE with tensor parallelism needs sequence parallelism
  kExpertFp16,           // Megatron-LM: expert parallelism does not train in fp16
  kMoeBiasEtp,           // Megatron-LM: MoE linear biases only with etp 1
  kExpertTp,             // torchtitan: etp is 1 or tp
  kExpertReplicate,      // torchtitan: ep inside dp_shard·cp·tp/etp, not across DDP replicas
};

int tp_of(const Plan& p) { return p.mesh[0] * p.mesh[1]; }
bool sequence_parallel(const Plan& p) {
  return p.strategy == Strategy::kTp1d || (p.sequence_parallel && tp_of(p) > 1);
}
// ZeRO over one replica shards nothing.
int zero_of(const Plan& p) { return p.dp > 1 ? p.zero : 0; }
bool gpipe(const Plan& p) {
  return p.pp > 1 && p.microbatches > 1 && p.schedule == Schedule::kGpipe;
}

std::string_view product(Framework f) {
  switch (f) {
    case Framework::kMegatron:
      return "Megatron-LM";
    case Framework::kTorchtitan:
      return "torchtitan";
    case Framework::kDeepSpeed:
      return "DeepSpeed";
  }
  return "?";
}

// A MoE model's (`m`; nullptr: dense) gaps, Megatron-LM core_v0.15.0 and torchtitan v0.2.2.
Gap moe_gap(Framework f, const Plan& p, Precision precision, const ModelSpec* m) {
  if (m == nullptr || !m->is_moe()) return Gap::kNone;
  const int tp = tp_of(p), etp = p.expert_tp();
  if (f == Framework::kMegatron) {
    // megatron/core/transformer/moe/moe_layer.py (MoELayer.forward): training with MoE and
    // tensor parallelism > 1 raises unless sequence parallelism is on.
    if (tp > 1 && !sequence_parallel(p)) return Gap::kMoeTensorNoSp;
    // megatron/training/arguments.py validate_args: "Expert parallelism is not supported with
    // fp16 training."
    if (p.ep > 1 && precision == Precision::kFp16) return Gap::kExpertFp16;
    // megatron/core/transformer/transformer_config.py: "Bias in Moe is only supported when
    // ETP==1".
    if (m->has_biases() && etp > 1) return Gap::kMoeBiasEtp;
  }
  if (f == Framework::kTorchtitan && p.ep > 1) {
    // torchtitan/distributed/parallel_dims.py: "Currently we only support ETP=TP or ETP=1";
    // the experts' mesh is (pp, dp_replicate, efsdp, ep, etp), efsdp = dp_shard·cp·tp/(etp·ep).
    if (etp != 1 && etp != tp) return Gap::kExpertTp;
    const bool ddp = p.dp > 1 && zero_of(p) == 0 && tp == 1 && p.pp == 1;
    const int shard = ddp ? 1 : p.dp;
    if ((shard * p.cp * tp) % (etp * p.ep) != 0) return Gap::kExpertReplicate;
  }
  return Gap::kNone;
}

Gap gap(Framework f, const Plan& p, Precision precision, const ModelSpec* m = nullptr) {
  if (const Gap g = moe_gap(f, p, precision, m); g != Gap::kNone) return g;
  const int tp = tp_of(p);
  if (layout::is_gemm2d(p.strategy)) return Gap::kGemm2d;
  if (p.mesh[0] > 1 && p.mesh[1] > 1) return Gap::kMesh2d;
  if (p.mesh[1] > 1) return Gap::kMeshColumn;
  if (p.chunks > 1 && tp > 1 && p.strategy != Strategy::kTp1d) return Gap::kChunks;
  const int zero = zero_of(p);
  if (f == Framework::kDeepSpeed && p.cp > 1) return Gap::kContextParallel;
  if (f == Framework::kDeepSpeed && p.uneven()) return Gap::kUneven;
  // Uneven stages interleaved: Megatron-LM needs each stage's layers divisible by v
  // (transformer_config.py); torchtitan's less_layers shorten one virtual stage only.
  if (p.uneven() && p.virtual_stages > 1) {
    const int v = p.virtual_stages;
    if (f != Framework::kMegatron || p.first_stage_layers % v != 0 ||
        p.last_stage_layers % v != 0) {
      return Gap::kUnevenInterleaved;
    }
  }
  if (f == Framework::kTorchtitan && p.cp > 1 && p.cp_comm != layout::CpComm::kRing &&
      p.cp_comm != layout::CpComm::kAllGather) {
    return Gap::kCpComm;
  }
  switch (f) {
    case Framework::kMegatron:
      if (gpipe(p)) return Gap::kGpipe;
      return Gap::kNone;
    case Framework::kTorchtitan:
      if (tp > 1 && !sequence_parallel(p)) return Gap::kNoSequenceParallel;
      if (p.pp > 1 && zero >= 2) return Gap::kShardBesidePipeline;
      if (p.pp == 1 && p.dp > 1 && p.microbatches > 1 && zero < 3) return Gap::kAccumulation;
      if (p.recompute == Recompute::kSelective) return Gap::kSelective;
      // torchtitan v0.2.2 (distributed/utils.py, maybe_enable_amp): with tensor or pipeline
      // parallelism, mixed precision is FSDP's alone; without FSDP it warns and runs fp32.
      if (precision != Precision::kFp32 && (tp > 1 || p.pp > 1) && p.dp == 1) {
        return Gap::kFp32WithoutFsdp;
      }
      return Gap::kNone;
    case Framework::kDeepSpeed:
      if (tp > 1 && sequence_parallel(p)) return Gap::kSequenceParallel;
      if (tp > 1 && p.pp > 1) return Gap::kTensorAndPipeline;
      if (tp > 1 && zero == 3) return Gap::kZero3Tensor;
      if (p.pp > 1 && zero >= 2) return Gap::kZeroPipeline;
      if (p.pp > 1 && p.virtual_stages > 1) return Gap::kInterleaved;
      if (gpipe(p)) return Gap::kGpipe;
      return Gap::kNone;
  }
  return Gap::kNone;
}

std::string describe(Gap g, Framework f, const Plan& p) {
  const std::string_view fw = product(f);
  switch (g) {
    case Gap::kNone:
      return "";
    case Gap::kGemm2d:
      return fmt::format(
          "{} runs every linear as a 2D GeMM on the {}x{} mesh: {}'s tensor "
          "parallelism is 1D (a mesh N×1)",
          layout::name(p.strategy), p.mesh[0], p.mesh[1], fw);
    case Gap::kMesh2d:
      return fmt::format(
          "ATP's 2D tensor parallelism on the {}x{} mesh: {}'s tensor parallelism is 1D "
          "(a mesh N×1)",
          p.mesh[0], p.mesh[1], fw);
    case Gap::kMeshColumn:
      return fmt::format(
          "ATP on the 1x{0} mesh (its weights split the other way, with more "
          "traffic): {1}'s 1D tensor parallelism is Megatron's, the mesh {0}x1",
          p.mesh[1], fw);
    case Gap::kChunks:
      return fmt::format(
          "chunks={} (meshtp's chunked overlap of the tensor-parallel "
          "collectives) has no {} setting",
          p.chunks, fw);
    case Gap::kGpipe:
      return fmt::format("the GPipe schedule over {} stages: {}'s pipeline runs 1F1B", p.pp, fw);
    case Gap::kNoSequenceParallel:
      return fmt::format(
          "tensor parallelism {} without sequence parallelism: torchtitan's "
          "always shards the sequence between blocks (tp1d)",
          tp_of(p));
    case Gap::kShardBesidePipeline:
      return fmt::format(
          "ZeRO-{} beside a pipeline: under torchtitan's pipeline schedules "
          "FSDP keeps the parameters and gradients whole until the last "
          "microbatch (ZeRO-1's memory)",
          p.zero);
    case Gap::kAccumulation:
      return fmt::format(
          "ZeRO-{} over {} accumulated microbatches: torchtitan synchronises "
          "every microbatch's gradients (DDP or FSDP), {} times the data-parallel "
          "traffic priced",
          zero_of(p), p.microbatches, p.microbatches);
    case Gap::kSelective:
      return "selective recomputation (the attention core): torchtitan's selective modes "
             "checkpoint every n-th layer or chosen operators instead";
    case Gap::kSequenceParallel:
      return fmt::format(
          "sequence parallelism (tp1d, tensor parallelism {}): DeepSpeed's "
          "AutoTP has none",
          tp_of(p));
    case Gap::kTensorAndPipeline:
      return fmt::format(
          "tensor parallelism {} with {} pipeline stages: DeepSpeed's AutoTP "
          "does not run under its pipeline engine",
          tp_of(p), p.pp);
    case Gap::kZero3Tensor:
      return "ZeRO-3 with tensor parallelism: DeepSpeed's AutoTP takes ZeRO stages 0 to 2";
    case Gap::kZeroPipeline:
      return fmt::format(
          "ZeRO-{} with pipeline parallelism: DeepSpeed's pipeline engine takes "
          "ZeRO stages 0 and 1",
          p.zero);
    case Gap::kInterleaved:
      return fmt::format(
          "{} interleaved virtual stages: DeepSpeed's pipeline engine runs one "
          "stage per rank",
          p.virtual_stages);
    case Gap::kFp32WithoutFsdp:
      return fmt::format(
          "2-byte precision with tensor parallelism {} and {} pipeline stages on one "
          "data-parallel rank: torchtitan applies mixed precision there only through FSDP "
          "(data_parallel_shard_degree > 1) and otherwise trains in fp32, with twice the "
          "memory and time priced",
          tp_of(p), p.pp);
    case Gap::kContextParallel:
      return fmt::format("context parallelism cp={}: DeepSpeed's config has no such degree",
                         p.cp);
    case Gap::kCpComm:
      return fmt::format("cp={} with {}: torchtitan's context parallelism exchanges K and V "
                         "by ring or all-gather only",
                         p.cp, p.cp_comm);
    case Gap::kUnevenInterleaved:
      return fmt::format("uneven stages of {} and {} layers first and last, interleaved over {} "
                         "virtual stages: {} runs them only with every stage's layers "
                         "divisible by the virtual stages{}",
                         p.first_stage_layers, p.last_stage_layers, p.virtual_stages, fw,
                         f == Framework::kTorchtitan ? " and the first and last equal to the "
                                                       "others (its less_layers shorten one "
                                                       "virtual stage)"
                                                     : "");
    case Gap::kMoeTensorNoSp:
      return fmt::format("a mixture of experts with tensor parallelism {} without sequence "
                         "parallelism: Megatron-LM's MoE layer refuses to train so "
                         "(megatron/core/transformer/moe/moe_layer.py)",
                         tp_of(p));
    case Gap::kExpertFp16:
      return fmt::format("expert parallelism ep={} in fp16: Megatron-LM's validate_args refuses "
                         "it (bf16 or fp32 only)",
                         p.ep);
    case Gap::kMoeBiasEtp:
      return fmt::format("expert tensor parallelism etp={} on experts with biases (GeLU): "
                         "Megatron-LM supports MoE biases only with etp 1",
                         p.expert_tp());
    case Gap::kExpertTp:
      return fmt::format("expert tensor parallelism etp={} with tp={}: torchtitan runs etp 1 or "
                         "etp = tp only",
                         p.expert_tp(), tp_of(p));
    case Gap::kExpertReplicate:
      return fmt::format("ep={} × etp={} spanning data-parallel replicas: torchtitan's experts "
                         "split over dp_shard·cp·tp only",
                         p.ep, p.expert_tp());
    case Gap::kUneven:
      return fmt::format("uneven stages ({} and {} layers first and last): DeepSpeed sets the "
                         "stages in PipelineModule code, not its config",
                         p.first_stage_layers, p.last_stage_layers);
  }
  return "";
}

// The sizes every framework's configuration is made of.
struct Sizes {
  std::int64_t devices = 0, tp = 0, dp = 0, pp = 0, m = 0, v = 0, cp = 1;
  std::int64_t global = 0, micro = 0;         // B and b = B/(dp·m), sequences
  std::int64_t layers_per_virtual_stage = 0;  // L/(pp·v)
};

Sizes sizes_of(const Plan& p, const ModelSpec& model) {
  p.validate();
  Sizes s{.devices = p.ranks(),
          .tp = tp_of(p),
          .dp = p.dp,
          .pp = p.pp,
          .m = p.microbatches,
          .v = p.virtual_stages,
          .cp = p.cp,
          .global = model.batch};
  MESHTP_CHECK(model.batch % (s.dp * s.m) == 0,
               "batch={} of '{}' does not split into dp={} × microbatches={}", model.batch,
               model.name, s.dp, s.m);
  MESHTP_CHECK(p.uneven() || model.layers % (s.pp * s.v) == 0,
               "layers={} of '{}' do not split into pp={} × virtual stages={}", model.layers,
               model.name, s.pp, s.v);
  s.micro = model.batch / (s.dp * s.m);
  // Uneven stages: the middle stages' layers (Plan::stage_layers throws naming a bad split).
  s.layers_per_virtual_stage = p.uneven() ? p.stage_layers(static_cast<int>(model.layers), p.pp / 2)
                                          : model.layers / (s.pp * s.v);
  return s;
}

std::string step_text(const Plan& p) {
  return p.provenance && p.provenance->predicted_step_s > 0
             ? fmt::format(", {:.4g} s per step predicted", p.provenance->predicted_step_s)
             : "";
}

// The comment lines every framework's text opens with.
// `p` is r.plan, or r.fallback when f cannot run r.plan.
std::vector<std::string> header(Framework f, const EmitRequest& r, const Plan& p, const Sizes& s) {
  std::vector<std::string> lines;
  if (gap(f, r.plan, r.model.precision, &r.model) != Gap::kNone) {
    lines.push_back(fmt::format(
        "{} cannot run the planner's layout ({}{}): {}; below, the fastest layout it can run",
        product(f), fmt::streamed(r.plan), step_text(r.plan),
        describe(gap(f, r.plan, r.model.precision, &r.model), f, r.plan)));
    for (const std::string& n : r.notes) lines.push_back("that layout: " + escape_text(n));
  }
  lines.push_back(fmt::format("{} configuration ({} spelling) for {} on {} ({} devices): {}{}",
                              product(f), framework_release(f), escape_text(r.model.name),
                              escape_text(r.topology), s.devices,
                              fmt::streamed(p), step_text(p)));
  MESHTP_CHECK(r.runtime.value_or(runtime_of(f)) == runtime_of(f),
               "{} runs a pipeline as --runtime {} prices it, not as --runtime {}", product(f),
               layout::name(runtime_of(f)), layout::name(r.runtime.value_or(runtime_of(f))));
  if (p.pp > 1) {
    lines.push_back(fmt::format(
        "chosen, priced and memory-checked as {} runs it (--runtime {}: every in-flight "
        "microbatch's activations kept, no forward re-run)",
        product(f), layout::name(runtime_of(f))));
  }
  // Megatron-LM and DeepSpeed have no data-parallel argument; torchtitan's is below.
  lines.push_back(fmt::format(
      "data parallel {} = {} devices / (tensor {} × {}pipeline {}){}", s.dp, s.devices, s.tp,
      s.cp > 1 ? fmt::format("context {} × ", s.cp) : "", s.pp,
      f == Framework::kTorchtitan
          ? ""
          : fmt::format(": {} derives it from the world size", product(f))));
  if (gap(f, r.plan, r.model.precision, &r.model) == Gap::kNone) {
    for (const std::string& n : r.notes) lines.push_back(escape_text(n));
  }
  if (r.model.is_moe()) {
    lines.push_back(fmt::format(
        "mixture of experts: {} experts, top-{}, expert parallel {} × expert tensor parallel {} "
        "× expert data parallel {} over each stage's {} ranks (MoE parallel folding)",
        r.model.num_experts, r.model.top_k, p.ep, p.expert_tp(), expert_dp(p),
        s.tp * s.cp * s.dp));
  }
  return lines;
}

// Every interpolated string went through escape_text (core/text.hpp): a comment is one line.
void comment(std::string& out, const std::string& line) {
  MESHTP_CHECK(line.find_first_of("\r\n") == std::string::npos,
               "a comment line holds a line break: {}", escape_text(line));
  out += "# " + line + "\n";
}

// A bash file: `source FILE`, then `torchrun … pretrain_gpt.py "${MEGATRON_ARGS[@]}" …`.
std::string megatron(const EmitRequest& r, const Plan& p, const Sizes& s) {
  std::string out;
  std::vector<std::string> lines = header(Framework::kMegatron, r, p, s);
  const bool fsdp = zero_of(p) >= 2;
  lines.push_back(fmt::format(
      "bash: source this file, then run torchrun --nproc-per-node N … pretrain_gpt.py "
      "\"${{MEGATRON_ARGS[@]}}\" with the data and tokenizer arguments; {}",
      fsdp ? "CUDA_DEVICE_MAX_CONNECTIONS unset, as Megatron-FSDP asks (validate_args refuses "
             "1 with it; docs/source/api-guide/custom_fsdp.md)"
           : "CUDA_DEVICE_MAX_CONNECTIONS=1 is what validate_args asserts for tensor "
             "parallelism > 1"));
  if (fsdp) {
    lines.push_back(fmt::format(
        "ZeRO-{} as Megatron-FSDP (core_v0.15.0 --use-megatron-fsdp): the data-parallel "
        "sharding strategy {}, checkpoints in its fsdp_dtensor format",
        zero_of(p), zero_of(p) == 3 ? "optim_grads_params" : "optim_grads"));
  }
  if (r.model.is_moe() && r.model.precision != Precision::kBf16) {
    lines.push_back(fmt::format("no --moe-grouped-gemm: Megatron-LM's grouped GeMMs run bf16 "
                                "only, this model is {}",
                                name(r.model.precision)));
  }
  for (const std::string& line : lines) comment(out, line);
  out += fsdp ? "unset CUDA_DEVICE_MAX_CONNECTIONS\n" : "export CUDA_DEVICE_MAX_CONNECTIONS=1\n";
  out += "MEGATRON_ARGS=(\n";
  // Every value is a number or a fixed word: nothing a user typed goes outside a comment.
  const auto arg = [&](std::string_view name, auto value) {
    out += fmt::format("  --{} {}\n", name, value);
  };
  const auto flag = [&](std::string_view name) { out += fmt::format("  --{}\n", name); };
  arg("tensor-model-parallel-size", s.tp);
  arg("pipeline-model-parallel-size", s.pp);
  // Uneven stages interleave by the count of virtual stages (Megatron-LM refuses the
  // per-stage layer count with them).
  if (s.v > 1 && !p.uneven()) {
    arg("num-layers-per-virtual-pipeline-stage", s.layers_per_virtual_stage);
  }
  if (s.v > 1 && p.uneven()) arg("num-virtual-stages-per-pipeline-rank", s.v);
  if (p.uneven()) {
    // The middle stages take the rest evenly (megatron/core/transformer/transformer_block.py).
    if (p.first_stage_layers > 0) arg("decoder-first-pipeline-num-layers", p.first_stage_layers);
    if (p.last_stage_layers > 0) arg("decoder-last-pipeline-num-layers", p.last_stage_layers);
  }
  if (p.cp > 1) {
    // Megatron-Core's names: ring attention is "p2p", the hierarchical a2a+ring "a2a+p2p"
    // with the a2a degree u inner and the ring's cp/u outer, all_gather "allgather"
    // (arguments.py's --cp-comm-type: p2p, a2a, allgather or a2a+p2p).
    arg("context-parallel-size", p.cp);
    const int u = cp_a2a_size(p.cp_comm, p.cp, static_cast<int>(r.model.heads / s.tp));
    switch (p.cp_comm) {
      case layout::CpComm::kRing: arg("cp-comm-type", "p2p"); break;
      case layout::CpComm::kA2a: arg("cp-comm-type", "a2a"); break;
      case layout::CpComm::kA2aRing:
        arg("cp-comm-type", "a2a+p2p");
        out += fmt::format("  --hierarchical-context-parallel-sizes {} {}\n", u, p.cp / u);
        break;
      case layout::CpComm::kAllGather: arg("cp-comm-type", "allgather"); break;
    }
  }
  // Megatron-LM turns sequence parallelism off at tensor parallelism 1 (with a warning).
  if (s.tp > 1 && sequence_parallel(p)) flag("sequence-parallel");
  if (p.recompute == Recompute::kSelective) {
    arg("recompute-granularity", "selective");  // the attention core; no method, no layers
  } else if (p.recompute == Recompute::kFull) {
    // Every layer's input kept, the layer re-run: units of one layer, uniformly.
    arg("recompute-granularity", "full");
    arg("recompute-method", "uniform");
    arg("recompute-num-layers", 1);
  }
  // Fused attention: Megatron-Core's flash backend (core_v0.15.0 megatron/training/arguments.py
  // --attention-backend, megatron/core/transformer/enums.py AttnBackend.flash; the legacy
  // model's --use-flash-attn is not used). Unfused leaves Megatron-LM's default (auto).
  if (p.attention == layout::Attention::kFused) arg("attention-backend", "flash");
  if (zero_of(p) >= 1) flag("use-distributed-optimizer");
  if (fsdp) {
    // core_v0.15.0's Megatron-FSDP: custom_fsdp.md's flags, and validate_args' checkpoint
    // format for it.
    flag("use-megatron-fsdp");
    arg("data-parallel-sharding-strategy", zero_of(p) == 3 ? "optim_grads_params" : "optim_grads");
    flag("no-gradient-accumulation-fusion");
    arg("ckpt-format", "fsdp_dtensor");
  }
  arg("micro-batch-size", s.micro);
  arg("global-batch-size", s.global);
  arg("num-layers", r.model.layers);
  arg("hidden-size", r.model.hidden);
  arg("num-attention-heads", r.model.heads);
  if (r.model.ffn() != 4 * r.model.hidden) arg("ffn-hidden-size", r.model.ffn());
  if (r.model.kv() != r.model.heads) {
    flag("group-query-attention");
    arg("num-query-groups", r.model.kv());
  }
  if (r.model.activation == layout::Activation::kSwiglu) flag("swiglu");
  if (!r.model.has_biases()) flag("disable-bias-linear");
  if (r.model.norm == layout::Norm::kRmsNorm) arg("normalization", "RMSNorm");
  if (r.model.position == layout::Position::kRope) arg("position-embedding-type", "rope");
  // --rotary-base is an int (megatron/training/arguments.py, core_v0.15.0; default 10000).
  if (r.model.rope_theta > 0) arg("rotary-base", std::llround(r.model.rope_theta));
  if (!r.model.tie_embeddings) flag("untie-embeddings-and-output-weights");
  arg("seq-length", r.model.seq);
  arg("max-position-embeddings", r.model.seq);
  if (r.model.is_moe()) {
    // megatron/training/arguments.py (core_v0.15.0): --moe-layer-freq N makes layers 0, N,
    // 2N, … MoE; --moe-shared-expert-intermediate-size is the shared experts' total width.
    const ModelSpec& m = r.model;
    arg("num-experts", m.num_experts);
    arg("moe-router-topk", m.top_k);
    arg("moe-ffn-hidden-size", m.expert_ffn());
    arg("expert-model-parallel-size", p.ep);
    arg("expert-tensor-parallel-size", p.expert_tp());
    if (m.moe_every > 1) arg("moe-layer-freq", m.moe_every);
    if (m.shared_experts > 0) {
      arg("moe-shared-expert-intermediate-size", m.shared_ffn());
    }
    // Grouped GeMMs are bf16 only (validate_args).
    if (m.precision == Precision::kBf16) flag("moe-grouped-gemm");
    arg("moe-token-dispatcher-type", "alltoall");
    if (m.router_aux_loss > 0) {
      arg("moe-router-load-balancing-type", "aux_loss");
      arg("moe-aux-loss-coeff", fmt::format("{}", m.router_aux_loss));
    } else {
      arg("moe-router-load-balancing-type", "none");
    }
    if (m.capacity_factor > 0) arg("moe-expert-capacity-factor", fmt::format("{}", m.capacity_factor));
    // A benchmark's routing (ops/moe.hpp's forced balance; Megatron-LM draws random logits).
    if (m.moe_force_balance) flag("moe-router-force-load-balancing");
  }
  if (r.model.precision == Precision::kFp16) flag("fp16");
  if (r.model.precision == Precision::kBf16) flag("bf16");
  out += ")\n";
  return out;
}

std::string torchtitan(const EmitRequest& r, const Plan& p, const Sizes& s) {
  // No attention setting: torchtitan's models run the core on PyTorch's SDPA (its flash or
  // memory-efficient kernels) or FlexAttention, fused either way, whatever p.attention says.
  std::string out;
  std::vector<std::string> lines = header(Framework::kTorchtitan, r, p, s);
  // v0.2.2's run_train.sh: torchrun … -m torchtitan.train --job.config_file FILE.
  lines.push_back(
      fmt::format("launch: torchrun with {} processes in all (--nnodes × --nproc-per-node) "
                  "-m torchtitan.train --job.config_file FILE, as run_train.sh does on one node",
                  s.devices));
  lines.push_back(
      fmt::format("[model] is torchtitan's own: a flavor of {} layers, hidden {}, "
                  "{} heads",
                  r.model.layers, r.model.hidden, r.model.heads));
  if (r.model.precision == Precision::kFp16) {
    lines.push_back("fp16: torchtitan's mixed precision is bfloat16 (the same 2 bytes)");
  }
  if (r.model.is_moe()) {
    lines.push_back(fmt::format("the experts ({} of {} wide, top-{}) are the [model] flavor's "
                                "own: torchtitan's MoE models (e.g. deepseek_v3, qwen3) set them "
                                "in code",
                                r.model.num_experts, r.model.expert_ffn(), r.model.top_k));
  }
  // Data parallelism: DDP (replicate) runs only alone; beside tensor or pipeline parallelism
  // FSDP (shard), resharding after the forward for ZeRO-3 only. `gap` admits only the layouts
  // where that needs no more memory and no more data-parallel traffic than priced.
  const int zero = zero_of(p);
  const bool ddp = s.dp > 1 && zero == 0 && s.tp == 1 && s.pp == 1;
  const bool fsdp = s.dp > 1 && !ddp;
  if (fsdp && zero < 3) {
    lines.push_back(
        fmt::format("ZeRO-{} as FSDP without resharding after the forward: one "
                    "parameter all-gather and one gradient reduce-scatter per step "
                    "(a pipeline schedule syncs after its last microbatch), no "
                    "more bytes or memory than priced",
                    zero));
  }
  for (const std::string& line : lines) comment(out, line);
  // A pipeline splits a data-parallel rank's batch into the microbatches; without one they
  // are gradient accumulation steps, global / (local · dp).
  const std::int64_t local = s.pp > 1 ? s.global / s.dp : s.micro;
  out += "\n[training]\n";
  out += fmt::format("local_batch_size = {}\n", local);
  out += fmt::format("global_batch_size = {}\n", s.global);
  out += fmt::format("seq_len = {}\n", r.model.seq);
  out += fmt::format("mixed_precision_param = \"{}\"\n",
                     r.model.precision == Precision::kFp32 ? "float32" : "bfloat16");
  out += "\n[parallelism]\n";
  out += fmt::format("data_parallel_replicate_degree = {}\n", ddp ? s.dp : 1);
  out += fmt::format("data_parallel_shard_degree = {}\n", fsdp ? s.dp : 1);
  if (fsdp) {
    out += fmt::format("fsdp_reshard_after_forward = \"{}\"\n", zero == 3 ? "always" : "never");
  }
  out += fmt::format("tensor_parallel_degree = {}\n", s.tp);
  out += fmt::format("pipeline_parallel_degree = {}\n", s.pp);
  if (s.pp > 1) {
    const std::string_view schedule = p.schedule == Schedule::kInterleaved ? "Interleaved1F1B"
                                      : p.schedule == Schedule::kGpipe     ? "GPipe"
                                                                           : "1F1B";
    out += fmt::format("pipeline_parallel_schedule = \"{}\"\n", schedule);
    out += fmt::format("pipeline_parallel_microbatch_size = {}\n", s.micro);
    // L/(pp·v) layers per stage, the embedding and the head not counted as layers.
    out += fmt::format("pipeline_parallel_layers_per_stage = {}\n", s.layers_per_virtual_stage);
    // Uneven stages: how many fewer the first and the last hold than the others.
    const auto less = [&](int layers) {
      return layers > 0 ? s.layers_per_virtual_stage - layers : 0;
    };
    out += fmt::format("pipeline_parallel_first_stage_less_layers = {}\n", less(p.first_stage_layers));
    out += fmt::format("pipeline_parallel_last_stage_less_layers = {}\n", less(p.last_stage_layers));
  }
  out += fmt::format("context_parallel_degree = {}\n", p.cp);
  if (p.cp > 1) {
    // How PyTorch's context-parallel attention exchanges K and V: "allgather" (its default)
    // gathers them, "alltoall" passes them around the ring, a step at a time.
    out += fmt::format("context_parallel_rotate_method = \"{}\"\n",
                       p.cp_comm == layout::CpComm::kAllGather ? "allgather" : "alltoall");
  }
  if (r.model.is_moe()) {
    out += fmt::format("expert_parallel_degree = {}\n", p.ep);
    out += fmt::format("expert_tensor_parallel_degree = {}\n", p.ep > 1 ? p.expert_tp() : 1);
  }
  out += "\n[activation_checkpoint]\n";
  out += fmt::format("mode = \"{}\"\n", p.recompute == Recompute::kFull ? "full" : "none");
  return out;
}

std::string deepspeed(const EmitRequest& r, const Plan& p, const Sizes& s) {
  std::vector<std::string> lines = header(Framework::kDeepSpeed, r, p, s);
  // v0.16.4's launcher (launcher/runner.py) and deepspeed.add_config_arguments's flags.
  lines.push_back(fmt::format(
      "launch: deepspeed with {} processes in all (--num_nodes × --num_gpus) YOUR_SCRIPT.py "
      "--deepspeed --deepspeed_config FILE; the script passes its args to deepspeed.initialize",
      s.devices));
  // Without an mpu, deepspeed.initialize counts every rank as data parallel
  // (runtime/config.py, _configure_train_batch_size: world size from the process group).
  const std::int64_t batch_ranks = s.tp > 1 ? s.devices : s.dp;
  if (s.tp > 1) {
    lines.push_back(
        fmt::format("tensor parallelism {0}: AutoTP training (tensor_parallel.autotp_size), "
                    "which v0.16.4 applies to a Hugging Face transformers model only, through "
                    "deepspeed.tp_model_init(model, tp_size={0}, dtype=…) before "
                    "deepspeed.initialize; other models need their own tensor parallelism",
                    s.tp));
    lines.push_back(fmt::format(
        "no mpu is given: deepspeed.initialize then checks train_batch_size against all {0} "
        "ranks, so it is micro {1} × accumulation {2} × world {0} = {3}; the {4} ranks of a "
        "tensor-parallel group read the same sequences, so a step trains {5} distinct ones",
        s.devices, s.micro, s.m, s.micro * s.m * s.devices, s.tp, s.global));
  }
  if (s.pp > 1) {
    lines.push_back(
        fmt::format("pipeline: PipelineModule(..., num_stages={}) in the model "
                    "code (the JSON has no pipeline degree); its 1F1B-like "
                    "TrainSchedule runs the {} microbatches",
                    s.pp, s.m));
  }
  if (p.recompute == Recompute::kFull) {
    lines.push_back(s.pp > 1 ? "full recomputation: PipelineModule(..., "
                               "activation_checkpoint_interval=1)"
                             : "full recomputation: each block's forward through "
                               "deepspeed.checkpointing.checkpoint (model code)");
  } else if (p.recompute == Recompute::kSelective) {
    lines.push_back(
        "selective recomputation: the attention core (softmax(QKᵀ)·V) through "
        "deepspeed.checkpointing.checkpoint (model code)");
  }
  if (r.model.is_moe()) {
    lines.push_back(fmt::format(
        "mixture of experts: deepspeed.moe.layer.MoE(hidden_size={}, num_experts={}, "
        "ep_size={}, k={}) in the model code (the JSON has no expert degree); expert tensor "
        "parallelism {} is not DeepSpeed's",
        r.model.hidden, r.model.num_experts, p.ep, r.model.top_k, p.expert_tp()));
  }
  nlohmann::ordered_json j;
  // DeepSpeed reads only the keys it knows: "_meshtp" carries the layout and the comments.
  j["_meshtp"] = {
      {"comment", lines}, {"dp", s.dp}, {"tp", s.tp}, {"pp", s.pp}, {"microbatches", s.m}};
  if (r.model.is_moe()) {
    j["_meshtp"]["ep"] = p.ep;
    j["_meshtp"]["etp"] = p.expert_tp();
  }
  j["train_batch_size"] = s.micro * s.m * batch_ranks;
  j["train_micro_batch_size_per_gpu"] = s.micro;
  j["gradient_accumulation_steps"] = s.m;
  j["zero_optimization"] = {{"stage", zero_of(p)}};
  if (r.model.precision == Precision::kFp16) j["fp16"] = {{"enabled", true}};
  if (r.model.precision == Precision::kBf16) j["bf16"] = {{"enabled", true}};
  if (s.tp > 1) j["tensor_parallel"] = {{"autotp_size", s.tp}};
  return j.dump(2) + "\n";
}

}  // namespace
}  // namespace emit_detail

std::string_view framework_release(Framework f) {
  switch (f) {
    case Framework::kMegatron:
      return "Megatron-LM core_v0.15.0";
    case Framework::kTorchtitan:
      return "torchtitan v0.2.2";
    case Framework::kDeepSpeed:
      return "DeepSpeed v0.16.4";
  }
  return "?";
}

std::optional<std::string> inexpressible(Framework f, const layout::Plan& plan,
                                         Precision precision) {
  using namespace emit_detail;
  const Gap g = gap(f, plan, precision);
  if (g == Gap::kNone) return std::nullopt;
  return describe(g, f, plan);
}

std::optional<std::string> inexpressible(Framework f, const layout::Plan& plan,
                                         const ModelSpec& model) {
  using namespace emit_detail;
  const Gap g = gap(f, plan, model.precision, &model);
  if (g == Gap::kNone) return std::nullopt;
  return describe(g, f, plan);
}

std::optional<layout::Plan> best_expressible(Framework f, LayoutRequest request) {
  using namespace emit_detail;
  request.strategies = {Strategy::kAtp, Strategy::kTp1d};
  request.chunks = {1};
  request.runtime = runtime_of(f);
  const Precision precision = request.model.precision;
  const auto model = std::make_shared<const ModelSpec>(request.model);
  request.accepts = [f, precision, model](const layout::Plan& p) {
    return gap(f, p, precision, model.get()) == Gap::kNone;
  };
  const LayoutSearch search = search_layouts(request, 1);
  if (search.ranked.empty() || !search.ranked.front().feasible) return std::nullopt;
  layout::Plan p = search.ranked.front().plan;
  p.provenance = layout::Provenance{.predicted_step_s = search.ranked.front().t_step_s};
  return p;
}

layout::Plan layout_of(const Candidate& c, const ModelSpec& model) {
  layout::Plan p = to_plan(c);
  p.recompute = model.recompute;
  p.attention = model.attention;
  return p;
}

std::optional<layout::Plan> best_expressible(Framework f, PlanRequest request) {
  using namespace emit_detail;
  request.strategies = {Strategy::kAtp, Strategy::kTp1d};
  request.chunks = {1};
  // The ranked table's first feasible row f runs, under recomputation `recompute`.
  const auto best_with = [&](Recompute recompute) -> std::optional<layout::Plan> {
    request.model.recompute = recompute;
    for (const Candidate& c : plan(request).candidates) {
      if (!c.feasible) continue;
      layout::Plan p = layout_of(c, request.model);
      if (gap(f, p, request.model.precision, &request.model) == Gap::kNone) return p;
    }
    return std::nullopt;
  };
  const Recompute own = request.model.recompute;
  if (std::optional<layout::Plan> p = best_with(own)) return p;
  std::optional<layout::Plan> best;
  for (const Recompute recompute : layout::all<Recompute>()) {
    if (recompute == own) continue;
    std::optional<layout::Plan> p = best_with(recompute);
    if (p && (!best || p->provenance->predicted_step_s < best->provenance->predicted_step_s)) {
      best = std::move(p);
    }
  }
  return best;
}

std::string emit(Framework f, const EmitRequest& r) {
  using namespace emit_detail;
  const Gap g = gap(f, r.plan, r.model.precision, &r.model);
  // torchtitan's mixed precision needs FSDP beside TP or PP: on the devices of one replica
  // (every 2D layout) no 2-byte layout runs as priced.
  const bool fp32_only = f == Framework::kTorchtitan && r.model.precision != Precision::kFp32 &&
                         r.plan.dp == 1;
  MESHTP_CHECK(g == Gap::kNone || r.fallback.has_value(),
               "{} cannot run the layout {}: {}; and no layout it can run fits{}", product(f),
               fmt::streamed(r.plan), describe(g, f, r.plan),
               fp32_only ? " (on one data-parallel rank torchtitan applies mixed precision only "
                           "through FSDP, so tensor or pipeline parallelism would train this "
                           "2-byte model in fp32)"
                         : "");
  const Plan& p = g == Gap::kNone ? r.plan : *r.fallback;
  const Gap fallback_gap = gap(f, p, r.model.precision, &r.model);
  MESHTP_CHECK(fallback_gap == Gap::kNone, "{} cannot run the fallback layout {} either: {}",
               product(f), fmt::streamed(p), describe(fallback_gap, f, p));
  const Sizes s = sizes_of(p, r.model);
  switch (f) {
    case Framework::kMegatron:
      return megatron(r, p, s);
    case Framework::kTorchtitan:
      return torchtitan(r, p, s);
    case Framework::kDeepSpeed:
      return deepspeed(r, p, s);
  }
  fail("unknown framework {}", static_cast<int>(f));
}

}  // namespace meshtp::plan
