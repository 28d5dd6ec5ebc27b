// The whole GPT on the seam: model::Gpt with its parameters, gradients and activations in the
// inverted stand-in's memory (tests/inverted_device.hpp: every byte complemented, so any op that
// touched them other than through the backend or a transport would compute on garbage), over
// host-staged groups, gives the host run's loss and every parameter's gradient: on every mesh
// of this world size, for GPT's layers on ATP blocks (with chunks, and sequence parallelism on
// N x 1, whose final norm's gradients are partial sums over mesh dim 0), the Llama family
// (RMSNorm, SwiGLU, RoPE, grouped-query attention with copied KV heads on 4 and 8 ranks, an
// untied head) and the 2D-GeMM blocks (tokens and features both split); and two pipeline
// stages of one model, the stream handed from one to the other in the stand-in's memory; and
// context parallelism (the ring, the all-to-all and both) with and without a tensor-parallel
// mesh beside it, its zigzag chunks' key/value blocks travelling the ring in the stand-in's
// memory; and the mixture of experts (experts folded over mesh dim 0, whole or split over etp,
// dropless and with a capacity that drops, and under context parallelism), its routed rows
// gathered, moved and combined in the stand-in's memory. (The host runs are held to the
// serial model by gpt_test, cp_grad_test and the MoE model tests.)
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "core/parse.hpp"
#include "core/precision.hpp"
#include "model/gpt.hpp"
#include "model/seam_helpers.hpp"
#include "random_ids.hpp"
#include "tensor/gemm.hpp"
#include "tensor/memory.hpp"
#include "tensor/random.hpp"

