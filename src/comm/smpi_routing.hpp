// Included by mpi_impl.hpp in the simulated build only (MESHTP_SIMULATE): the comm layer's MPI
// calls that the simulated build runs differently go to comm/smpi_glue.hpp's functions —
// collectives through the devices' communication engines, MPI_COMM_WORLD = the devices.
// Everything else (point-to-point, requests, communicator queries) is SMPI's own.
#pragma once

#include "comm/smpi_glue.hpp"

#define MPI_COMM_WORLD ::meshtp::comm::smpi::device_world()
#define MPI_Init_thread ::meshtp::comm::smpi::init_thread
#define MPI_Finalize ::meshtp::comm::smpi::finalize
#define MPI_Comm_split ::meshtp::comm::smpi::comm_split
#define MPI_Comm_free ::meshtp::comm::smpi::comm_free
#define MPI_Allreduce ::meshtp::comm::smpi::blocking<::meshtp::comm::smpi::iallreduce>
#define MPI_Iallreduce ::meshtp::comm::smpi::iallreduce
#define MPI_Allgather ::meshtp::comm::smpi::blocking<::meshtp::comm::smpi::iallgather>
#define MPI_Iallgather ::meshtp::comm::smpi::iallgather
#define MPI_Reduce_scatter_block \
  ::meshtp::comm::smpi::blocking<::meshtp::comm::smpi::ireduce_scatter_block>
#define MPI_Ireduce_scatter_block ::meshtp::comm::smpi::ireduce_scatter_block
#define MPI_Bcast ::meshtp::comm::smpi::blocking<::meshtp::comm::smpi::ibcast>
#define MPI_Ibcast ::meshtp::comm::smpi::ibcast
#define MPI_Reduce ::meshtp::comm::smpi::blocking<::meshtp::comm::smpi::ireduce>
#define MPI_Alltoall ::meshtp::comm::smpi::blocking<::meshtp::comm::smpi::ialltoall>
#define MPI_Ialltoall ::meshtp::comm::smpi::ialltoall
#define MPI_Alltoallv ::meshtp::comm::smpi::blocking<::meshtp::comm::smpi::ialltoallv>
#define MPI_Ialltoallv ::meshtp::comm::smpi::ialltoallv
#define MPI_Barrier ::meshtp::comm::smpi::blocking<::meshtp::comm::smpi::ibarrier>
#define MPI_Ibarrier ::meshtp::comm::smpi::ibarrier
