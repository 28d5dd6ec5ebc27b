// Launching the simulated meshtp (the build-sim/ binary, docs/simulation.md) from the normal
// one: platform, hostfile, smpirun, result.
//
//   DIR/platform.xml, DIR/hostfile   the topology's SimGrid platform and rank placement
//                                    (plan::write_platform, topo/simgrid.hpp)
//   DIR/smpi_hostfile                the hostfile once per SMPI role: the N devices, then the
//                                    N engines of each communication stream (comm/smpi_glue.hpp)
//   DIR/spec.json                    what to run (sim/run.hpp)
//   smpirun -np N·(1+streams) -platform DIR/platform.xml -hostfile DIR/smpi_hostfile
//           <options> SIMULATOR simulate-run --spec DIR/spec.json --out DIR/result.json
//   DIR/simulation.log               smpirun's output
//
// The options (src/sim/smpirun_options.txt, with the reasons) make SimGrid charge what the
// planner prices, let meshtp charge compute, and pick the bandwidth-optimal collective
// algorithms NCCL-class libraries run.
#pragma once

#include <fmt/format.h>

#include <string>
#include <vector>

#include "core/error.hpp"

#include "plan/topology.hpp"
#include "sim/run.hpp"

namespace meshtp::sim {

struct Simulator {
  std::string binary;              // the simulated meshtp
  std::string smpirun = "smpirun";  // found on PATH unless a path is given
  int streams = 2;                 // communication engines per device
  bool values = false;             // values mode instead of charged (core/simulation.hpp)
  // Removed with the simulation's processes should meshtp die by a signal it cannot handle
  // (SIGKILL): the temporary directory the runs are in. Empty (--keep): nothing is removed.
  std::string temporary_dir;
};

// smpirun's arguments after -np/-platform/-hostfile: smpirun_options.txt's.
std::vector<std::string> smpirun_options();

// Throws meshtp::Error naming the problem when the simulation cannot start: no smpirun on the
// PATH, no simulated binary at `binary`. Call before writing anything.
void check_simulator(const Simulator& simulator);

// A stop signal (SIGINT, SIGTERM, SIGHUP) arrived during a simulation; its processes are
// gone. The caller removes what it wrote and exits 128 + signal.
struct Interrupted : Error {
  explicit Interrupted(int signal_number)
      : Error(fmt::format("interrupted by signal {}: the simulation and its processes were "
                          "ended",
                          signal_number)),
        signal(signal_number) {}
  int signal;
};

struct Launched {
  RunResult result;
  double wall_s = 0;  // the simulation's own wall time (smpirun start to exit)
  std::string log;    // DIR/simulation.log
};

// Runs `spec` on `topology`'s platform in DIR (created if missing). Throws meshtp::Error
// with SimGrid's message when the platform does not load or the simulation fails, and with
// the run's own error (e.g. a model that does not shard on the mesh).
Launched launch(const plan::Topology& topology, const RunSpec& spec, const Simulator& simulator,
                const std::string& dir);

}  // namespace meshtp::sim
