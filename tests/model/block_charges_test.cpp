// The simulated build charges an ATP block exactly what the planner prices for it.
//
// `meshtp simulate` runs the real block in charged mode (core/simulation.hpp: every GeMM
// charges 2·m·n·k FLOPs at F, every elementwise op its bytes at R) and compares its time with
// the planner's (plan/atp_cost.hpp + plan/elementwise.hpp). The two agree only if both count
// the same work, op for op. Here a one-layer stack runs forward and backward in charged mode
// under Open MPI on every mesh (d1, d2) of this world size, chunks 1 and 2, and the ledger of
// charged seconds must equal the planner's compute time of each pass:
//
//   forward   Σ GeMM FLOPs / F + Σ elementwise bytes / R  =  AtpEstimate::compute_fwd_s
//   backward  the same                                    =  AtpEstimate::compute_bwd_s
//
// (F = 1e9 FLOP/s and R = 1e8 B/s, so a term missing on either side shows at its own scale.)
// Each term this pins was once missing from the runtime's charges and made the simulation
// 22–31% faster than the planner on ATP's IC3 (docs/simulation.md): the feature-sharded
// LayerNorm forward (3 touches) and backward (6), the bias adds of the qkv/proj/mlp2 linears
// (2) and their gradients' row sums (1), and the residuals' backward copies (2).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "../parallel/mesh2d.hpp"
#include "core/simulation.hpp"
#include "model/stack.hpp"
#include "plan/atp_cost.hpp"
#include "plan/elementwise.hpp"

namespace meshtp::model {
namespace {

constexpr double kFlopsPerS = 1e9, kBytesPerS = 1e8;

void no_clock_advance(double /*seconds*/) {}

// Charged mode for the lifetime of the object, the hooks restored after.
class ChargedMode {
 public:
  ChargedMode() : saved_(simhooks::hooks()) {
    simhooks::Hooks& h = simhooks::hooks();
    h.mode = simhooks::Mode::kCharged;
    h.advance = &no_clock_advance;
    h.gemm = GemmModel(kFlopsPerS);
    h.elementwise_bytes_per_s = kBytesPerS;
    h.charged_s = 0;
  }
  ~ChargedMode() { simhooks::hooks() = saved_; }
  ChargedMode(const ChargedMode&) = delete;
  ChargedMode& operator=(const ChargedMode&) = delete;

