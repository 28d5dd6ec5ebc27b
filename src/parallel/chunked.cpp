#include "parallel/chunked.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "ops/cpu_backend.hpp"
#include "parallel/chunked_collective.hpp"

namespace meshtp::parallel {

namespace {

void check_chunk(const ChunkedLayout& l, int i) {
  MESHTP_CHECK(i >= 0 && i < l.chunks, "chunk {} of a matrix with {} chunks", i, l.chunks);
}

}  // namespace

View ChunkedMatrix::chunk_message(int i) const {
  check_chunk(layout_, i);
  auto* base = static_cast<char*>(data_) +
               static_cast<std::size_t>(i * layout_.chunk_size()) * element_size(type_);
  return View::packed(base, type_, 1, layout_.chunk_size());
}

View ChunkedMatrix::piece_view(int i, int j) const {
  MESHTP_CHECK(j >= 0 && j < layout_.pieces, "piece {} of a chunk with {} pieces", j,
               layout_.pieces);
  const std::int64_t piece_cols = layout_.cols / layout_.pieces;
  return View::packed(chunk_message(i).data, type_, layout_.pieces * layout_.chunk_rows,
                      piece_cols)
      .row_band(j * layout_.chunk_rows, layout_.chunk_rows);
}

View ChunkedMatrix::chunk_view(int i) const {
  MESHTP_CHECK(layout_.pieces == 1, "chunk view of a matrix stored in {} pieces",
               layout_.pieces);
  return View::packed(chunk_message(i).data, type_, layout_.chunk_rows, layout_.cols);
}

View ChunkedMatrix::whole_view() const {
  MESHTP_CHECK(layout_.pieces == 1, "whole view of a matrix stored in {} pieces",
               layout_.pieces);
  return View::packed(data_, type_, layout_.rows(), layout_.cols);
}

std::span<float> ChunkedMatrix::span() const {
  const View all = View::packed(data_, type_, 1, layout_.size());
  return {host_matrix(all, "a chunked matrix").data, static_cast<std::size_t>(layout_.size())};
}

std::span<float> ChunkedMatrix::chunk_span(int i) const {
  const View v = chunk_message(i);
  return {host_matrix(v, "a chunk").data, static_cast<std::size_t>(v.cols)};
}

MatrixView ChunkedMatrix::piece(int i, int j) const { return host_matrix(piece_view(i, j), "a piece"); }
MatrixView ChunkedMatrix::chunk(int i) const { return host_matrix(chunk_view(i), "a chunk"); }
MatrixView ChunkedMatrix::whole() const { return host_matrix(whole_view(), "a chunked matrix"); }

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

void gemm_poked(device::Backend& backend, const View& a, Trans trans_a, const View& b,
                Trans trans_b, const View& c, float alpha, float beta, Progress* progress) {
  const int splits = progress == nullptr ? 1 : progress->splits();
  if (splits == 1 || c.rows < 2 * splits || !progress->any_pending()) {
    backend.gemm(c, a, trans_a, b, trans_b, alpha, beta);
    return;
  }
  // Panel [r0, r1) of C's rows is op(A)'s rows [r0, r1): a row block of A, or a column
  // block of A when it is transposed.
  for (int k = 0; k < splits; ++k) {
    const std::int64_t r0 = c.rows * k / splits, r1 = c.rows * (k + 1) / splits;
    const View a_panel = trans_a == Trans::kNo ? a.row_band(r0, r1 - r0)
                                               : a.block(0, r0, a.rows, r1 - r0);
    backend.gemm(c.row_band(r0, r1 - r0), a_panel, trans_a, b, trans_b, alpha, beta);
    if (k + 1 < splits) progress->poke();
  }
}

}  // namespace meshtp::parallel
