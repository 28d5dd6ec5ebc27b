// The flags several commands share, each declared once here:
//   LayoutFlags  `train`, `block`, `bench layer`: either a plan file (--plan, as `meshtp plan
//                --out` writes it) or the layout spelled out (--strategy, --chunks,
//                --sequence-parallel, --stationary, --slices, --recompute). Giving both is an
//                error naming the flag.
//   ModelFlags   --model and the shape overrides --batch, --seq, --hidden, --heads, --layers
//                (unset: the model's value; given: an integer ≥ 1).
//   mesh_2d      the value of a 2D mesh flag (--mesh, --tp) d1xd2, checked against the ranks.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "cli/cli11.hpp"
#include "layout/plan.hpp"
#include "plan/model_spec.hpp"

namespace meshtp::cli {

struct LayoutFlags {
  std::string plan_file;
  std::string strategy = "atp";
  int chunks = 1;
  bool sequence_parallel = false;
  std::string stationary = "auto";
  int slices = 1;
  std::string recompute = "none";
  std::vector<const CLI::Option*> spelled_out;  // the flags --plan excludes

  // Registers the flags; without `with_chunks` the command lists chunks itself.
  void add_to(CLI::App* app, bool with_chunks = true);
  bool from_file() const { return !plan_file.empty(); }
  // The plan in --plan's file; throws if a spelled-out flag or one of `others` (the
  // command's mesh flags) was given as well.
  layout::Plan load(const std::vector<const CLI::Option*>& others = {}) const;
  // The layout the flags spell out, on `mesh` with `dp` replicas (validated).
  layout::Plan build(std::array<int, 2> mesh, int dp = 1) const;
};

// A command registers the shape flags it takes (ModelFlags::kBatch | …). A field's value
// before add_to is the command's default ("(default 1024)" in the help); 0 means the model's.
struct ModelFlags {
  enum Flag : unsigned { kBatch = 1, kSeq = 2, kHidden = 4, kHeads = 8, kLayers = 16 };
  explicit ModelFlags(std::string default_model = "") : model(std::move(default_model)) {}
  std::string model;
  std::int64_t batch = 0, seq = 0, hidden = 0, heads = 0, layers = 0;

  // --model (skipped when model_help is empty: then nullptr is returned, else --model) and
  // the shape flags in `which`.
  CLI::Option* add_to(CLI::App* app, unsigned which, const std::string& model_help = "");
  // spec with every non-zero field; throws naming a value above 2^24.
  plan::ModelSpec apply(plan::ModelSpec spec) const;
};

// `flag`'s value "d1xd2"; throws "--mesh 5 is not a 2D mesh: expected d1xd2, like 2x2" and,
// with ranks > 0, "--mesh 2x2 has 4 ranks but the world has 2".
std::array<int, 2> mesh_2d(const char* flag, const std::string& text, int ranks = 0);
// A mesh flag that may also say "all": every 2D mesh (d1, d2) of the ranks, d1 descending.
std::vector<std::array<int, 2>> meshes_2d(const char* flag, const std::string& text, int ranks);

}  // namespace meshtp::cli
