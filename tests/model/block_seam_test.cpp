// Whole transformer blocks on the seam: the 2D-GeMM block (model/gemm2d_block.hpp) and the ATP
// block (model/block.hpp) run on the inverted stand-in (tests/inverted_device.hpp: memory the
// host cannot read, every byte complemented) over host-staged groups give the host run's
// output, input gradient and parameter gradients on every mesh of this world size: the 2D
// block for two algorithms and both recomputations; the ATP block with 1 and 2 chunks,
// sequence parallelism on N x 1 meshes, GPT's layers and the Llama family's (RMSNorm, SwiGLU,
// RoPE, grouped-query attention), fused and unfused. Parameters, streams and buffers all live
// in the stand-in's memory, so any op of a block that touched them other than through its
// backend or a transport would compute on complemented floats and fail here. (The host runs
// themselves are held to the serial reference by the stack tests.)
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/parse.hpp"
#include "error_of.hpp"
#include "model/block.hpp"
#include "model/gemm2d_block.hpp"
#include "model/seam_helpers.hpp"
#include "tensor/random.hpp"

namespace meshtp::model {
namespace {

using testing::InvertedBackend;
using testing::on_every_mesh;

BlockConfig config(layout::Algorithm algo, layout::Recompute recompute) {
  BlockConfig c{.shape = {.batch = 8, .seq = 8, .hidden = 32, .heads = 8, .layers = 1},
                .layout = {.strategy = layout::strategy_of(algo), .progress_splits = 2}};
  c.layout.recompute = recompute;
  if (algo == layout::Algorithm::kMeshSlice) {
    c.layout.linears.fill({.gemm2d = {.slices = 2}});
  }
  return c;
}

// Everything one forward + backward leaves, on the host.
struct Result {
  Tensor y, dx;
  std::vector<Tensor> grads;
};

// Arrays of some backend holding given host values, and the values back.
struct Memory {
  device::Backend& be;
  std::vector<device::Array> arrays;
  float* put(const Tensor& t) {
    arrays.push_back(be.alloc(t.numel(), Element::kF32));
    be.upload(arrays.back(), t.values());
    return static_cast<float*>(arrays.back().data());
  }
  Tensor get(const float* data, const Shape& shape) {
    for (const device::Array& a : arrays) {
      if (a.data() != data) continue;
      Tensor t(shape);
      const std::vector<float> v = be.download(a);
      std::copy(v.begin(), v.end(), t.values().begin());
      return t;
    }
    ADD_FAILURE() << "no array at that address";
    return Tensor(shape);
  }
};

template <class B>
Result run(const mesh::DeviceMesh& mesh, BlockConfig c, device::Backend& be) {
  c.backend = &be;
  B block(mesh, c);
  Memory mem{be, {}};
  const std::uint64_t seed = 1000 * static_cast<std::uint64_t>(mesh.rank() + 1);
  std::vector<std::span<float>> values, grads;
  for (int p = 0; p < kBlockParams; ++p) {
    const Shape& s = block.local_shape(p);
    std::int64_t n = 1;
    for (const std::int64_t d : s) n *= d;
    const auto sz = static_cast<std::size_t>(n);
    values.emplace_back(mem.put(uniform_tensor({1, n}, seed + 2 * p, 0.3f)), sz);
    grads.emplace_back(mem.put(uniform_tensor({1, n}, seed + 2 * p + 1)), sz);  // += onto these
  }
  block.bind(values, grads);
  const parallel::ChunkedLayout layout = block.stream_layout();
  const Shape stream{layout.rows(), layout.cols};
  float* x = mem.put(uniform_tensor(stream, seed + 100));
  float* y = mem.put(Tensor(stream, std::nanf("")));
  float* dy = mem.put(uniform_tensor(stream, seed + 101));
  float* dx = mem.put(Tensor(stream, std::nanf("")));
  auto ws = block.make_workspace();
  block.forward(parallel::ChunkedMatrix(y, layout), parallel::ChunkedMatrix(x, layout), *ws);
  block.backward(parallel::ChunkedMatrix(dx, layout), parallel::ChunkedMatrix(dy, layout), *ws);
  Result r{mem.get(y, stream), mem.get(dx, stream), {}};
  for (int p = 0; p < kBlockParams; ++p) {
    r.grads.push_back(
        mem.get(grads[static_cast<std::size_t>(p)].data(),
                {static_cast<std::int64_t>(grads[static_cast<std::size_t>(p)].size())}));
  }
  return r;
}

void expect_same(const Result& host, const Result& dev, const std::string& what) {
  EXPECT_LE(max_relative_error(dev.y.values(), host.y.values()), 1e-5) << "y, " << what;
  EXPECT_LE(max_relative_error(dev.dx.values(), host.dx.values()), 1e-5) << "dx, " << what;
  for (int p = 0; p < kBlockParams; ++p) {
    EXPECT_LE(max_relative_error(dev.grads[static_cast<std::size_t>(p)].values(),
                                 host.grads[static_cast<std::size_t>(p)].values()),
              1e-5)
        << "gradient of parameter " << p << ", " << what;
  }
}

TEST(Gemm2dBlockSeam, TheBlockOnMemoryTheHostCannotReadEqualsTheHostRun) {
  const int world_rank = comm::Communicator::world().rank();
  const int ran =
      on_every_mesh([&](const std::vector<int>& shape, const mesh::DeviceMesh& host_mesh,
                        const mesh::DeviceMesh& device_mesh, InvertedBackend& stand_in) {
        int n = 0;
        for (const layout::Algorithm algo :
             {layout::Algorithm::kCollective, layout::Algorithm::kMeshSlice}) {
          for (const layout::Recompute recompute :
               {layout::Recompute::kNone, layout::Recompute::kSelective}) {
            const BlockConfig c = config(algo, recompute);
            try {
              plan_gemm2d_block(c, shape);
            } catch (const Error&) {
              continue;  // MeshSlice's slices may not divide a small mesh's extents
            }
            const std::string what =
                fmt::format("mesh {} {} recompute {} (rank {})", format_mesh_shape(shape), algo,
                            layout::name(recompute), world_rank);
            expect_same(run<Gemm2dBlock>(host_mesh, c, cpu_backend()),
                        run<Gemm2dBlock>(device_mesh, c, stand_in), what);
            ++n;
          }
        }
        EXPECT_GT(stand_in.gemm_calls, 0);
        return n;
      });
  EXPECT_GT(ran, 0);
}

BlockConfig atp_config(bool llama, layout::Attention attention, int chunks, bool sp) {
  BlockConfig c{.shape = {.batch = 8, .seq = 8, .hidden = 32, .heads = 8, .layers = 1},
                .layout = {.chunks = chunks, .sequence_parallel = sp, .progress_splits = 2}};
  c.layout.attention = attention;
  if (llama) c.shape = testing::llama_family(c.shape, 2, 48);
  return c;
}

TEST(AtpBlockSeam, TheBlockOnMemoryTheHostCannotReadEqualsTheHostRun) {
  const int world_rank = comm::Communicator::world().rank();
  const int ran =
      on_every_mesh([&](const std::vector<int>& shape, const mesh::DeviceMesh& host_mesh,
                        const mesh::DeviceMesh& device_mesh, InvertedBackend& stand_in) {
        int n = 0;
        for (const bool llama : {false, true}) {
          for (const layout::Attention attention : layout::all<layout::Attention>()) {
            for (const int chunks : {1, 2}) {
              for (const bool sp : {false, true}) {
                if (sp && shape[1] != 1) continue;  // sequence parallelism runs on N x 1
                const BlockConfig c = atp_config(llama, attention, chunks, sp);
                try {
                  validate_atp_block(c, shape);
                } catch (const Error&) {
                  continue;  // e.g. 8 ranks and 2 KV heads under grouped-query attention
                }
                const std::string what =
                    fmt::format("mesh {} {} {} chunks {}{} (rank {})", format_mesh_shape(shape),
                                llama ? "llama" : "gpt", layout::name(attention), chunks,
                                sp ? " sp" : "", world_rank);
                expect_same(run<Block>(host_mesh, c, cpu_backend()),
                            run<Block>(device_mesh, c, stand_in), what);
                ++n;
              }
            }
          }
        }
        return n;
      });
  EXPECT_GT(ran, 0);
}

}  // namespace
}  // namespace meshtp::model
