// The simulated build's MPI (SimGrid SMPI, MESHTP_SIMULATE), private to the comm layer. The
// comm layer's code is unchanged: in that build mpi_impl.hpp includes smpi_routing.hpp, whose
// macros route the calls that must behave differently under simulation to the functions here,
// which call SMPI's own (PMPI_) entry points.
//
// Why: SMPI runs every collective algorithm it has for the BLOCKING calls (ring, recursive
// doubling, …, chosen with --cfg=smpi/<collective>:<algorithm>), but its non-blocking
// collectives are one naive algorithm each — MPI_Iallreduce sends the whole buffer to every
// other rank, (P−1)·n bytes instead of the ring's 2(P−1)/P·n — and it allocates and reduces
// real buffers for them. A device with a communication engine (NCCL on its own stream, a TPU's
// ICI DMA) runs the library's bandwidth-optimal algorithm while the device computes. So the
// simulated build gives every device `streams` communication engines:
//
//   smpirun -np N·(1 + streams), one host per device listed 1 + streams times:
//     SMPI ranks [0, N)                    the devices: run meshtp (their world is these N)
//     SMPI ranks [(s+1)·N, (s+2)·N)        engine of stream s for device (rank mod N)
//
//   device d, MPI_Iallreduce(buf, comm)    → command {allreduce, buf, engine's copy of comm}
//                                            to its engine, request = receive of the engine's
//                                            completion message (MPI_Test / MPI_Wait as usual)
//   engine, on the command                 → waits T_launch (the platform's launch cost of one
//                                            collective call, smpi_device.hpp), then
//                                            PMPI_Allreduce(buf, …) on its copy of comm, among
//                                            the same streams' engines of the comm's devices,
//                                            then sends the completion
//
// All ranks share one address space under SMPI, so the engine reads and writes the device's
// own buffers: values are exact (values mode) and nothing is copied. Blocking collectives go
// through the engine too (start + wait), so the collectives of one communicator keep MPI's
// order. Each communicator is served by one stream (chosen round-robin by creation, agreed by
// its members), so collectives on different mesh dims overlap like separate NCCL
// communicators. Communicator creation (split, free) is mirrored by every engine. Point-to-
// point calls are SMPI's own, on the device's communicators.
//
// Commands and completions travel between a device and its engines on the same simulated
// host (loopback: no network time). In charged mode (core/simulation.hpp) engines reduce
// large buffers with a no-op and SMPI skips copying large messages: values are meaningless
// there and only the simulated time counts.
#pragma once

#include <mpi.h>

namespace meshtp::comm::smpi {

MPI_Comm device_world();  // the N devices: what meshtp calls MPI_COMM_WORLD

int init_thread(int* argc, char*** argv, int required, int* provided);
int finalize();
int comm_split(MPI_Comm comm, int color, int key, MPI_Comm* out);
int comm_free(MPI_Comm* comm);

// The collectives, non-blocking: each hands the call to the engine serving `comm`; `request`
// completes when the engine is done.
int iallreduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op,
               MPI_Comm comm, MPI_Request* request);
int iallgather(const void* send, int send_count, MPI_Datatype send_type, void* recv,
               int recv_count, MPI_Datatype recv_type, MPI_Comm comm, MPI_Request* request);
int ireduce_scatter_block(const void* send, void* recv, int count, MPI_Datatype type,
                          MPI_Op op, MPI_Comm comm, MPI_Request* request);
int ibcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm,
           MPI_Request* request);
int ireduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, int root,
            MPI_Comm comm, MPI_Request* request);
int ialltoall(const void* send, int send_count, MPI_Datatype send_type, void* recv,
              int recv_count, MPI_Datatype recv_type, MPI_Comm comm, MPI_Request* request);
int ialltoallv(const void* send, const int* send_counts, const int* send_displs,
               MPI_Datatype send_type, void* recv, const int* recv_counts, const int* recv_displs,
               MPI_Datatype recv_type, MPI_Comm comm, MPI_Request* request);
int ibarrier(MPI_Comm comm, MPI_Request* request);

// The datatype a message of `count` elements of `type` travels as. The runtime holds fp32, a
// simulated fp16/bf16 model sends 2 bytes per element (MESHTP_SIM_ELEMENT_BYTES=2): in
// charged mode a float message whose 2-byte size count·2 reaches kNoCopyBytes (values
// meaningless, core/simulation.hpp) travels as `count` MPI_UINT16_T, half the bytes, as the
// planner prices it. Otherwise `type`. Both ends of a message decide from the count alone, so
// they agree. Point-to-point calls (mpi_impl.hpp wire_type) and the engines' collectives use it.
MPI_Datatype wire_type(MPI_Datatype type, int count);

// A blocking collective: its non-blocking form, then the wait. blocking<iallreduce>(send, recv,
// count, type, op, comm) is MPI_Allreduce's.
template <auto start_collective, class... Args>
int blocking(Args... args) {
  MPI_Request request = MPI_REQUEST_NULL;
  start_collective(args..., &request);
  return PMPI_Wait(&request, MPI_STATUS_IGNORE);
}

}  // namespace meshtp::comm::smpi
