// The one vocabulary of layouts, shared by the planner (plan/), the runtime (mesh/, parallel/,
// model/), the benchmarks and calibration. One enum per concept, one name table per enum:
//
//   Algorithm       the five 2D GeMMs (MeshSlice §2.3): cannon summa collective wang meshslice
//   Dataflow        which matrix of C = op(A)·op(B) stays: os (C = A·B, C stays),
//                   ls (C = A·Bᵀ, A stays), rs (C = Aᵀ·B, B stays)
//   Stationary      which operand of a linear Y = X·W stays in all three GeMMs of training:
//                   input (X), output (Y), weight (W). "auto" is std::nullopt.
//   CollectiveKind  none all_reduce all_gather reduce_scatter broadcast reduce all_to_all
//                   send_recv
//   Strategy        atp megatron tp1d, and one per 2D GeMM algorithm
//   Linear          the four linears of a transformer layer: qkv proj mlp1 mlp2
//   Recompute       none selective full (activation recomputation)
//   Attention       unfused fused (the attention core: probabilities kept, or flash-style)
//   Schedule        gpipe 1f1b interleaved (pipeline schedules)
//   Runtime         meshtp megatron: the program a layout is priced as running on
//                   (plan/layout_search.hpp: meshtp re-runs a pipeline stage's forward,
//                   Megatron-LM keeps the in-flight activations)
//   Activation      gelu swiglu (the MLP's; layout/model_shape.hpp)
//   Norm            layernorm rmsnorm
//   Position        learned rope (positional embedding table, or rotary)
//   CpComm          ring a2a a2a+ring all_gather (context parallelism's exchange,
//                   plan/context_parallel.hpp)
//
// name(e) gives the text, parse<E>(text) (or parse_algorithm(text), …) the value — an unknown
// text throws meshtp::Error listing the valid names; `os << e` and fmt's "{}" print name(e).
#pragma once

#include <fmt/format.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <span>
#include <string_view>

