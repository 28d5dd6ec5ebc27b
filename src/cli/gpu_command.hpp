// `meshtp gpu probe|gemm|calibrate` — the GPU as meshtp sees it (one process, the first GPU).
// Registered under `meshtp gpu` and, at the top level, in `meshtp-gpu`: the same commands in
// a binary that needs no MPI or BLAS library, to carry to a GPU machine without them
// (scripts/gpu-check.sh).
#pragma once

#include "cli/cli11.hpp"

namespace meshtp::cli {

// Adds probe, gemm and calibrate as subcommands of `parent` (and step and train, which say where
// they went). They print to stdout.
void add_gpu_subcommands(CLI::App& parent);

}  // namespace meshtp::cli
