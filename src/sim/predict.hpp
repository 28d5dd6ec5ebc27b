// The planner's prediction for exactly what a simulation runs (sim/run.hpp), so `meshtp
// simulate` can print the two side by side.
//
//   layer, step   plan::evaluate of (strategy, mesh, chunks) on the model as the runtime runs
//                 it (runtime_model: the model's precision on the wire and in elementwise
//                 traffic, no recomputation, no embedding), per layer × the
//                 layers run. When the plan's slices are not the planner's tuned ones (a
//                 --slices given), each FC layer is priced at the plan's knob from the
//                 planner's own sweep. The optimizer of `step` is not priced by the planner.
//   pipeline      plan::evaluate_layout of the whole layout as meshtp runs it (the meshtp
//                 runtime: the re-run forward of every stage), with the model's vocabulary
//                 and the plan's recomputation: `plan --3d --evaluate` on this topology.
//                 Its parts (compute, exposed TP communication, bubble, point to point,
//                 data parallelism, optimizer) are in the note.
//   gemm2d        plan::gemm2d_estimate of the one GeMM
//   collectives   the ring model of each collective on each mesh dim (plan/mesh_links.hpp):
//                 what the planner assumes every collective costs
//
//   exposed communication (predicted) = total − compute: what the schedule does not hide.
#pragma once

#include <string>
#include <vector>

#include "plan/model_spec.hpp"
#include "plan/topology.hpp"
#include "sim/run.hpp"

namespace meshtp::sim {

struct Prediction {
  bool available = false;
  std::string note;  // why not available, or what differs from the simulated run
  double total_s = 0, comm_s = 0, compute_s = 0, exposed_s = 0;
  std::vector<CollectiveTime> collectives;  // collectives mode
};

// The model as the simulation runs it: its precision (RunSpec::element_bytes; the runtime
// computes in fp32 and charges the model's bytes), no recomputation, no embedding (vocab 0).
plan::ModelSpec runtime_model(plan::ModelSpec model);

// The topology as the simulation runs it: its graph (or levels) and device rates, without
// measured group bandwidths (calibration.groups). A platform has one bandwidth per link, so
// it cannot hold several measured all-reduce bandwidths that no link capacity reproduces at
// once — ATP §5.3 calibrates IC1 (pcie-8xa100) to B1 = 0.97 GB/s on mesh (8, 1) and 1.20 GB/s
// on (2, 4), whose socket link the levels price at 1.6975/4 = 0.42 GB/s for (2, 4). The
// prediction beside a simulation prices the same graph, with the modelled bandwidths, and
// prices it as a graph (Topology::rings_on_graph: each mesh dim's rings routed over the
// links, as SMPI runs them, not ATP Eq. 3's group bandwidth); the calibrated device rates
// (gemm_tflops, elementwise_gbps) are in the platform and stay. Host staging
// (Topology::host_staged) is cleared: the platform gives each level its own links, with no
// host memory the two mesh dims share.
plan::Topology simulated_topology(plan::Topology topology);

// `model` is the whole model (its layers: what the planner's step prices); spec.model.layers
// is what the simulation runs.
Prediction predict(const plan::Topology& topology, const plan::ModelSpec& model, int devices,
                   const RunSpec& spec);

}  // namespace meshtp::sim