namespace meshtp::layout {

enum class Algorithm { kCannon, kSumma, kCollective, kWang, kMeshSlice };
enum class Dataflow { kOS, kLS, kRS };
enum class Stationary { kInput, kOutput, kWeight };
enum class CollectiveKind {
  kNone,
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kBroadcast,
  kReduce,
  kAllToAll,
  kSendRecv
};
enum class Strategy { kAtp, kMegatron, kTp1d, kMeshSlice, kCollective, kWang, kSumma, kCannon };
enum class Linear { kQkv, kProj, kMlp1, kMlp2 };
enum class Recompute { kNone, kSelective, kFull };
enum class Attention { kUnfused, kFused };
enum class Schedule { kGpipe, k1F1B, kInterleaved };
// What runs the step (the planner prices a layout as it runs): meshtp's runtime; Megatron-LM
// as Korthikanti et al. 2023 ran it (megatron); Megatron-DeepSpeed on DeepSpeed v0.16.4's
// PipelineEngine (deepspeed); Megatron-LM as Narayanan et al. 2021 ran it (megatron-2021: no
// sequence parallelism, no selective recomputation). docs/pipeline.md "The runtime".
enum class Runtime { kMeshtp, kMegatron, kDeepSpeed, kMegatron2021 };
enum class Activation { kGelu, kSwiglu };
enum class Norm { kLayerNorm, kRmsNorm };
enum class Position { kLearned, kRope };
enum class CpComm { kRing, kA2a, kA2aRing, kAllGather };

// Names<E>: what the enum is called in messages, and its names in enum order.
template <typename E>
struct Names;
#define MESHTP_LAYOUT_NAMES(E, WHAT, ...)                                         \
  template <>                                                                     \
  struct Names<E> {                                                               \
    static constexpr std::string_view what = WHAT;                                \
    static constexpr auto names = std::to_array<std::string_view>({__VA_ARGS__}); \
  }
MESHTP_LAYOUT_NAMES(Algorithm, "2D GeMM algorithm", "cannon", "summa", "collective", "wang",
                    "meshslice");
MESHTP_LAYOUT_NAMES(Dataflow, "dataflow", "os", "ls", "rs");
MESHTP_LAYOUT_NAMES(Stationary, "stationary operand", "input", "output", "weight");
MESHTP_LAYOUT_NAMES(CollectiveKind, "collective", "none", "all_reduce", "all_gather",
                    "reduce_scatter", "broadcast", "reduce", "all_to_all", "send_recv");
MESHTP_LAYOUT_NAMES(Strategy, "strategy", "atp", "megatron", "tp1d", "meshslice", "collective",
                    "wang", "summa", "cannon");
MESHTP_LAYOUT_NAMES(Linear, "linear", "qkv", "proj", "mlp1", "mlp2");
MESHTP_LAYOUT_NAMES(Recompute, "recompute", "none", "selective", "full");
MESHTP_LAYOUT_NAMES(Attention, "attention", "unfused", "fused");
MESHTP_LAYOUT_NAMES(Schedule, "schedule", "gpipe", "1f1b", "interleaved");
MESHTP_LAYOUT_NAMES(Runtime, "runtime", "meshtp", "megatron", "deepspeed", "megatron-2021");
MESHTP_LAYOUT_NAMES(Activation, "activation", "gelu", "swiglu");
MESHTP_LAYOUT_NAMES(Norm, "norm", "layernorm", "rmsnorm");
MESHTP_LAYOUT_NAMES(Position, "position", "learned", "rope");
MESHTP_LAYOUT_NAMES(CpComm, "cp communication", "ring", "a2a", "a2a+ring", "all_gather");
#undef MESHTP_LAYOUT_NAMES

template <typename E>
concept Named = requires {
  Names<E>::names;
};

// Every value of E, in enum order.
template <Named E>
constexpr auto all() {
  std::array<E, Names<E>::names.size()> out{};
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<E>(i);
  return out;
}

template <Named E>
constexpr std::string_view name(E e) {
  const auto i = static_cast<std::size_t>(e);
  return i < Names<E>::names.size() ? Names<E>::names[i] : std::string_view("?");
}

// "unknown strategy 'x' (valid: atp, megatron, …)"
[[noreturn]] void fail_unknown(std::string_view what, std::string_view text,
                               std::span<const std::string_view> names);

template <Named E>
E parse(std::string_view text) {
  const auto& names = Names<E>::names;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i] == text) return static_cast<E>(i);
  }
  fail_unknown(Names<E>::what, text, names);
}
inline Algorithm parse_algorithm(std::string_view t) { return parse<Algorithm>(t); }
inline Dataflow parse_dataflow(std::string_view t) { return parse<Dataflow>(t); }
inline Stationary parse_stationary(std::string_view t) { return parse<Stationary>(t); }
inline CollectiveKind parse_collective(std::string_view t) { return parse<CollectiveKind>(t); }
inline Strategy parse_strategy(std::string_view t) { return parse<Strategy>(t); }
inline Linear parse_linear(std::string_view t) { return parse<Linear>(t); }
inline Recompute parse_recompute(std::string_view t) { return parse<Recompute>(t); }
inline Schedule parse_schedule(std::string_view t) { return parse<Schedule>(t); }
// "megatron:2021" is megatron-2021's other spelling.
inline Runtime parse_runtime(std::string_view t) {
  return t == "megatron:2021" ? Runtime::kMegatron2021 : parse<Runtime>(t);
}
// Whether `r` runs Megatron-LM's layers and pipeline: its dropout, its rank order, its
// scatter/gather of the boundary activation, every in-flight microbatch's activations kept
// (no stage forward re-run) and the data-parallel reduction after the flush. Megatron-
// DeepSpeed runs Megatron-LM's layers (its ParallelTransformerLayer) under DeepSpeed's
// PipelineEngine, which keeps its pipe buffers the same way (pipe/schedule.py
// TrainSchedule.num_pipe_buffers) and partitions the boundary activation over the tensor-
// parallel ranks (pipe/engine.py, is_pipe_partitioned).
constexpr bool megatron_layers(Runtime r) { return r != Runtime::kMeshtp; }

template <Named E>
std::ostream& operator<<(std::ostream& os, E e) {
  return os << name(e);
}

// Bytes one rank sends in a collective of n bytes over P ranks, with the bandwidth-optimal
// algorithms (averaged over ranks for the rooted ones): all_gather (n = the gathered buffer),
// reduce_scatter (n = the scattered one), broadcast, reduce, all_to_all (P−1)·n/P;
// all_reduce 2(P−1)·n/P; send_recv n (the message); none 0. Multiplies before dividing, so a
// message of P equal parts gives an exact integer.
double sent_bytes(CollectiveKind kind, int group_size, double message_bytes);

// The 2D GeMM strategies are the five algorithms, each running every linear.
constexpr bool is_gemm2d(Strategy s) { return s >= Strategy::kMeshSlice; }
Algorithm algorithm_of(Strategy s);  // throws unless is_gemm2d(s)
Strategy strategy_of(Algorithm a);

// The operand of a linear Y = X·W (X: tokens × in, W: in × out) that stays in all three
// GeMMs: the largest of Y (tokens·out), X (tokens·in) and W (in·out), ties broken in that
// order; W only when `allow_weight` (the caller can hand activations on transposed).
Stationary choose_stationary(std::int64_t tokens, std::int64_t in, std::int64_t out,
                             bool allow_weight);

}  // namespace meshtp::layout

template <meshtp::layout::Named E>
struct fmt::formatter<E> : fmt::formatter<std::string_view> {
  template <typename FormatContext>
  auto format(E e, FormatContext& ctx) const {
    return fmt::formatter<std::string_view>::format(meshtp::layout::name(e), ctx);
  }
};
