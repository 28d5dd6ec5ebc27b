// The phase-split ops a sharded layer calls around its collective (ops/layernorm.hpp's
// layernorm_shard_*, ops/cross_entropy.hpp's cross_entropy_shard_*, ops/embedding.hpp's
// embedding_shard_*): played here over 1, 2 and 3 feature or vocabulary shards of one
// matrix, the reduction between the phases done by hand, each equals the whole-matrix op.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "grad_check.hpp"
#include "ops/cross_entropy.hpp"
#include "ops/embedding.hpp"
#include "ops/layernorm.hpp"

namespace meshtp {
namespace {

using testing::test_tensor;

constexpr float kTol = 2e-5f;

TEST(ShardPhases, LayerNormForwardAndBackwardOverFeatureShardsEqualTheWholeOp) {
  const std::int64_t N = 4, C = 12;
  const Tensor x = test_tensor({N, C}, 1, 2.0f, 3.0f);
  const Tensor w = test_tensor({C}, 2, 1.0f, 1.0f), b = test_tensor({C}, 3);
  const Tensor dy = test_tensor({N, C}, 4);
  Tensor y({N, C}), dx({N, C}), dw({C}), db({C});
  std::vector<float> mean(N), rstd(N);
  layernorm_forward(y.matrix(), mean, rstd, x.matrix(), w.values(), b.values());
  layernorm_backward(dx.matrix(), dw.values(), db.values(), dy.matrix(), x.matrix(), w.values(),
                     mean, rstd);
  for (const int shards : {1, 2, 3}) {
    const std::int64_t c = C / shards;
    Tensor ys({N, C}), dxs({N, C}), dws({C}), dbs({C});
    std::vector<float> means(N), rstds(N);
    std::vector<double> total(2 * N, 0.0), part(2 * N);
    for (int s = 0; s < shards; ++s) {  // phase 1 on every shard, summed
      layernorm_shard_forward_sums(x.matrix().block(0, s * c, N, c), part);
      for (std::size_t i = 0; i < part.size(); ++i) total[i] += part[i];
    }
    for (int s = 0; s < shards; ++s) {
      const auto cols = [&](std::span<const float> v) { return v.subspan(s * c, c); };
      layernorm_shard_forward_apply(ys.matrix().block(0, s * c, N, c), means, rstds,
                                    x.matrix().block(0, s * c, N, c), cols(w.values()),
                                    cols(b.values()), total, C);
    }
    std::fill(total.begin(), total.end(), 0.0);
    for (int s = 0; s < shards; ++s) {
      layernorm_shard_backward_sums(part, dws.values().subspan(s * c, c),
                                    dbs.values().subspan(s * c, c),
                                    dy.matrix().block(0, s * c, N, c),
                                    x.matrix().block(0, s * c, N, c),
                                    w.values().subspan(s * c, c), means, rstds);
      for (std::size_t i = 0; i < part.size(); ++i) total[i] += part[i];
    }
    for (int s = 0; s < shards; ++s) {
      layernorm_shard_backward_apply(dxs.matrix().block(0, s * c, N, c),
                                     dy.matrix().block(0, s * c, N, c),
                                     x.matrix().block(0, s * c, N, c),
                                     w.values().subspan(s * c, c), means, rstds, total, C);
    }
    for (std::int64_t i = 0; i < N * C; ++i) {
      EXPECT_NEAR(ys.values()[i], y.values()[i], kTol) << shards << " shards, y " << i;
      EXPECT_NEAR(dxs.values()[i], dx.values()[i], kTol) << shards << " shards, dx " << i;
    }
    for (std::int64_t i = 0; i < C; ++i) {
      EXPECT_NEAR(dws.values()[i], dw.values()[i], kTol) << shards << " shards, dw " << i;
      EXPECT_NEAR(dbs.values()[i], db.values()[i], kTol) << shards << " shards, db " << i;
    }
  }
}

// A vocabulary of 10 real tokens padded to 12, in 1, 2 or 3 shards of 12/shards columns.
TEST(ShardPhases, CrossEntropyAndEmbeddingOverVocabularyShardsEqualTheWholeOps) {
  const std::int64_t N = 5, V = 10, Vp = 12, H = 3;
  const Tensor logits = test_tensor({N, V}, 5, 3.0f);
  const std::vector<std::int32_t> targets{0, 9, 4, 5, 9};
  std::vector<float> lse(N);
  const double loss = cross_entropy_forward(lse, logits.matrix(), targets);
  Tensor dlogits({N, V});
  cross_entropy_backward(dlogits.matrix(), logits.matrix(), lse, targets, 1.0f);
  const Tensor wte = test_tensor({Vp, H}, 6);
  for (const int shards : {1, 2, 3}) {
    const std::int64_t cols = Vp / shards;
    std::vector<float> row_max(N, -1e30f), sums(2 * N, 0.0f), part_max(N), part_sums(2 * N);
    std::vector<Tensor> local;
    for (int s = 0; s < shards; ++s) {  // each shard's logits: its columns, padding past V
      Tensor l({N, cols});
      for (std::int64_t n = 0; n < N; ++n) {
        for (std::int64_t j = 0; j < cols; ++j) {
          const std::int64_t v = s * cols + j;
          l.values()[n * cols + j] = v < V ? logits.values()[n * V + v] : 123.0f;
        }
      }
      cross_entropy_shard_max(l.matrix(), part_max, s * cols, V);
      for (std::int64_t n = 0; n < N; ++n) row_max[n] = std::max(row_max[n], part_max[n]);
      local.push_back(std::move(l));
    }
    for (int s = 0; s < shards; ++s) {
      cross_entropy_shard_sums(part_sums, local[s].matrix(), row_max, targets, s * cols, V);
      for (std::int64_t i = 0; i < 2 * N; ++i) sums[i] += part_sums[i];
    }
    std::vector<float> lse_s(N);
    EXPECT_NEAR(cross_entropy_shard_loss(lse_s, row_max, sums), loss, 1e-5) << shards;
    for (int s = 0; s < shards; ++s) {
      cross_entropy_shard_backward(local[s].matrix(), lse_s, targets, s * cols, 1.0f / N);
      for (std::int64_t n = 0; n < N; ++n) {
        for (std::int64_t j = 0; j < cols; ++j) {
          const std::int64_t v = s * cols + j;
          const float expected = v < V ? dlogits.values()[n * V + v] : 0.0f;
          EXPECT_NEAR(local[s].values()[n * cols + j], expected, kTol) << shards << " shards";
        }
      }
    }
    // The embedding: each shard's rows, zeros elsewhere, summed = the table's rows; the
    // backward adds each row's gradient into the one shard that holds its token.
    Tensor out({N, H}), summed({N, H}), dwte({Vp, H});
    const Tensor dout = test_tensor({N, H}, 7);
    for (int s = 0; s < shards; ++s) {
      embedding_shard_forward(out.matrix(), targets, wte.matrix().block(s * cols, 0, cols, H),
                              s * cols);
      for (std::int64_t i = 0; i < N * H; ++i) summed.values()[i] += out.values()[i];
      embedding_shard_backward(dwte.matrix().block(s * cols, 0, cols, H), dout.matrix(), targets,
                               s * cols);
    }
    Tensor dwte_expected({Vp, H});
    for (std::int64_t n = 0; n < N; ++n) {
      for (std::int64_t h = 0; h < H; ++h) {
        EXPECT_EQ(summed.values()[n * H + h], wte.values()[targets[n] * H + h]) << shards;
        dwte_expected.values()[targets[n] * H + h] += dout.values()[n * H + h];
      }
    }
    for (std::int64_t i = 0; i < Vp * H; ++i) {
      EXPECT_NEAR(dwte.values()[i], dwte_expected.values()[i], kTol) << shards << " shards";
    }
  }
}

}  // namespace
}  // namespace meshtp
