// View: the one matrix view of the runtime's seam (docs/seam.md) — rows × cols elements of one
// type in memory some backend owns, row i starting `ld` elements after row i−1:
//
//   element (i, j) at  data + (i·ld + j)·element_size(type)      0 ≤ i < rows, 0 ≤ j < cols
//
// A view owns nothing and never reads its memory: the memory may be a GPU's, which the host
// cannot read, so only the backend that made it (device/backend.hpp) computes on it and only a
// transport moves it (comm::buffer_of). Host fp32 code that reads elements directly uses
// tensor/tensor.hpp's MatrixView, which a host view converts to (ops/cpu_backend.hpp).
#pragma once

#include <cstdint>
#include <string>

#include "core/element.hpp"

namespace meshtp {

struct View {
  void* data = nullptr;
  Element type = Element::kF32;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t ld = 0;  // distance between consecutive rows, in elements

  // rows × cols packed row-major at data (ld = cols).
  static View packed(void* data, Element type, std::int64_t rows, std::int64_t cols) {
    return {data, type, rows, cols, cols};
  }
  // Sub-block [row0, row0+nrows) × [col0, col0+ncols); bounds are checked (meshtp::Error
  // naming both shapes).
  View block(std::int64_t row0, std::int64_t col0, std::int64_t nrows, std::int64_t ncols) const;
  // Rows [row0, row0+nrows), every column.
  View row_band(std::int64_t row0, std::int64_t nrows) const { return block(row0, 0, nrows, cols); }
  bool contiguous() const { return ld == cols || rows <= 1; }
  std::int64_t elements() const { return rows * cols; }
};

// "bf16 8x16 (ld 32)": for error messages.
std::string describe(const View& v);

}  // namespace meshtp
