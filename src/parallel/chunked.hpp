// Chunked activations: the buffers of ATP's chunk-based overlap (ATP §4).
//
//   n   rows of the whole batch on the global matrix (tokens: b·s)
//   c   chunks: the batch is cut into c groups of whole sequences, nc = n/c rows each
//   p   pieces: a chunk may be stored as p column pieces, one after the other
//
// A ChunkedMatrix is a local [rows, cols] activation laid out chunk-major, then piece-major:
//
//   [chunk 0: piece 0 (chunk_rows × cols/p) | piece 1 | … ] [chunk 1: …] …
//
// so that every chunk is one contiguous span — what a collective of that chunk sends or
// receives — and with p = 1 the whole buffer is the ordinary row-major [rows, cols] matrix.
// Pieces exist for the attention block: the column-first QKV output is reduce-scattered over
// mesh dim 1 in d2 pieces (one per dim-1 rank, whole heads each), and the attention output
// comes back from the all-gather in the same d2 pieces. GeMMs read and write the pieces
// through strided views, so no layout is ever repacked.
//
// Progress: Open MPI advances a non-blocking collective only while some MPI call runs on
// that process. A GeMM that should overlap a pending collective is therefore cut into
// `splits` row panels with a Progress::poke() (MPI_Test on every pending chunk) between
// them; with nothing pending the GeMM runs whole.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "tensor/gemm.hpp"
#include "tensor/tensor.hpp"

namespace meshtp::parallel {

struct ChunkedLayout {
  std::int64_t chunk_rows = 0;
  std::int64_t cols = 0;
  int chunks = 1;
  int pieces = 1;

  std::int64_t chunk_size() const { return chunk_rows * cols; }
  std::int64_t size() const { return chunk_size() * chunks; }
  std::int64_t rows() const { return chunk_rows * chunks; }
  bool operator==(const ChunkedLayout&) const = default;
};

class ChunkedMatrix {
 public:
  ChunkedMatrix() = default;
  ChunkedMatrix(float* data, ChunkedLayout layout) : data_(data), layout_(layout) {}

  float* data() const { return data_; }
  const ChunkedLayout& layout() const { return layout_; }
  std::span<float> span() const { return {data_, static_cast<std::size_t>(layout_.size())}; }

  // Chunk i as one contiguous span (all its pieces).
  std::span<float> chunk_span(int i) const;
  // Piece j of chunk i: a contiguous [chunk_rows, cols/pieces] matrix.
  MatrixView piece(int i, int j) const;
  // Chunk i as a [chunk_rows, cols] matrix; only when pieces == 1.
  MatrixView chunk(int i) const;
  // The whole [rows, cols] row-major matrix; only when pieces == 1.
  MatrixView whole() const;

 private:
  float* data_ = nullptr;
  ChunkedLayout layout_;
};

class ChunkedCollective;

// The collectives a stage may overlap with; poke() lets MPI advance all of them.
class Progress {
 public:
  static constexpr int kMaxWatched = 16;

  explicit Progress(int splits = 1) : splits_(splits < 1 ? 1 : splits) {}
  void watch(ChunkedCollective* collective);  // throws past kMaxWatched
  int splits() const { return splits_; }
  bool any_pending() const;
  void poke();

 private:
  int splits_;
  int count_ = 0;
  std::array<ChunkedCollective*, kMaxWatched> watched_{};
};

// C = alpha·op(A)·op(B) + beta·C through meshtp::gemm, cut into progress->splits() row panels
// of C with a poke between them while a watched collective is pending (progress may be null).
void gemm_poked(ConstMatrixView a, Trans trans_a, ConstMatrixView b, Trans trans_b,
                MatrixView c, float alpha, float beta, Progress* progress);


}  // namespace meshtp::parallel
