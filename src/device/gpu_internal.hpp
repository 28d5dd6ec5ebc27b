// What the device sources share among themselves (not for callers): the CUDA type of an
// element type, the strided-batched product attention runs on, and the kernels' launchers.
#pragma once

#include <cuda_runtime.h>
#include <library_types.h>

#include <cstdint>

#include "device/gpu.hpp"
#include "tensor/gemm.hpp"

namespace meshtp::gpu {

cudaDataType_t cuda_type(Element type);

// Row-major C_i = α·op(A_i)·op(B_i) + β·C_i for i < batch, X_i = X + i·stride_x (elements);
// cuBLAS, fp32 accumulation, all three of `type`.
void gemm_strided_batched(Context& ctx, Element type, Trans trans_a, Trans trans_b, std::int64_t m,
                          std::int64_t n, std::int64_t k, float alpha, const void* a,
                          std::int64_t lda, std::int64_t stride_a, const void* b, std::int64_t ldb,
                          std::int64_t stride_b, float beta, void* c, std::int64_t ldc,
                          std::int64_t stride_c, std::int64_t batch);

}  // namespace meshtp::gpu
