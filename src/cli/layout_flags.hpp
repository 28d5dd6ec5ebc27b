// The flags every command that runs a model shares, each declared once here, and the one
// resolver from them to (ModelSpec, Plan):
//   ModelFlags   --model and the shape overrides --batch, --seq, --hidden, --heads, --layers
//                (unset: the model's value; given: an integer ≥ 1; model_flags.hpp).
//   LayoutFlags  the layout, from one of
//                  --plan FILE       a plan file (as `meshtp plan --out` writes it); no other
//                                    layout flag may come with it
//                  --mesh d1xd2      the layout spelled out on this tensor-parallel mesh:
//                                    --strategy, --chunks, --sequence-parallel, --stationary,
//                                    --slices, --recompute, --progress-splits, and with
//                                    kReplicas / kPipeline --dp, --zero / --pp,
//                                    --microbatches, --schedule, kContext --cp, --cp-comm
//                  --mesh auto       (kMeshAuto) the planner chooses on --topology, among
//                                    --strategies
//                  --mesh all        (kMeshAll) every 2D mesh of the ranks, a sweep
//                  no --mesh         the spelled-out layout on (ranks/(dp·pp)) x 1: Megatron
//                                    1D over a pipeline stage's ranks
//                `--tp d1xd2` (kTpAlias) is the old spelling of --mesh: it still works and says
//                that it is deprecated.
//   meshes_2d    a mesh flag that may also say "all" (the one mesh: core/parse.hpp's mesh_2d).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "cli/cli11.hpp"
#include "cli/model_flags.hpp"
#include "layout/plan.hpp"
#include "plan/model_spec.hpp"

namespace meshtp::cli {

// The layout's fields are layout::PlanSpelling's (the one text → Plan conversion).
struct LayoutFlags : layout::PlanSpelling {
  enum Flag : unsigned {
    kMeshAuto = 1,   // --mesh auto and --topology
    kMeshAll = 2,    // --mesh all
    kReplicas = 4,   // --dp, --zero
    kPipeline = 8,   // --pp, --microbatches, --schedule
    kTpAlias = 16,   // --tp
    kNoChunks = 32,  // the command declares --chunks itself (a list, `bench layer`)
    kExperts = 64,   // --ep, --etp (a command that runs a mixture of experts)
    kContext = 128,  // --cp, --cp-comm (a command that runs context parallelism: train)
  };
  std::string plan_file;
  std::string mesh;  // d1xd2, auto, all, or empty
  std::string topology;
  std::string strategies;  // --mesh auto: the planner's choice among these (empty: all)
  std::vector<const CLI::Option*> spelled_out;  // every flag --plan excludes
  // plan --3d --evaluate prices a plan file's context parallelism and uneven stages; every
  // other command runs the plan, and resolve refuses them (layout::Plan::require_runtime).
  bool priced_only = false;
  bool runs_cp = false;  // add_to(kContext): a plan file's cp is run, not refused

  void add_to(CLI::App* app, unsigned which = 0);
  bool from_file() const { return !plan_file.empty(); }
  bool planned() const { return mesh == "auto"; }
  bool sweep() const { return mesh == "all"; }
  // Was a layout flag (not --plan, --mesh or --topology) given on the command line?
  bool given(const std::string& flag) const;

  // The one layout of these flags on `ranks` ranks: --plan's file, or the layout spelled out
  // on --mesh d1xd2 (or the default mesh). Checked against the ranks (Plan::check_ranks) and,
  // given the model it will run, a plan file against the model it was made for: other sizes
  // are an error, another batch a warning (layout::model_fit). Not for --mesh auto / all: see
  // the planner (the caller's) and meshes().
  layout::Plan resolve(int ranks, const std::string& where = "the world",
                       const plan::ModelSpec* model = nullptr) const;
  // The spelled-out layout on this tensor-parallel mesh (validated).
  layout::Plan build(std::array<int, 2> mesh) const;
  // --mesh all: every 2D mesh of the ranks (d1 descending); d1xd2: that one.
  std::vector<std::array<int, 2>> meshes(int ranks) const;
};

// A mesh flag that may also say "all": every 2D mesh (d1, d2) of the ranks, d1 descending.
std::vector<std::array<int, 2>> meshes_2d(const char* flag, const std::string& text, int ranks);

}  // namespace meshtp::cli
