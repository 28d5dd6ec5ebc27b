#include "bench/blas_reference.hpp"

#include <cblas.h>

#include <algorithm>

#include "core/error.hpp"
#include "core/stats.hpp"
#include "tensor/random.hpp"

namespace meshtp::bench {
namespace {

// C[m×n] = op(A)·op(B), row-major, A and B dense with their natural leading dimensions.
void sgemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, const float* a,
           const float* b, float* c) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), 1.0f, a,
              static_cast<blasint>(ta ? m : k), b, static_cast<blasint>(tb ? k : n), 0.0f, c,
              static_cast<blasint>(n));
}

}  // namespace

BlasReference::BlasReference(std::int64_t tokens, std::int64_t hidden, std::int64_t vocab,
                             device::Backend* device)
    : n_(tokens), device_(device) {
  MESHTP_CHECK(tokens > 0 && hidden > 0 && vocab >= 0,
               "BLAS reference: tokens={}, hidden={} must be positive and vocab={} ≥ 0", tokens,
               hidden, vocab);
  const std::int64_t h = hidden;
  linears_ = {{h, 3 * h}, {h, h}, {h, 4 * h}, {4 * h, h}};
  if (vocab > 0) linears_.push_back({h, vocab});
  std::int64_t width = 0, weights = 0;
  for (const Linear& l : linears_) {
    width = std::max({width, l.in, l.out});
    weights = std::max(weights, l.in * l.out);
    flops_ += 6.0 * static_cast<double>(n_) * static_cast<double>(l.in * l.out);
  }
  x_ = uniform_tensor({n_ * width}, 31);
  w_ = uniform_tensor({weights}, 32);
  y_ = Tensor({std::max(n_ * width, weights)});
  if (device_ == nullptr) return;
  for (auto [array, host] : {std::pair{&dx_, &x_}, std::pair{&dw_, &w_}, std::pair{&dy_, &y_}}) {
    *array = device_->alloc(host->numel(), Element::kF32);
    device_->upload(*array, host->values());
  }
  x_ = w_ = y_ = Tensor();
}

double BlasReference::time_pass() {
  if (device_ != nullptr) {
    const auto mat = [](const device::Array& a, std::int64_t rows, std::int64_t cols) {
      return a.view(rows, cols);
    };
    device_->synchronize();
    const double start = now_seconds();
    for (const Linear& l : linears_) {
      device_->gemm(mat(dy_, n_, l.out), mat(dx_, n_, l.in), Trans::kNo, mat(dw_, l.out, l.in),
                    Trans::kYes);  // y  = x·Wᵀ
      device_->gemm(mat(dy_, n_, l.in), mat(dx_, n_, l.out), Trans::kNo, mat(dw_, l.out, l.in),
                    Trans::kNo);  // dx = dy·W
      device_->gemm(mat(dy_, l.out, l.in), mat(dx_, n_, l.out), Trans::kYes, mat(dx_, n_, l.in),
                    Trans::kNo);  // dW = dyᵀ·x
    }
    device_->synchronize();
    return now_seconds() - start;
  }
  const double start = now_seconds();
  for (const Linear& l : linears_) {
    sgemm(false, true, n_, l.out, l.in, x_.data(), w_.data(), y_.data());   // y  = x·Wᵀ
    sgemm(false, false, n_, l.in, l.out, x_.data(), w_.data(), y_.data());  // dx = dy·W
    sgemm(true, false, l.out, l.in, n_, x_.data(), x_.data(), y_.data());   // dW = dyᵀ·x
  }
  return now_seconds() - start;
}

}  // namespace meshtp::bench