namespace meshtp::model {
namespace {

using testing::InvertedBackend;

// Loss and global gradients of one forward + backward of every stage, the stream between
// stages in the backend's memory; and the host tensors' bytes the stages took (their
// parameters, gradients and saved activations, when the backend is the CPU's).
struct Result {
  double loss = 0;
  std::map<std::string, Tensor> grads;
  std::int64_t built_bytes = 0;
};

// The stages are built under `built_under` (which decides how their blocks store their saved
// GeMM inputs, model/block.hpp), and run under the caller's precision.
Result run(const mesh::DeviceMesh& mesh, GptConfig c, device::Backend* backend,
           Precision built_under = Precision::kFp32) {
  c.backend = backend;
  const std::vector<std::int32_t> tokens = testing::random_ids(c.shape.tokens(), 256, 1),
                                  targets = testing::random_ids(c.shape.tokens(), 256, 2);
  std::vector<std::unique_ptr<Gpt>> stages;
  const std::int64_t bytes_before = tensor_bytes();
  {
    const ScopedGemmPrecision storage(built_under);
    for (int s = 0; s < pipeline_stages(c.layout); ++s) {
      c.stage = s;
      stages.push_back(std::make_unique<Gpt>(mesh, c));
      stages.back()->init(7);
      stages.back()->zero_grads();
    }
  }
  const std::int64_t built_bytes = tensor_bytes() - bytes_before;
  device::Backend& be = stages.front()->backend();
  device::Array stream = be.alloc(stages.front()->stream_floats(), Element::kF32);
  device::Array dstream = be.alloc(stages.front()->stream_floats(), Element::kF32);
  Result r;
  r.built_bytes = built_bytes;
  const std::span<float> x = device::floats(stream), dx = device::floats(dstream);
  const bool one = stages.size() == 1;
  if (!one) stages.front()->forward(tokens, targets, {}, x);
  r.loss = stages.back()->forward(tokens, targets, one ? std::span<const float>{} : x);
  stages.back()->backward(0.5f, {}, {}, one ? std::span<float>{} : dx);
  if (!one) stages.front()->backward(0.5f, {}, dx);
  for (const auto& g : stages) {
    for (int p = 0; p < g->num_params(); ++p) {
      const std::vector<float> local = be.download(g->grad(p));
      r.grads[fmt::format("stage {} {}", g->config().stage, g->name(p))] = g->gather(p, local);
    }
  }
  return r;
}

GptConfig gpt_config(const std::vector<int>& shape, layout::Strategy strategy, int chunks,
                     bool sp) {
  GptConfig c{.shape = {.batch = 4, .seq = 8, .hidden = 32, .heads = 8, .layers = 2, .vocab = 256}};
  c.layout = {.mesh = {shape[0], shape[1]}, .chunks = chunks, .sequence_parallel = sp};
  c.layout.strategy = strategy;
  return c;
}

GptConfig llama_config(const std::vector<int>& shape, int pp) {
  GptConfig c = gpt_config(shape, layout::Strategy::kAtp, 1, false);
  c.shape.hidden = 64;
  c.shape.heads = 16;
  c.shape = testing::llama_family(c.shape, 2, 96);
  c.layout.attention = layout::Attention::kFused;
  c.layout.pp = pp;
  return c;
}

// GPT's layers with a mixture of experts for the MLP: 8 experts of width 16, top 2, folded
// over the ranks of an N x 1 mesh under sequence parallelism (each rank its own tokens).
GptConfig moe_config(const std::vector<int>& shape) {
  GptConfig c = gpt_config(shape, layout::Strategy::kAtp, 1, shape[0] > 1);
  c.shape.num_experts = 8;
  c.shape.top_k = 2;
  c.shape.moe_ffn_hidden = 16;
  c.shape.router_aux_loss = 0.01;
  return c;
}

// The whole-model layouts of a mesh of this shape: GPT's layers on ATP blocks (with chunks,
// and Megatron-SP on N x 1), with experts, and on 2D-GeMM blocks, the Llama family's alone
// and in two pipeline stages.
std::vector<std::pair<std::string, GptConfig>> model_cases(const std::vector<int>& shape) {
  std::vector<std::pair<std::string, GptConfig>> cases{
      {"gpt atp", gpt_config(shape, layout::Strategy::kAtp, 1, false)},
      {"gpt atp chunks 2", gpt_config(shape, layout::Strategy::kAtp, 2, false)},
      {"gpt moe", moe_config(shape)},
      {"gpt collective", gpt_config(shape, layout::Strategy::kCollective, 1, false)},
      {"llama", llama_config(shape, 1)},
      {"llama pp 2", llama_config(shape, 2)}};
  if (shape[1] == 1) {
    cases.emplace_back("gpt megatron sp", gpt_config(shape, layout::Strategy::kAtp, 1, true));
  }
  return cases;
}

void expect_same(const Result& host, const Result& device, const std::string& what) {
  EXPECT_NEAR(device.loss, host.loss, 1e-5 * std::abs(host.loss)) << what;
  ASSERT_EQ(device.grads.size(), host.grads.size()) << what;
  for (const auto& [param, g] : host.grads) {
    EXPECT_LE(max_relative_error(device.grads.at(param).values(), g.values()), 1e-5)
        << what << ", gradient of " << param;
  }
}

TEST(GptSeam, TheModelOnMemoryTheHostCannotReadEqualsTheHostRun) {
  const int world_rank = comm::Communicator::world().rank();
  int gemm_calls = 0;
  const int ran =
      testing::on_every_mesh([&](const std::vector<int>& shape, const mesh::DeviceMesh& host_mesh,
                                 const mesh::DeviceMesh& device_mesh, InvertedBackend& stand_in) {
        int n = 0;
        for (const auto& [name, c] : model_cases(shape)) {
          try {
            validate(c, shape);
          } catch (const Error&) {
            continue;  // e.g. 8 ranks and 2 KV heads under the fused core's head split
          }
          const std::string what =
              fmt::format("{} on mesh {} (rank {})", name, format_mesh_shape(shape), world_rank);
          expect_same(run(host_mesh, c, nullptr), run(device_mesh, c, &stand_in), what);
          ++n;
        }
        gemm_calls = stand_in.gemm_calls;  // the one stand-in's count so far
        return n;
      });
  EXPECT_GT(gemm_calls, 0);
  EXPECT_GE(ran, 5);
}

// model_cases, experts with a shared expert's dense MLP beside them (its input and activation
// stored too), and the 2D GeMM algorithms model_cases leaves out (each moves its operands'
// blocks in buffers of their element): SUMMA, Cannon (square meshes), Wang, and MeshSlice in
// two slices with the input-stationary dataflow on the MLP.
std::vector<std::pair<std::string, GptConfig>> bf16_storage_cases(const std::vector<int>& shape) {
  std::vector<std::pair<std::string, GptConfig>> cases = model_cases(shape);
  GptConfig shared = moe_config(shape);
  shared.shape.shared_experts = 1;
  cases.emplace_back("gpt moe shared", shared);
  for (const auto& [name, strategy] : {std::pair{"gpt summa", layout::Strategy::kSumma},
                                       std::pair{"gpt cannon", layout::Strategy::kCannon},
                                       std::pair{"gpt wang", layout::Strategy::kWang},
                                       std::pair{"gpt meshslice", layout::Strategy::kMeshSlice}}) {
    GptConfig c = gpt_config(shape, strategy, 1, false);
    if (strategy == layout::Strategy::kMeshSlice) {
      for (auto& l : c.layout.linears) l.gemm2d.slices = 2;
      c.layout.linears[static_cast<std::size_t>(layout::Linear::kMlp1)].stationary =
          layout::Stationary::kInput;
    }
    cases.emplace_back(name, c);
  }
  return cases;
}

// bf16 storage: blocks built under bf16 precision keep their saved GeMM inputs (the norms'
// outputs, gathered too, q | k | v, the attention output, gathered too, and the MLP's
// activation; a MoE block's ln2 output, its shared expert's MLP inputs, its experts' dispatched
// rows and activation) in bf16, and bf16 compute copies of their GeMM weights (not under
// ZeRO-3). Under bf16 precision a GeMM rounds its fp32 operands to bf16 anyway, so one step
// with them stored in bf16 equals, bit for bit, the step with them stored in fp32 — on the CPU
// and on the stand-in, on every mesh, for every layout of bf16_storage_cases — while the host
// build takes fewer bytes for the operands (ZeRO-3: no copies) and more with the copies. Two
// stored values are read by something that would not have rounded them: the fused core's
// output O (its backward's D = rowsum(dO ∘ O), as FlashAttention's bf16 O is read) and FC1's
// output (GeLU's and SwiGLU's backward, as Megatron-LM keeps it in bf16). There the loss is
// the same bit for bit, the gradients the backward makes before either (the final norm's, the
// last layer's FC2) too, and the rest the same to bf16's rounding (measured: at most 4.8e-3
// of a gradient's largest value, on 1, 2, 4 and 8 ranks).
TEST(GptSeam, GemmInputsStoredInBf16GiveTheStepOfFp32StorageUnderBf16) {
  const int world_rank = comm::Communicator::world().rank();
  const int ran =
      testing::on_every_mesh([&](const std::vector<int>& shape, const mesh::DeviceMesh& host_mesh,
                                 const mesh::DeviceMesh& device_mesh, InvertedBackend& stand_in) {
        int n = 0;
        const ScopedGemmPrecision bf16(Precision::kBf16);
        for (const auto& [name, c] : bf16_storage_cases(shape)) {
          try {
            validate(c, shape);
          } catch (const Error&) {
            continue;
          }
          const std::string what =
              fmt::format("{} on mesh {} (rank {})", name, format_mesh_shape(shape), world_rank);
          // What reads a rounded value no GeMM would have rounded: the fused core's backward
          // (O) and the dense MLP's activation backward (FC1's output). The gradients the
          // backward makes before either — the final norm's and the last layer's FC2 — stay
          // bit for bit, and so does every gradient where neither runs (the routed experts).
          const bool fused = c.layout.attention == layout::Attention::kFused;
          const bool dense = !c.shape.is_moe() || c.shape.shared_experts > 0;
          const std::string last_fc2 = fmt::format("layers.{}.mlp.fc2.", c.shape.layers - 1);
          const auto expect_identical = [&](const Result& fp32, const Result& bf16,
                                            const std::string& where) {
            EXPECT_EQ(bf16.loss, fp32.loss) << what << where;
            for (const auto& [param, g] : fp32.grads) {
              const double error = max_relative_error(bf16.grads.at(param).values(), g.values());
              const bool before = param.find("lnf.") != std::string::npos ||
                                  param.find(last_fc2) != std::string::npos;
              if ((fused || dense) && !before) {
                EXPECT_LE(error, 1e-2) << what << where << ", gradient of " << param;
              } else {
                EXPECT_EQ(error, 0.0) << what << where << ", gradient of " << param;
              }
            }
          };
          const Result host32 = run(host_mesh, c, nullptr, Precision::kFp32);
          const Result host16 = run(host_mesh, c, nullptr, Precision::kBf16);
          expect_identical(host32, host16, " on the CPU");
          // The saved operands take 2 bytes less an element; the GeMM weights' bf16 compute
          // copies 2 bytes more a parameter (at these sizes, more than the operands save),
          // which ZeRO-3 keeps of the head's weight only ([V/N, h] on the last stage).
          GptConfig zero3 = c;
          zero3.layout.zero = 3;
          const Result host16_zero3 = run(host_mesh, zero3, nullptr, Precision::kBf16);
          expect_identical(host32, host16_zero3, " on the CPU without compute copies (ZeRO-3)");
          const std::int64_t tp = static_cast<std::int64_t>(shape[0]) * shape[1];
          const std::int64_t head_copy = 2 * ((c.shape.vocab + tp - 1) / tp) * c.shape.hidden;
          EXPECT_LT(host16_zero3.built_bytes - head_copy, host32.built_bytes) << what;
          EXPECT_GT(host16.built_bytes, host16_zero3.built_bytes) << what;
          expect_identical(run(device_mesh, c, &stand_in, Precision::kFp32),
                           run(device_mesh, c, &stand_in, Precision::kBf16), " on the stand-in");
          ++n;
        }
        return n;
      });
  EXPECT_GE(ran, 5);
}

// A run's values do not depend on when the transport finishes: two runs of one layout give
// the same loss and gradients bit for bit, on every mesh, for every layout of model_cases, in
// fp32 and in bf16 (bf16 storage). A GeMM overlapping a collective is cut into panels by
// program order (parallel/chunked.hpp gemm_poked), not by whether MPI has finished, which
// made the projection's weight gradient differ from run to run in the last bit on 1x2.
TEST(GptSeam, TwoRunsOfOneLayoutGiveTheSameBits) {
  const int world_rank = comm::Communicator::world().rank();
  const int ran = testing::on_every_mesh([&](const std::vector<int>& shape,
                                             const mesh::DeviceMesh& host_mesh,
                                             const mesh::DeviceMesh&, InvertedBackend&) {
    int n = 0;
    for (const Precision p : {Precision::kFp32, Precision::kBf16}) {
      const ScopedGemmPrecision precision(p);
      for (const auto& [name, c] : model_cases(shape)) {
        try {
          validate(c, shape);
        } catch (const Error&) {
          continue;
        }
        const Result first = run(host_mesh, c, nullptr, p);
        const Result second = run(host_mesh, c, nullptr, p);
        const std::string what = fmt::format("{} in {} on mesh {} (rank {})", name, meshtp::name(p),
                                             format_mesh_shape(shape), world_rank);
        EXPECT_EQ(second.loss, first.loss) << what;
        for (const auto& [param, g] : first.grads) {
          EXPECT_EQ(max_relative_error(second.grads.at(param).values(), g.values()), 0.0)
              << what << ", gradient of " << param;
        }
        ++n;
      }
    }
    return n;
  });
  EXPECT_GE(ran, 10);
}

// The world as tp × cp ranks (tp consecutive: Megatron-Core's order), on the host and over the
// stand-in's host-staged groups: each side's cp group and tp × 1 tensor-parallel mesh.
struct TpByCp {
  TpByCp(const comm::Communicator& world, const comm::Communicator& staged, int cp)
      : tp(world.size() / cp),
        host_cp(world.split(world.rank() % tp, world.rank() / tp, "cp")),
        device_cp(staged.split(world.rank() % tp, world.rank() / tp, "cp")),
        host_mesh(world.split(world.rank() / tp, world.rank() % tp), {tp, 1}),
        device_mesh(staged.split(world.rank() / tp, world.rank() % tp), {tp, 1}) {}
  int tp;
  comm::Communicator host_cp, device_cp;
  mesh::DeviceMesh host_mesh, device_mesh;
};

// Context parallelism on the seam: the world as tp × cp (tp ranks consecutive, Megatron-Core's
// order), every cp that divides it and each of its communication kinds, GPT's and the Llama
// family's layers. Each rank's loss and gradients (its share: cp's partial sums) are the host
// run's of the same layout.
TEST(GptSeam, ContextParallelismOnMemoryTheHostCannotReadEqualsTheHostRun) {
  const auto world = comm::Communicator::world();
  const int n = world.size(), rank = world.rank();
  if (n < 2) GTEST_SKIP() << "context parallelism needs 2 ranks or more";
  InvertedBackend stand_in;
  const auto staged = comm::Communicator::host_staged(world, stand_in.memory);
  int ran = 0;
  for (int cp = 2; cp <= n; cp *= 2) {
    if (n % cp != 0) continue;
    const TpByCp g(world, staged, cp);
    const int tp = g.tp;
    for (const layout::CpComm kind : layout::all<layout::CpComm>()) {
      for (const bool llama : {false, true}) {
        GptConfig c = llama ? llama_config({tp, 1}, 1)
                            : gpt_config({tp, 1}, layout::Strategy::kAtp, 1, false);
        c.shape.seq = 16;
        c.layout.attention = layout::Attention::kFused;
        c.layout.cp = cp;
        c.layout.cp_comm = kind;
        const std::string what = fmt::format("{} cp {} {} tp {} (rank {})", llama ? "llama" : "gpt",
                                             cp, layout::name(kind), tp, rank);
        try {
          validate(c, {tp, 1});
        } catch (const Error&) {
          continue;  // e.g. a2a+ring needs cp ≥ 4
        }
        GptConfig on_host = c, on_device = c;
        on_host.cp_group = &g.host_cp;
        on_device.cp_group = &g.device_cp;
        expect_same(run(g.host_mesh, on_host, nullptr), run(g.device_mesh, on_device, &stand_in),
                    what);
        ++ran;
      }
    }
  }
  EXPECT_GE(ran, 4);
}

// The mixture of experts on the seam: on every N x 1 mesh (sequence parallelism: each rank its
// own tokens, the experts over the N ranks), each expert whole (ep N) or split (etp N), dropless
// and with capacity factor 1 (assignments dropped), and folded over cp 2 where the world
// holds it. Each rank's loss and gradients are the host run's of the same layout.
TEST(GptSeam, ExpertsOnMemoryTheHostCannotReadEqualRunsOnTheHost) {
  const auto world = comm::Communicator::world();
  const int n = world.size(), rank = world.rank();
  InvertedBackend stand_in;
  const auto staged = comm::Communicator::host_staged(world, stand_in.memory);
  int ran = 0;
  for (int cp = 1; cp <= std::min(n, 2); ++cp) {
    if (n % cp != 0) continue;
    const TpByCp g(world, staged, cp);
    const int tp = g.tp;
    for (const int etp : {0, tp * cp}) {
      for (const double capacity : {0.0, 1.0}) {
        GptConfig c = gpt_config({tp, 1}, layout::Strategy::kMegatron, 1, tp > 1);
        c.shape.seq = 16;
        c.shape.num_experts = 8;  // up to one per rank of 8
        c.shape.top_k = 2;
        c.shape.moe_ffn_hidden = 16;
        c.shape.router_aux_loss = 0.01;
        c.shape.capacity_factor = capacity;
        c.layout.etp = etp;
        if (cp > 1) {
          c.layout.attention = layout::Attention::kFused;
          c.layout.cp = cp;
        }
        const std::string what = fmt::format("experts tp {} cp {} etp {} capacity {} (rank {})", tp,
                                             cp, etp, capacity, rank);
        try {
          validate(c, {tp, 1});
        } catch (const Error& e) {
          ADD_FAILURE() << what << ": " << e.what();
          continue;
        }
        GptConfig on_host = c, on_device = c;
        if (cp > 1) {  // the experts fold over the whole world: cp-major, tp fastest
          on_host.cp_group = &g.host_cp;
          on_device.cp_group = &g.device_cp;
          on_host.fold_group = &world;
          on_device.fold_group = &staged;
        }
        expect_same(run(g.host_mesh, on_host, nullptr), run(g.device_mesh, on_device, &stand_in),
                    what);
        ++ran;
      }
    }
  }
  EXPECT_GE(ran, 4);
}

}  // namespace
}  // namespace meshtp::model
