// fp32 dense row-major tensors and 2D strided views of them.
//
//   Tensor         owns its values (counted: tensor/memory.hpp); shape [d0, d1, …, dn-1], element (i0…in-1) at
//                  Σ ik·stride_k with stride_{n-1} = 1 (row-major, last dim fastest).
//   MatrixView     a strided row-major 2D window (rows × cols, leading dim ld ≥ cols) into
//                  someone else's memory: a block of rows/columns of a matrix, no copy.
//   ConstMatrixView  the read-only twin; every MatrixView converts to it.
//
// Collectives need contiguous buffers, so block-of-a-tensor operations that cross a
// non-leading dim copy (see blocks.hpp); views are for GeMM operands, which BLAS reads with
// a leading dimension.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/simulation.hpp"
#include "tensor/memory.hpp"

namespace meshtp {

using Shape = std::vector<std::int64_t>;

// Tensor storage: allocation through core/simulation.hpp — large buffers are the shared
// simulated block in the simulated build's charged mode, plain heap memory otherwise —
// counted by tensor/memory.hpp (capacity, not size, is what is held), and
// elements that are default-initialised (not zeroed) on construction: Tensor initialises its
// values itself, and skips that per-element work when no one will read them.
template <typename T>
struct StorageAllocator {
  using value_type = T;
  StorageAllocator() = default;
  template <typename U>
  StorageAllocator(const StorageAllocator<U>&) noexcept {}  // NOLINT: allocators convert
  T* allocate(std::size_t n) {
    T* p = static_cast<T*>(simhooks::allocate(n * sizeof(T)));
    detail::note_tensor_alloc(static_cast<std::int64_t>(n * sizeof(T)));
    return p;
  }
  void deallocate(T* p, std::size_t n) noexcept {
    detail::note_tensor_free(static_cast<std::int64_t>(n * sizeof(T)));
    simhooks::release(p, n * sizeof(T));
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    if constexpr (sizeof...(Args) == 0) {
      ::new (static_cast<void*>(p)) U;
    } else {
      ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
    }
  }
  friend bool operator==(const StorageAllocator&, const StorageAllocator&) { return true; }
};
using Storage = std::vector<float, StorageAllocator<float>>;

std::int64_t numel(const Shape& shape);
std::string to_string(const Shape& shape);  // "[2, 3, 4]"

struct MatrixView {
  float* data = nullptr;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t ld = 0;  // distance between consecutive rows, in elements

  float& operator()(std::int64_t i, std::int64_t j) const { return data[i * ld + j]; }
  // Sub-block [row0, row0+nrows) × [col0, col0+ncols); bounds are checked.
  MatrixView block(std::int64_t row0, std::int64_t col0, std::int64_t nrows,
                   std::int64_t ncols) const;
  bool contiguous() const { return ld == cols || rows <= 1; }
};

struct ConstMatrixView {
  const float* data = nullptr;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t ld = 0;

  ConstMatrixView() = default;
  ConstMatrixView(const float* d, std::int64_t r, std::int64_t c, std::int64_t l)
      : data(d), rows(r), cols(c), ld(l) {}
  ConstMatrixView(const MatrixView& v)  // NOLINT(google-explicit-constructor): views narrow freely
      : data(v.data), rows(v.rows), cols(v.cols), ld(v.ld) {}

  const float& operator()(std::int64_t i, std::int64_t j) const { return data[i * ld + j]; }
  ConstMatrixView block(std::int64_t row0, std::int64_t col0, std::int64_t nrows,
                        std::int64_t ncols) const;
  bool contiguous() const { return ld == cols || rows <= 1; }
};

// Throws unless a and b have the same rows × cols; `what` names the pair in the message.
void check_same_shape(const char* what, ConstMatrixView a, ConstMatrixView b);

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(Shape shape, float fill = 0.0f);
  Tensor(Shape shape, std::vector<float> values);  // values.size() must equal numel(shape)
  // A copy copies the values, except where no one reads them (core/simulation.hpp's
  // skip_values): then it is storage of the same shape.
  Tensor(const Tensor& other);
  Tensor& operator=(const Tensor& other);
  Tensor(Tensor&&) noexcept = default;
  Tensor& operator=(Tensor&&) noexcept = default;

  const Shape& shape() const { return shape_; }
  int ndim() const { return static_cast<int>(shape_.size()); }
  std::int64_t dim(int d) const;  // d may be negative: -1 is the last dim
  std::int64_t numel() const { return static_cast<std::int64_t>(values_.size()); }
  bool empty() const { return values_.empty(); }

  float* data() { return values_.data(); }
  const float* data() const { return values_.data(); }
  std::span<float> values() { return values_; }
  std::span<const float> values() const { return values_; }
  float& operator[](std::int64_t i) { return values_[static_cast<std::size_t>(i)]; }
  float operator[](std::int64_t i) const { return values_[static_cast<std::size_t>(i)]; }
  float& at(std::initializer_list<std::int64_t> index);
  float at(std::initializer_list<std::int64_t> index) const;

  // The tensor as a matrix (numel/last_dim) × last_dim: leading dims are flattened into rows.
  MatrixView matrix();
  ConstMatrixView matrix() const;

  // Same values, new shape with the same element count.
  void reshape(Shape shape);
  // New shape, values zeroed; reuses the allocation when it is large enough.
  void resize(Shape shape);
  // Set every value (a no-op on storage no one reads: core/simulation.hpp's skip_values).
  void fill(float value);

 private:
  std::int64_t offset(std::initializer_list<std::int64_t> index) const;

  Shape shape_;
  Storage values_;  // counted (tensor/memory.hpp)
};

// Copy src into dst; shapes (sizes) must match. dst = 0. Simulated build, charged mode: no
// copy and no fill (core/simulation.hpp's skip_values: the planner prices neither).
void copy(ConstMatrixView src, MatrixView dst);
void copy(std::span<const float> src, std::span<float> dst);
void zero(MatrixView dst);
// Many block copies as one operation: src[i] into dst[i], each pair of one size (the 2D
// GeMMs' slice packing: the blocks of a slice into one contiguous message and back).
// Charged mode skips them together, deciding once on their total bytes, so the small blocks
// of a large slice are skipped as the slice is.
void copy_blocks(std::span<const ConstMatrixView> src, std::span<const MatrixView> dst);
// y += x elementwise (sizes must match); charged mode: skipped as a copy of x is.
void add(ConstMatrixView x, MatrixView y);

// max_i |a_i − b_i| / max_i |b_i|: the error relative to the reference's scale, so tiny
// elements of a large tensor do not dominate and a scaled-down tensor is not let off.
// Returns the absolute difference when b is all zeros; NaN anywhere gives NaN.
double max_relative_error(std::span<const float> a, std::span<const float> b);
double max_abs_diff(std::span<const float> a, std::span<const float> b);

}  // namespace meshtp
