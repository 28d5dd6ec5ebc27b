// The meshtp command line: one file per subcommand, each exposing add_<name>_command().
//
// A command registers its CLI11 subcommand and options and sets a callback. The callback
// runs on every rank; it may throw meshtp::Error (main prints `error: …` and aborts the
// whole MPI job) and prints only through out(), which is rank 0's stdout.
#pragma once

#include "cli/cli11.hpp"

#include <ostream>

#include "comm/communicator.hpp"

namespace meshtp::cli {

// The world communicator of this run (valid inside the callbacks of the commands that start
// MPI; the planner's commands run without it: runs_without_mpi).
const comm::Communicator& world();
// Whether this process is rank 0, or runs without MPI (then it is the only one).
bool root();
// The world's size; 1 without MPI.
int world_size();
// Whether the command of this command line needs no rank but this process: plan (with
// --emit and --report), topo, calibrate --from-nccl-tests and --from-step-log, the simulate
// driver, --help, --version and command lines that are errors. Those run without MPI_Init, so
// an error is one line (no MPI_ABORT banner) and Open MPI leaves no session directory in $TMPDIR. Under a
// launcher (mpirun sets OMPI_COMM_WORLD_SIZE) every command starts MPI, as before.
bool runs_without_mpi(int argc, char** argv);
// Rank 0's standard output; a stream that discards everything on the other ranks.
std::ostream& out();
// The process's exit status once the command returns (e.g. 143 after a graceful SIGTERM
// stop). Set it alike on every rank.
void set_exit_status(int status);

void add_bench_command(CLI::App& app);
void add_gemm_command(CLI::App& app);
void add_bench_gemm2d_command(CLI::App& app);  // after add_bench_command
void add_block_command(CLI::App& app);
void add_bench_layer_command(CLI::App& app);  // after add_bench_command
void add_bench_train_command(CLI::App& app);  // after add_bench_command
void add_bench_rank_command(CLI::App& app);   // after add_bench_command
void add_bench_elementwise_command(CLI::App& app);  // after add_bench_command
void add_bench_attention_command(CLI::App& app);    // after add_bench_command
void add_bench_pipeline_command(CLI::App& app);  // after add_bench_command
void add_plan_command(CLI::App& app);
void add_topo_command(CLI::App& app);
void add_calibrate_command(CLI::App& app);
void add_bench_plan_command(CLI::App& app);  // after add_bench_command
void add_train_command(CLI::App& app);
void add_simulate_command(CLI::App& app);  // simulate and the hidden simulate-run

}  // namespace meshtp::cli
