// CUDA, cuBLAS and cuBLASLt status checks: a failed call throws meshtp::Error naming the
// call, the status and where it was made. Private to src/device (needs the CUDA headers).
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "core/error.hpp"

#define MESHTP_CUDA(call)                                                                   \
  do {                                                                                      \
    const cudaError_t meshtp_status_ = (call);                                              \
    if (meshtp_status_ != cudaSuccess)                                                      \
      ::meshtp::fail("CUDA error {} ({}) in {} at {}:{}", cudaGetErrorName(meshtp_status_), \
                     cudaGetErrorString(meshtp_status_), #call, __FILE__, __LINE__);        \
  } while (0)

#define MESHTP_CUBLAS(call)                                                                      \
  do {                                                                                           \
    const cublasStatus_t meshtp_status_ = (call);                                                \
    if (meshtp_status_ != CUBLAS_STATUS_SUCCESS)                                                 \
      ::meshtp::fail("cuBLAS error {} ({}) in {} at {}:{}", cublasGetStatusName(meshtp_status_), \
                     cublasGetStatusString(meshtp_status_), #call, __FILE__, __LINE__);          \
  } while (0)
