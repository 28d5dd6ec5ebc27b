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

#include "core/view.hpp"
#include "device/backend.hpp"
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
  // `data` holds layout.size() elements of `type` in some backend's memory.
  ChunkedMatrix(void* data, Element type, ChunkedLayout layout)
      : data_(data), type_(type), layout_(layout) {}
  ChunkedMatrix(float* data, ChunkedLayout layout) : ChunkedMatrix(data, Element::kF32, layout) {}

  void* data() const { return data_; }
  Element type() const { return type_; }
  const ChunkedLayout& layout() const { return layout_; }

  // The seam's views (core/view.hpp), whatever memory holds them:
  // chunk i, all its pieces, as one packed 1 × chunk_size message;
  View chunk_message(int i) const;
  // piece j of chunk i, a packed [chunk_rows, cols/pieces] matrix;
  View piece_view(int i, int j) const;
  // chunk i as a [chunk_rows, cols] matrix, and the whole [rows, cols] one (pieces == 1).
  View chunk_view(int i) const;
  View whole_view() const;

  // The same on the host (fp32 in host memory; the layers not yet on the seam):
  std::span<float> span() const;
  std::span<float> chunk_span(int i) const;
  MatrixView piece(int i, int j) const;
  MatrixView chunk(int i) const;
  MatrixView whole() const;

 private:
  void* data_ = nullptr;
  Element type_ = Element::kF32;
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

// C = alpha·op(A)·op(B) + beta·C on `backend`, cut into progress->splits() row panels of C
// with a poke between them while a watched collective is pending (progress may be null).
// Pending means started and not yet waited, by program order: BLAS may round a panel's
// product differently from the whole's in the last bit, so a cut decided by when the
// transport finishes would make a run's values differ from the next run's.
void gemm_poked(device::Backend& backend, const View& a, Trans trans_a, const View& b,
                Trans trans_b, const View& c, float alpha, float beta, Progress* progress);


}  // namespace meshtp::parallel
