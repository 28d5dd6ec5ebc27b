#include "tensor/tensor.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.hpp"

namespace meshtp {

std::int64_t numel(const Shape& shape) {
  std::int64_t n = 1;
  for (const std::int64_t d : shape) {
    MESHTP_CHECK(d >= 0, "negative dimension {} in shape {}", d, to_string(shape));
    n *= d;
  }
  return n;
}

std::string to_string(const Shape& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

MatrixView MatrixView::block(std::int64_t row0, std::int64_t col0, std::int64_t nrows,
                             std::int64_t ncols) const {
  MESHTP_CHECK(row0 >= 0 && col0 >= 0 && nrows >= 0 && ncols >= 0 && row0 + nrows <= rows &&
                   col0 + ncols <= cols,
               "block [{}:{}, {}:{}] is outside a {}x{} matrix", row0, row0 + nrows, col0,
               col0 + ncols, rows, cols);
  return {data + row0 * ld + col0, nrows, ncols, ld};
}

ConstMatrixView ConstMatrixView::block(std::int64_t row0, std::int64_t col0, std::int64_t nrows,
                                       std::int64_t ncols) const {
  MESHTP_CHECK(row0 >= 0 && col0 >= 0 && nrows >= 0 && ncols >= 0 && row0 + nrows <= rows &&
                   col0 + ncols <= cols,
               "block [{}:{}, {}:{}] is outside a {}x{} matrix", row0, row0 + nrows, col0,
               col0 + ncols, rows, cols);
  return {data + row0 * ld + col0, nrows, ncols, ld};
}

Tensor::Tensor(Shape shape, float fill)
    : shape_(std::move(shape)), values_(static_cast<std::size_t>(meshtp::numel(shape_))) {
  this->fill(fill);
}

Tensor::Tensor(Shape shape, std::vector<float> values)
    : shape_(std::move(shape)), values_(values.begin(), values.end()) {
  MESHTP_CHECK(static_cast<std::int64_t>(values_.size()) == meshtp::numel(shape_),
               "{} values do not fill a tensor of shape {}", values_.size(), to_string(shape_));
}

std::int64_t Tensor::dim(int d) const {
  const int n = ndim();
  MESHTP_CHECK(d >= -n && d < n, "dim {} is out of range for a {}-d tensor", d, n);
  return shape_[static_cast<std::size_t>(d < 0 ? d + n : d)];
}

std::int64_t Tensor::offset(std::initializer_list<std::int64_t> index) const {
  MESHTP_CHECK(static_cast<int>(index.size()) == ndim(), "index of {} dims into a {}-d tensor",
               index.size(), ndim());
  std::int64_t flat = 0;
  std::size_t k = 0;
  for (const std::int64_t i : index) {
    MESHTP_CHECK(i >= 0 && i < shape_[k], "index {} out of range for dim {} of shape {}", i, k,
                 to_string(shape_));
    flat = flat * shape_[k] + i;
    ++k;
  }
  return flat;
}

float& Tensor::at(std::initializer_list<std::int64_t> index) { return values_[offset(index)]; }
float Tensor::at(std::initializer_list<std::int64_t> index) const {
  return values_[offset(index)];
}

MatrixView Tensor::matrix() {
  const std::int64_t cols = shape_.empty() ? 1 : shape_.back();
  const std::int64_t rows = cols == 0 ? 0 : numel() / cols;
  return {values_.data(), rows, cols, cols};
}

ConstMatrixView Tensor::matrix() const {
  const std::int64_t cols = shape_.empty() ? 1 : shape_.back();
  const std::int64_t rows = cols == 0 ? 0 : numel() / cols;
  return {values_.data(), rows, cols, cols};
}

void Tensor::reshape(Shape shape) {
  MESHTP_CHECK(meshtp::numel(shape) == numel(), "cannot reshape {} into {}", to_string(shape_),
               to_string(shape));
  shape_ = std::move(shape);
}

void Tensor::resize(Shape shape) {
  values_.clear();  // keeps the allocation; growing it then copies nothing
  values_.resize(static_cast<std::size_t>(meshtp::numel(shape)));
  shape_ = std::move(shape);
  fill(0.0f);
}

void Tensor::fill(float value) {
  if (simhooks::skip_values(values_.size() * sizeof(float))) return;
  std::fill(values_.begin(), values_.end(), value);
}

Tensor::Tensor(const Tensor& other)
    : shape_(other.shape_), values_(other.values_.size()) {
  if (simhooks::skip_values(values_.size() * sizeof(float))) return;
  std::copy(other.values_.begin(), other.values_.end(), values_.begin());
}

Tensor& Tensor::operator=(const Tensor& other) {
  if (this != &other) *this = Tensor(other);
  return *this;
}

void copy(ConstMatrixView src, MatrixView dst) {
  MESHTP_CHECK(src.rows == dst.rows && src.cols == dst.cols,
               "copy from a {}x{} block into a {}x{} block", src.rows, src.cols, dst.rows,
               dst.cols);
  if (simhooks::skip_values(static_cast<std::size_t>(src.rows * src.cols) * sizeof(float))) return;
  for (std::int64_t i = 0; i < src.rows; ++i) {
    std::memcpy(dst.data + i * dst.ld, src.data + i * src.ld,
                static_cast<std::size_t>(src.cols) * sizeof(float));
  }
}

void copy(std::span<const float> src, std::span<float> dst) {
  MESHTP_CHECK(src.size() == dst.size(), "copy of {} values into {}", src.size(), dst.size());
  if (simhooks::skip_values(src.size() * sizeof(float))) return;
  std::copy(src.begin(), src.end(), dst.begin());
}

void zero(MatrixView dst) {
  if (simhooks::skip_values(static_cast<std::size_t>(dst.rows * dst.cols) * sizeof(float))) return;
  for (std::int64_t r = 0; r < dst.rows; ++r) std::fill_n(dst.data + r * dst.ld, dst.cols, 0.0f);
}

void copy_blocks(std::span<const ConstMatrixView> src, std::span<const MatrixView> dst) {
  MESHTP_CHECK(src.size() == dst.size(), "copy_blocks: {} sources for {} destinations",
               src.size(), dst.size());
  std::size_t bytes = 0;
  for (std::size_t i = 0; i < src.size(); ++i) {
    MESHTP_CHECK(src[i].rows == dst[i].rows && src[i].cols == dst[i].cols,
                 "copy_blocks: block {} is {}x{} into {}x{}", i, src[i].rows, src[i].cols,
                 dst[i].rows, dst[i].cols);
    bytes += static_cast<std::size_t>(src[i].rows * src[i].cols) * sizeof(float);
  }
  if (simhooks::skip_values(bytes)) return;
  for (std::size_t i = 0; i < src.size(); ++i)
    for (std::int64_t r = 0; r < src[i].rows; ++r)
      std::memcpy(dst[i].data + r * dst[i].ld, src[i].data + r * src[i].ld,
                  static_cast<std::size_t>(src[i].cols) * sizeof(float));
}

void add(ConstMatrixView x, MatrixView y) {
  MESHTP_CHECK(x.rows == y.rows && x.cols == y.cols, "add: {}x{} into {}x{}", x.rows, x.cols,
               y.rows, y.cols);
  if (simhooks::skip_values(static_cast<std::size_t>(x.rows * x.cols) * sizeof(float))) return;
  for (std::int64_t r = 0; r < x.rows; ++r) {
    const float* xr = x.data + r * x.ld;
    float* yr = y.data + r * y.ld;
    for (std::int64_t q = 0; q < x.cols; ++q) yr[q] += xr[q];
  }
}

double max_abs_diff(std::span<const float> a, std::span<const float> b) {
  MESHTP_CHECK(a.size() == b.size(), "comparing {} values with {}", a.size(), b.size());
  double worst = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = std::abs(static_cast<double>(a[i]) - b[i]);
    if (std::isnan(d)) return d;  // a NaN anywhere must not be hidden by a later maximum
    worst = std::max(worst, d);
  }
  return worst;
}

double max_relative_error(std::span<const float> a, std::span<const float> b) {
  MESHTP_CHECK(a.size() == b.size(), "comparing {} values with {}", a.size(), b.size());
  double scale = 0.0;
  for (const float v : b) scale = std::max(scale, std::abs(static_cast<double>(v)));
  const double diff = max_abs_diff(a, b);
  return scale > 0.0 ? diff / scale : diff;
}

void check_same_shape(const char* what, ConstMatrixView a, ConstMatrixView b) {
  MESHTP_CHECK(a.rows == b.rows && a.cols == b.cols, "{}: a {}x{} view against a {}x{} view", what,
               a.rows, a.cols, b.rows, b.cols);
}

}  // namespace meshtp
