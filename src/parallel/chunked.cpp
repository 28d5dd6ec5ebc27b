#include "parallel/chunked.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "parallel/chunked_collective.hpp"

namespace meshtp::parallel {

std::span<float> ChunkedMatrix::chunk_span(int i) const {
  MESHTP_CHECK(i >= 0 && i < layout_.chunks, "chunk {} of a matrix with {} chunks", i,
               layout_.chunks);
  return {data_ + i * layout_.chunk_size(), static_cast<std::size_t>(layout_.chunk_size())};
}

MatrixView ChunkedMatrix::piece(int i, int j) const {
  MESHTP_CHECK(j >= 0 && j < layout_.pieces, "piece {} of a chunk with {} pieces", j,
               layout_.pieces);
  const std::int64_t piece_cols = layout_.cols / layout_.pieces;
  float* base = chunk_span(i).data() + j * layout_.chunk_rows * piece_cols;
  return {base, layout_.chunk_rows, piece_cols, piece_cols};
}

MatrixView ChunkedMatrix::chunk(int i) const {
  MESHTP_CHECK(layout_.pieces == 1, "chunk view of a matrix stored in {} pieces",
               layout_.pieces);
  return {chunk_span(i).data(), layout_.chunk_rows, layout_.cols, layout_.cols};
}

MatrixView ChunkedMatrix::whole() const {
  MESHTP_CHECK(layout_.pieces == 1, "whole view of a matrix stored in {} pieces",
               layout_.pieces);
  return {data_, layout_.rows(), layout_.cols, layout_.cols};
}

void Progress::watch(ChunkedCollective* collective) {
  MESHTP_CHECK(count_ < kMaxWatched, "Progress watches at most {} collectives", kMaxWatched);
  watched_[static_cast<std::size_t>(count_++)] = collective;
}

bool Progress::any_pending() const {
  for (int k = 0; k < count_; ++k) {
    if (watched_[static_cast<std::size_t>(k)]->any_pending()) return true;
  }
  return false;
}

void Progress::poke() {
  for (int k = 0; k < count_; ++k) watched_[static_cast<std::size_t>(k)]->poke();
}

void gemm_poked(ConstMatrixView a, Trans trans_a, ConstMatrixView b, Trans trans_b,
                MatrixView c, float alpha, float beta, Progress* progress) {
  const int splits = progress == nullptr ? 1 : progress->splits();
  if (splits == 1 || c.rows < 2 * splits || !progress->any_pending()) {
    gemm(a, trans_a, b, trans_b, c, alpha, beta);
    return;
  }
  // Panel [r0, r1) of C's rows is op(A)'s rows [r0, r1): a row block of A, or a column
  // block of A when it is transposed.
  for (int k = 0; k < splits; ++k) {
    const std::int64_t r0 = c.rows * k / splits, r1 = c.rows * (k + 1) / splits;
    const ConstMatrixView a_panel = trans_a == Trans::kNo ? a.block(r0, 0, r1 - r0, a.cols)
                                                          : a.block(0, r0, a.rows, r1 - r0);
    gemm(a_panel, trans_a, b, trans_b, c.block(r0, 0, r1 - r0, c.cols), alpha, beta);
    if (k + 1 < splits) progress->poke();
  }
}

}  // namespace meshtp::parallel
