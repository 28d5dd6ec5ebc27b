// Vocabulary-parallel embedding / LM head / cross-entropy equal the serial ops on every
// group size, including 3 (vocab 13 padded to 15: the padded logits must change nothing);
// and on the seam: the same calls on the inverted stand-in (memory the host cannot read) over
// host-staged collectives give the host's values.
#include "parallel/vocab_parallel.hpp"

#include <gtest/gtest.h>

#include "core/error.hpp"
#include "inverted_device.hpp"
#include "ops/cross_entropy.hpp"
#include "ops/embedding.hpp"
#include "ops/linear.hpp"
#include "tensor/random.hpp"

namespace meshtp::parallel {
namespace {

constexpr std::int64_t kVocab = 13, kHidden = 6, kRows = 10;

std::vector<std::int32_t> ids(std::uint64_t seed) {
  std::vector<std::int32_t> v(kRows);
  for (std::int64_t i = 0; i < kRows; ++i) {
    v[i] = static_cast<std::int32_t>((uniform_at(seed, i) + 1.0f) * 0.5f * kVocab) % kVocab;
  }
  return v;
}

// The layer on host tensors: its view forms on the CPU backend.
void host_embedding_forward(MatrixView out, std::span<const std::int32_t> tokens,
                            ConstMatrixView wte_local, const VocabShard& shard,
                            const comm::Communicator& group) {
  vocab_embedding_forward(cpu_backend(), host_view(out), tokens, host_view(wte_local), shard,
                          group);
}
void host_embedding_backward(MatrixView dwte_local, ConstMatrixView dout,
                             std::span<const std::int32_t> tokens, const VocabShard& shard) {
  vocab_embedding_backward(cpu_backend(), host_view(dwte_local), host_view(dout), tokens, shard);
}
double host_cross_entropy_forward(MatrixView logits, std::span<float> lse, ConstMatrixView x,
                                  ConstMatrixView wte_local, std::span<const std::int32_t> targets,
                                  const VocabShard& shard, const comm::Communicator& group,
                                  std::span<float> stats) {
  return vocab_cross_entropy_forward(cpu_backend(), host_view(logits), host_view(lse), host_view(x),
                                     host_view(wte_local), targets, shard, group, host_view(stats));
}
void host_cross_entropy_backward(MatrixView dx, MatrixView dwte_local, MatrixView logits,
                                 std::span<const float> lse, ConstMatrixView x,
                                 ConstMatrixView wte_local, std::span<const std::int32_t> targets,
                                 const VocabShard& shard, const comm::Communicator& group,
                                 float dloss) {
  vocab_cross_entropy_backward(cpu_backend(), host_view(dx), host_view(dwte_local),
                               host_view(logits), host_view(lse), host_view(x),
                               host_view(wte_local), targets, shard, group, dloss);
}

// Rows [begin, begin + rows) of the global wte; padded rows are zeros.
Tensor local_rows(const Tensor& wte, const VocabShard& s) {
  Tensor out({s.rows, kHidden});
  for (std::int64_t r = 0; r < s.rows; ++r) {
    for (std::int64_t c = 0; c < kHidden; ++c) {
      out.at({r, c}) = s.begin + r < kVocab ? wte.at({s.begin + r, c}) : 0.0f;
    }
  }
  return out;
}

TEST(VocabParallel, EmbeddingHeadAndLossEqualSerial) {
  const auto world = comm::Communicator::world();
  const VocabShard shard = make_vocab_shard(kVocab, world);
  EXPECT_EQ(shard.vocab % world.size(), 0);
  EXPECT_GE(shard.vocab, kVocab);
  const Tensor wte = uniform_tensor({kVocab, kHidden}, 11);
  const Tensor wte_local = local_rows(wte, shard);
  const auto tokens = ids(1);
  const auto targets = ids(2);

  // Embedding forward: the serial op with a zero position table.
  Tensor out({kRows, kHidden});
  host_embedding_forward(out.matrix(), tokens, wte_local.matrix(), shard, world);
  Tensor ref({kRows, kHidden});
  const Tensor no_pos({kRows, kHidden});
  embedding_forward(ref.matrix(), tokens, 1, kRows, wte.matrix(), no_pos.matrix());
  EXPECT_EQ(max_abs_diff(out.values(), ref.values()), 0.0);

  // LM head + cross-entropy: serial logits = x·wteᵀ over the real vocabulary.
  const Tensor x = uniform_tensor({kRows, kHidden}, 3);
  Tensor logits({kRows, shard.rows});
  std::vector<float> lse(kRows), stats(3 * kRows);
  const double loss = host_cross_entropy_forward(logits.matrix(), lse, x.matrix(),
                                                 wte_local.matrix(), targets, shard, world, stats);
  Tensor ref_logits({kRows, kVocab});
  linear_forward(ref_logits.matrix(), x.matrix(), wte.matrix(), {});
  std::vector<float> ref_lse(kRows);
  const double ref_loss = cross_entropy_forward(ref_lse, ref_logits.matrix(), targets);
  EXPECT_NEAR(loss, ref_loss, 1e-6 * std::abs(ref_loss)) << "rank " << world.rank();

  Tensor dx({kRows, kHidden});
  Tensor dwte_local({shard.rows, kHidden});
  host_cross_entropy_backward(dx.matrix(), dwte_local.matrix(), logits.matrix(), lse, x.matrix(),
                              wte_local.matrix(), targets, shard, world, 0.5f);
  Tensor dlogits({kRows, kVocab});
  cross_entropy_backward(dlogits.matrix(), ref_logits.matrix(), ref_lse, targets, 0.5f);
  Tensor ref_dx({kRows, kHidden});
  Tensor ref_dwte({kVocab, kHidden});
  linear_backward(ref_dx.matrix(), ref_dwte.matrix(), {}, dlogits.matrix(), x.matrix(),
                  wte.matrix());
  EXPECT_LT(max_relative_error(dx.values(), ref_dx.values()), 1e-5) << "rank " << world.rank();
  const Tensor ref_dwte_local = local_rows(ref_dwte, shard);
  EXPECT_LT(max_abs_diff(dwte_local.values(), ref_dwte_local.values()),
            1e-6 * (1 + max_abs_diff(ref_dwte.values(), std::vector<float>(ref_dwte.numel()))))
      << "rank " << world.rank();

  // Embedding backward: this rank's rows of the serial dwte.
  const Tensor dout = uniform_tensor({kRows, kHidden}, 4);
  Tensor demb({shard.rows, kHidden});
  host_embedding_backward(demb.matrix(), dout.matrix(), tokens, shard);
  Tensor ref_demb({kVocab, kHidden});
  Tensor ref_dpos({kRows, kHidden});
  embedding_backward(ref_demb.matrix(), ref_dpos.matrix(), dout.matrix(), tokens, 1, kRows);
  EXPECT_EQ(max_abs_diff(demb.values(), local_rows(ref_demb, shard).values()), 0.0);
}

// A host tensor in the stand-in's memory, and back.
struct OnDevice {
  device::Array array;
  View view;
};
OnDevice put(testing::InvertedBackend& be, const Tensor& t) {
  OnDevice d{be.alloc(t.numel(), Element::kF32), {}};
  be.upload(d.array, t.values());
  d.view = d.array.view(t.dim(0), t.dim(1));
  return d;
}
Tensor get(testing::InvertedBackend& be, const OnDevice& d) {
  Tensor t({d.view.rows, d.view.cols});
  const std::vector<float> v = be.download(d.array);
  std::copy(v.begin(), v.end(), t.values().begin());
  return t;
}

TEST(VocabParallel, TheSameOnTheSeam) {
  const auto world = comm::Communicator::world();
  testing::InvertedBackend be;
  const auto staged = comm::Communicator::host_staged(world, be.memory);
  const VocabShard shard = make_vocab_shard(kVocab, world);
  const Tensor wte_local = local_rows(uniform_tensor({kVocab, kHidden}, 11), shard);
  const Tensor x = uniform_tensor({kRows, kHidden}, 3), dout = uniform_tensor({kRows, kHidden}, 4);
  const auto tokens = ids(1), targets = ids(2);
  // On the host.
  Tensor out({kRows, kHidden}), logits({kRows, shard.rows}), dx({kRows, kHidden});
  Tensor dwte(wte_local.shape(), 0.25f), demb(wte_local.shape(), 0.5f);
  std::vector<float> lse(kRows), stats(3 * kRows);
  host_embedding_forward(out.matrix(), tokens, wte_local.matrix(), shard, world);
  const double loss = host_cross_entropy_forward(logits.matrix(), lse, x.matrix(),
                                                 wte_local.matrix(), targets, shard, world, stats);
  host_cross_entropy_backward(dx.matrix(), dwte.matrix(), logits.matrix(), lse, x.matrix(),
                              wte_local.matrix(), targets, shard, world, 0.5f);
  host_embedding_backward(demb.matrix(), dout.matrix(), tokens, shard);
  // On the stand-in.
  const OnDevice wte_d = put(be, wte_local), x_d = put(be, x), dout_d = put(be, dout);
  const OnDevice out_d = put(be, Tensor(out.shape(), std::nanf(""))),
                 logits_d = put(be, Tensor(logits.shape())), dx_d = put(be, Tensor(dx.shape()));
  const OnDevice dwte_d = put(be, Tensor(wte_local.shape(), 0.25f)),
                 demb_d = put(be, Tensor(wte_local.shape(), 0.5f));
  const OnDevice lse_d = put(be, Tensor({1, kRows})), stats_d = put(be, Tensor({1, 3 * kRows}));
  vocab_embedding_forward(be, out_d.view, tokens, wte_d.view, shard, staged);
  const double loss_d = vocab_cross_entropy_forward(be, logits_d.view, lse_d.view, x_d.view,
                                                    wte_d.view, targets, shard, staged,
                                                    stats_d.view);
  vocab_cross_entropy_backward(be, dx_d.view, dwte_d.view, logits_d.view, lse_d.view, x_d.view,
                               wte_d.view, targets, shard, staged, 0.5f);
  vocab_embedding_backward(be, demb_d.view, dout_d.view, tokens, shard);
  EXPECT_EQ(loss_d, loss);
  EXPECT_EQ(max_abs_diff(get(be, out_d).values(), out.values()), 0.0);
  EXPECT_EQ(max_abs_diff(get(be, lse_d).values(), lse), 0.0);
  EXPECT_EQ(max_abs_diff(get(be, dx_d).values(), dx.values()), 0.0);
  EXPECT_EQ(max_abs_diff(get(be, dwte_d).values(), dwte.values()), 0.0);
  EXPECT_EQ(max_abs_diff(get(be, demb_d).values(), demb.values()), 0.0);
  EXPECT_EQ(be.gemm_calls, 3);  // the head's forward and its two backward products
}

TEST(VocabParallel, OutOfRangeTokenIsAClearError) {
  const auto world = comm::Communicator::world();
  const VocabShard shard = make_vocab_shard(kVocab, world);
  const Tensor wte_local({shard.rows, kHidden});
  Tensor out({kRows, kHidden});
  auto tokens = ids(1);
  tokens[3] = kVocab;
  EXPECT_THROW(host_embedding_forward(out.matrix(), tokens, wte_local.matrix(), shard, world),
               Error);
}

}  // namespace
}  // namespace meshtp::parallel