 private:
  simhooks::Hooks saved_;
};

// A stack's forward and backward in charged mode: the simulated seconds each charged.
struct Charged {
  double forward = 0, backward = 0;
};
Charged charged_step(Stack& stack) {
  const ChargedMode charged;
  Charged c;
  stack.forward();
  c.forward = simhooks::hooks().charged_s;
  stack.zero_grads();
  const double before = simhooks::hooks().charged_s;
  stack.backward();
  c.backward = simhooks::hooks().charged_s - before;
  return c;
}

plan::AtpEstimate planned(const plan::ModelSpec& m, int d1, int d2, int chunks) {
  plan::MeshLinks links;  // compute does not depend on the links: any positive bandwidth
  links.mesh = {d1, d2};
  for (int i = 0; i < 2; ++i) {
    plan::DimLinks& d = links.dims[static_cast<std::size_t>(i)];
    d.dim = i;
    d.size = links.mesh[static_cast<std::size_t>(i)];
    d.all_reduce = d.all_gather = d.reduce_scatter = {.bw_bytes_per_s = 1e9};
  }
  const plan::ElementwiseEstimate ew =
      plan::elementwise_estimate(m, plan::ElementwiseLayout::kAtp, d1, d2, kBytesPerS / 1e9);
  return plan::atp_estimate(m, links, chunks, kFlopsPerS, ew);
}

TEST(BlockCharges, EqualThePlannersComputeOnEveryMesh) {
  const auto world = comm::Communicator::world();
  plan::ModelSpec m;
  m.name = "charges";
  m.layers = 1;
  m.hidden = 32;
  m.heads = 8;
  m.batch = 4;
  m.seq = 8;
  m.precision = plan::Precision::kFp32;
  for (const auto& shape : parallel::meshes2d(world.size())) {
    const mesh::DeviceMesh mesh(world, shape);
    for (const int chunks : {1, 2}) {
      const std::string what =
          fmt::format("{} chunks={} (rank {})", mesh.to_string(), chunks, mesh.rank());
      StackConfig c{.block = {.shape = m, .layout = {.chunks = chunks}}};
      c.block.shape.layers = 1;
      Stack stack(mesh, c);
      const plan::AtpEstimate want = planned(m, shape[0], shape[1], chunks);
      const auto [forward, backward] = charged_step(stack);
      EXPECT_NEAR(forward, want.compute_fwd_s, 1e-9 * want.compute_fwd_s)
          << "forward on " << what << ": elementwise planned " << want.elementwise_fwd_s;
      EXPECT_NEAR(backward, want.compute_bwd_s, 1e-9 * want.compute_bwd_s)
          << "backward on " << what << ": elementwise planned " << want.elementwise_bwd_s;
    }
  }
}

// Fused attention (ops/flash_attention.hpp): the op charges its products over the tiles it
// visits (2 per (row, key) pair forward, 5 backward) at F and its O(s) bytes at R; the planner
// prices the same (core/gemm_model.hpp flash_attention_seconds, elementwise.hpp "attention
// io"), with no softmax over s×s and, under selective recomputation, nothing re-run. At
// s = 320 a sequence has 5 query tiles of 64 and 2 key tiles of 256, the second cut by the
// diagonal, so a count of the full s×s, or of the causal half, would show.
TEST(BlockCharges, FusedAttentionEqualsThePlannersComputeOnEveryMesh) {
  const auto world = comm::Communicator::world();
  plan::ModelSpec m;
  m.name = "charges-fused";
  m.layers = 1;
  m.hidden = 32;
  m.heads = 8;
  m.batch = 4;
  m.seq = 320;
  m.precision = plan::Precision::kFp32;
  m.attention = layout::Attention::kFused;
  for (const auto& shape : parallel::meshes2d(world.size())) {
    const mesh::DeviceMesh mesh(world, shape);
    for (const int chunks : {1, 2}) {
      for (const auto recompute : {layout::Recompute::kNone, layout::Recompute::kSelective}) {
        const std::string what =
            fmt::format("{} chunks={} recompute={} (rank {})", mesh.to_string(), chunks,
                        layout::name(recompute), mesh.rank());
        m.recompute = recompute;
        StackConfig c{.block = {.shape = m, .layout = {.chunks = chunks}}};
        c.block.shape.layers = 1;
        c.block.layout.attention = layout::Attention::kFused;
        c.block.layout.recompute = recompute;
        Stack stack(mesh, c);
        const plan::AtpEstimate want = planned(m, shape[0], shape[1], chunks);
        const auto [forward, backward] = charged_step(stack);
        EXPECT_NEAR(forward, want.compute_fwd_s, 1e-9 * want.compute_fwd_s)
            << "forward on " << what << ": elementwise planned " << want.elementwise_fwd_s;
        // One layer: the step's compute less the forward is the backward and any re-run.
        const double want_backward = want.t_compute_s - want.compute_fwd_s;
        EXPECT_NEAR(backward, want_backward, 1e-9 * want_backward)
            << "backward on " << what << ": elementwise planned " << want.elementwise_bwd_s;
        EXPECT_DOUBLE_EQ(want.t_compute_s - want.compute_fwd_s, want.compute_bwd_s)
            << "fused attention re-runs nothing under selective recomputation, " << what;
      }
    }
  }
}

// The planner's fused core against the unfused one on the same shapes: fewer products (the
// tiles past the diagonal skipped, 5 backward against 4 over the full s×s) and no s×s softmax.
TEST(BlockCharges, FusedAttentionIsPricedBelowTheUnfusedCoreAtLongSequences) {
  plan::ModelSpec m;
  m.name = "long";
  m.layers = 1;
  m.hidden = 64;
  m.heads = 8;
  m.batch = 1;
  m.seq = 4096;
  m.precision = plan::Precision::kFp32;
  const plan::AtpEstimate unfused = planned(m, 2, 2, 1);
  m.attention = layout::Attention::kFused;
  const plan::AtpEstimate fused = planned(m, 2, 2, 1);
  const auto core = [](const plan::AtpEstimate& e, bool backward) {
    for (const plan::AtpOp& a : e.ops) {
      if (a.name == "attention" && a.backward == backward) return a.compute_s;
    }
    return -1.0;
  };
  // Forward: Σ over 64 query tiles of 64 rows × (the keys through the tile's last row), 2
  // products; unfused 2 products over s×s. Their ratio (Σ_i 64·64·(i+1))/s² = 65/128.
  EXPECT_NEAR(core(fused, false) / core(unfused, false), 65.0 / 128, 1e-12);
  EXPECT_LT(core(fused, true), core(unfused, true));
  EXPECT_LT(fused.elementwise_fwd_s, unfused.elementwise_fwd_s);
  EXPECT_LT(fused.compute_fwd_s + fused.compute_bwd_s,
            unfused.compute_fwd_s + unfused.compute_bwd_s);
}

}  // namespace
}  // namespace meshtp::model
