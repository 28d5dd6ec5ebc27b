// Private to the comm layer: the MPI handles behind Communicator and Request, the dtype and
// reduce-op translation tables, and the validation run before every MPI call.
#pragma once

#include <mpi.h>

#include <climits>
#include <cstdint>
#include <string_view>

#include "comm/communicator.hpp"
#include "core/error.hpp"
#include "core/stats.hpp"
#include "core/trace.hpp"

namespace meshtp::comm {

struct Communicator::Impl {
  MPI_Comm handle = MPI_COMM_NULL;
  bool owned = false;  // split results are freed by us; the world is not
  int rank = 0;
  int size = 1;
  ~Impl();
};

struct Request::Impl {
  explicit Impl(const char* op_name) : name(op_name), start_s(now_seconds()) {}
  MPI_Request handle = MPI_REQUEST_NULL;
  std::function<void()> on_complete;
  const char* name;  // for the trace: the span runs from start to completion
  double start_s;
};

// The one dtype table.
template <typename T> MPI_Datatype mpi_datatype();
template <> inline MPI_Datatype mpi_datatype<float>() { return MPI_FLOAT; }
template <> inline MPI_Datatype mpi_datatype<double>() { return MPI_DOUBLE; }
template <> inline MPI_Datatype mpi_datatype<int>() { return MPI_INT; }
template <> inline MPI_Datatype mpi_datatype<std::int64_t>() { return MPI_INT64_T; }
template <> inline MPI_Datatype mpi_datatype<unsigned char>() { return MPI_UNSIGNED_CHAR; }

// The one reduce-op table.
inline MPI_Op mpi_op(ReduceOp op) { return op == ReduceOp::kSum ? MPI_SUM : MPI_MAX; }

// Throws meshtp::Error naming the call and MPI's reason when rc is not MPI_SUCCESS.
void check_mpi(int rc, std::string_view call, int group_size);

// Element counts travel as int in MPI-3.
inline int as_count(std::size_t n, std::string_view call) {
  MESHTP_CHECK(n <= static_cast<std::size_t>(INT_MAX),
               "{}: {} elements exceed MPI's int count limit", call, n);
  return static_cast<int>(n);
}

inline void check_rank(int peer, int size, std::string_view call, std::string_view role) {
  MESHTP_CHECK(peer >= 0 && peer < size, "{}: {} rank {} is outside a group of size {}", call,
               role, peer, size);
}

// Adds the lifetime of a blocking call to the communication ledger and the trace.
class LedgerScope {
 public:
  explicit LedgerScope(const char* name) : name_(name), start_(now_seconds()) {}
  ~LedgerScope() {
    const double end = now_seconds();
    comm_ledger().wait_seconds += end - start_;
    comm_ledger().calls += 1;
    Tracer::instance().record(name_, SpanKind::kComm, start_, end);
  }
  LedgerScope(const LedgerScope&) = delete;
  LedgerScope& operator=(const LedgerScope&) = delete;

 private:
  const char* name_;
  double start_;
};

// Explicit instantiation of a member template for every supported element type.
#define MESHTP_FOR_EACH_COMM_TYPE(X) \
  X(float)                           \
  X(double)                          \
  X(int)                             \
  X(std::int64_t)                    \
  X(unsigned char)

}  // namespace meshtp::comm
