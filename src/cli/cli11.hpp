// CLI11, for every command-line file.
//
// The simulated build (SimGrid SMPI, docs/simulation.md) force-includes SMPI's helpers, which
// define exit(x) as a macro so a rank's exit ends only that simulated process; CLI11 declares a
// member App::exit(error, out, err), which that macro would mangle. The command line never
// calls exit(): it returns from main, so dropping the macro here changes nothing.
#pragma once

#ifdef exit
#undef exit
#endif

#include <CLI/CLI.hpp>
