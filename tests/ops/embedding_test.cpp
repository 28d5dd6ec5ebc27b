#include "ops/embedding.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "grad_check.hpp"

namespace meshtp {
namespace {

using testing::check_gradient;
using testing::dot;
using testing::error_message;
using testing::kFdTol;
using testing::plus;
using testing::test_tensor;

// B=2, T=4, V=6: token 3 appears three times, so its gradient row must sum three rows.
const std::vector<std::int32_t> kTokens = {3, 0, 5, 3, 1, 3, 2, 0};
constexpr std::int64_t kB = 2, kT = 4, kVocab = 6, kMaxT = 5, kC = 3;

TEST(Embedding, ForwardIsTokenRowPlusPositionRow) {
  const Tensor wte = test_tensor({kVocab, kC}, 1), wpe = test_tensor({kMaxT, kC}, 2);
  Tensor out({kB * kT, kC});
  embedding_forward(out.matrix(), kTokens, kB, kT, wte.matrix(), wpe.matrix());
  for (std::int64_t b = 0; b < kB; ++b) {
    for (std::int64_t t = 0; t < kT; ++t) {
      for (std::int64_t c = 0; c < kC; ++c) {
        EXPECT_EQ(out.at({b * kT + t, c}), wte.at({kTokens[b * kT + t], c}) + wpe.at({t, c}));
      }
    }
  }
}

TEST(Embedding, GradientsMatchFiniteDifferencesAndAccumulate) {
  Tensor wte = test_tensor({kVocab, kC}, 11), wpe = test_tensor({kMaxT, kC}, 12);
  const Tensor dout = test_tensor({kB * kT, kC}, 13);
  Tensor out({kB * kT, kC});
  const auto loss = [&] {
    embedding_forward(out.matrix(), kTokens, kB, kT, wte.matrix(), wpe.matrix());
    return dot(dout.values(), out.values());
  };
  Tensor dwte({kVocab, kC}), dwpe({kMaxT, kC});
  embedding_backward(dwte.matrix(), dwpe.matrix(), dout.matrix(), kTokens, kB, kT);
  const auto rte = check_gradient(wte.values(), dwte.values(), loss);
  const auto rpe = check_gradient(wpe.values(), dwpe.values(), loss);
  EXPECT_LT(rte.error, kFdTol) << "dwte: " << rte;
  EXPECT_LT(rpe.error, kFdTol) << "dwpe: " << rpe;
  // Unused token 4 and unused position 4 get nothing.
  for (std::int64_t c = 0; c < kC; ++c) {
    EXPECT_EQ(dwte.at({4, c}), 0.0f);
    EXPECT_EQ(dwpe.at({4, c}), 0.0f);
  }
  const Tensor p_te = test_tensor({kVocab, kC}, 14), p_pe = test_tensor({kMaxT, kC}, 15);
  Tensor acc_te = p_te, acc_pe = p_pe;
  embedding_backward(acc_te.matrix(), acc_pe.matrix(), dout.matrix(), kTokens, kB, kT);
  EXPECT_LT(max_relative_error(acc_te.values(), plus(p_te, dwte).values()), 1e-6);
  EXPECT_LT(max_relative_error(acc_pe.values(), plus(p_pe, dwpe).values()), 1e-6);
}

TEST(Embedding, RejectsBadTokensAndLongSequences) {
  const Tensor wte({kVocab, kC}), wpe({kMaxT, kC});
  Tensor out({kB * kT, kC});
  std::vector<std::int32_t> bad = kTokens;
  bad[5] = 6;
  EXPECT_NE(error_message([&] {
              embedding_forward(out.matrix(), bad, kB, kT, wte.matrix(), wpe.matrix());
            }).find("token 6 at position 5 is outside the vocabulary [0, 6)"),
            std::string::npos);
  bad[5] = -1;
  EXPECT_FALSE(error_message([&] {
                 embedding_forward(out.matrix(), bad, kB, kT, wte.matrix(), wpe.matrix());
               }).empty());
  const std::vector<std::int32_t> long_seq(12, 0);
  Tensor out6({12, kC});
  EXPECT_NE(error_message([&] {
              embedding_forward(out6.matrix(), long_seq, 2, 6, wte.matrix(), wpe.matrix());
            }).find("T=6 exceeds the 5 position embeddings"),
            std::string::npos);
}

}  // namespace
}  // namespace meshtp
