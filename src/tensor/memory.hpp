// What this process's tensors occupy: every Tensor's values go through StorageAllocator
// (tensor/tensor.hpp), which adds to one counter per process (= per rank) and keeps its high-water mark. Buffers
// that are not Tensors (MPI's, BLAS's, std::vectors of indices) are not counted: max_rss_bytes()
// is the operating system's view of everything, for comparison.
//
//   tensor_bytes()       bytes of tensor storage alive now
//   tensor_peak_bytes()  the most alive at once since the last reset_tensor_peak()
//   reset_tensor_peak()  peak ← current (e.g. at the start of a training run)
//   max_rss_bytes()      the process's peak resident set (getrusage), never reset
//   available_memory_bytes()  the host's MemAvailable (/proc/meminfo), 0 if unknown: what a
//                        rank's predicted memory is checked against before it runs
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>

namespace meshtp {

namespace detail {
void note_tensor_alloc(std::int64_t bytes);
void note_tensor_free(std::int64_t bytes);
}  // namespace detail

std::int64_t tensor_bytes();
std::int64_t tensor_peak_bytes();
void reset_tensor_peak();
std::int64_t max_rss_bytes();
double available_memory_bytes();

inline constexpr double kBytesPerGiB = 1024.0 * 1024.0 * 1024.0;

}  // namespace meshtp
