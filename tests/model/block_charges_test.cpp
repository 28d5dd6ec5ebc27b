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
      double forward = 0, backward = 0;
      {
        const ChargedMode charged;
        stack.forward();
        forward = simhooks::hooks().charged_s;
        stack.zero_grads();
        const double before = simhooks::hooks().charged_s;
        stack.backward();
        backward = simhooks::hooks().charged_s - before;
      }
      EXPECT_NEAR(forward, want.compute_fwd_s, 1e-9 * want.compute_fwd_s)
          << "forward on " << what << ": elementwise planned " << want.elementwise_fwd_s;
      EXPECT_NEAR(backward, want.compute_bwd_s, 1e-9 * want.compute_bwd_s)
          << "backward on " << what << ": elementwise planned " << want.elementwise_bwd_s;
    }
  }
}

}  // namespace
}  // namespace meshtp::model
