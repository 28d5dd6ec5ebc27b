// `meshtp gpu probe|gemm|step|calibrate|train` — the GPU as meshtp sees it (one process, the
// first GPU).
// Registered under `meshtp gpu` and, at the top level, in `meshtp-gpu`: the same commands in
// a binary that needs no MPI or BLAS library, to carry to a GPU machine without them
// (scripts/gpu-check.sh).
#pragma once

#include "cli/cli11.hpp"

namespace meshtp::cli {

// Adds probe, gemm, step and calibrate as subcommands of `parent`. They print to stdout.
void add_gpu_subcommands(CLI::App& parent);
// Adds train (gpu_train_command.cpp): `meshtp train` on one device.
void add_gpu_train_command(CLI::App& parent);

}  // namespace meshtp::cli
