// The Python module `meshtp` (pybind11): the planner's answers as plain dicts, the same JSON
// the CLI prints with --json (docs/python.md):
//
//   meshtp.load_topology(preset_or_path)              meshtp topo show X --json
//   meshtp.plan(topology, model, devices=0, **kw)     meshtp plan --json
//   meshtp.plan_3d(topology, model, devices=0, **kw)  meshtp plan --3d --json
//   meshtp.evaluate(topology, model, devices=0, **kw) meshtp plan --3d --evaluate --json
//   meshtp.simulate(topology, model, devices=0, **kw) meshtp simulate --json, run as a process
//
// The keywords are the CLI's flags without the dashes (max_tp for --max-tp); a keyword not
// listed for a function is a ValueError naming it. devices=0 means the topology's. A
// meshtp::Error (bad preset, bad devices, a layout that cannot run) is a ValueError with the
// CLI's message. The JSON is built by the libraries (plan::to_json and friends) and handed
// to Python's json.loads, so the dict is the CLI's output by construction.
//
// Pure: plan, topo, layout and core only — no MPI, no simulator: simulate runs the CLI.
#include <fmt/format.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <filesystem>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "core/parse.hpp"
#include "layout/plan.hpp"
#include "plan/layout_search.hpp"
#include "plan/planner.hpp"
#include "plan/presets.hpp"

namespace py = pybind11;

namespace meshtp::python {
namespace {

py::object to_python(const nlohmann::json& j) {
  return py::module_::import("json").attr("loads")(j.dump());
}

// A function's keyword arguments: only the names it lists, each read with its type; None is
// the same as not given (the CLI's default).
class Keywords {
 public:
  Keywords(std::string function, const py::kwargs& kwargs, std::initializer_list<const char*> known)
      : function_(std::move(function)), kwargs_(kwargs) {
    for (const auto& [key, value] : kwargs_) {
      const std::string name = py::cast<std::string>(key);
      bool listed = false;
      for (const char* k : known) listed = listed || name == k;
      if (!listed) {
        std::string names;
        for (const char* k : known) names += fmt::format("{}{}", names.empty() ? "" : ", ", k);
        fail("meshtp.{}: unknown keyword '{}' (known: {})", function_, name, names);
      }
    }
  }

  template <typename T>
  std::optional<T> get(const char* name) const {
    if (!kwargs_.contains(name) || kwargs_[name].is_none()) return std::nullopt;
    const py::object value = kwargs_[name];
    try {
      return py::cast<T>(value);
    } catch (const py::cast_error&) {
      fail("meshtp.{}: {}={} has the wrong type", function_, name,
           py::cast<std::string>(py::repr(value)));
    }
  }

  // A list keyword as the CLI's comma-separated text: "atp,tp1d" or ["atp", "tp1d"]; 4 or
  // [1, 2, 4] for numbers.
  std::optional<std::string> list(const char* name) const {
    if (!kwargs_.contains(name) || kwargs_[name].is_none()) return std::nullopt;
    const py::object value = kwargs_[name];
    if (py::isinstance<py::bool_>(value)) {
      fail("meshtp.{}: {}={} is not a string, an integer or a list of them", function_, name,
           py::cast<std::string>(py::repr(value)));
    }
    if (py::isinstance<py::str>(value)) return py::cast<std::string>(value);
    if (py::isinstance<py::int_>(value)) return py::cast<std::string>(py::str(value));
    if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
      std::string text;
      for (const py::handle item : value) {
        if (!py::isinstance<py::str>(item) && !py::isinstance<py::int_>(item)) {
          fail("meshtp.{}: {}={} has an item that is not a string or an integer", function_, name,
               py::cast<std::string>(py::repr(value)));
        }
        text += (text.empty() ? "" : ",") + py::cast<std::string>(py::str(item));
      }
      return text;
    }
    fail("meshtp.{}: {}={} is not a string, an integer or a list of them", function_, name,
         py::cast<std::string>(py::repr(value)));
  }

 private:
  std::string function_;
  py::kwargs kwargs_;
};

// topology, model, devices and the shape and plan keywords common to every planner call.
plan::PlanRequest request_of(const std::string& topology, const std::string& model, int devices,
                             const Keywords& kw, const std::string& chunks) {
  plan::ShapeOverrides shape;  // as the CLI's --batch and --seq: not given, or ≥ 1
  shape.batch = kw.get<std::int64_t>("batch").value_or(0);
  shape.seq = kw.get<std::int64_t>("seq").value_or(0);
  MESHTP_CHECK(!kw.get<std::int64_t>("batch") || shape.batch >= 1,
               "batch={} must be an integer ≥ 1", shape.batch);
  MESHTP_CHECK(!kw.get<std::int64_t>("seq") || shape.seq >= 1, "seq={} must be an integer ≥ 1",
               shape.seq);
  return plan::plan_request({.topology = topology,
                             .model = model,
                             .shape = shape,
                             .devices = devices,
                             .strategies = kw.list("strategies").value_or("all"),
                             .chunks = chunks});
}

int at_least_one(const Keywords& kw, const char* name, int fallback) {
  const int value = kw.get<int>(name).value_or(fallback);
  MESHTP_CHECK(value >= 1, "{}={} must be an integer ≥ 1", name, value);
  return value;
}

py::object load_topology(const std::string& preset_or_path) {
  return to_python(plan::to_json(plan::load_topology(preset_or_path)));
}

py::object plan_2d(const std::string& topology, const std::string& model, int devices,
                   const py::kwargs& kwargs) {
  const Keywords kw("plan", kwargs, {"batch", "seq", "strategies", "chunks"});
  const plan::PlanRequest request =
      request_of(topology, model, devices, kw, kw.list("chunks").value_or("1,2,4"));
  return to_python(plan::to_json(plan::plan(request)));
}

py::object plan_3d(const std::string& topology, const std::string& model, int devices,
                   const py::kwargs& kwargs) {
  const Keywords kw("plan_3d", kwargs,
                    {"batch", "seq", "strategies", "chunks", "top", "max_tp", "runtime"});
  // --3d's chunks are 1 unless given; its strategies the search's (atp, tp1d) unless given.
  const plan::PlanRequest base =
      request_of(topology, model, devices, kw, kw.list("chunks").value_or("1"));
  plan::LayoutRequest request{
      .topology = base.topology,
      .model = base.model,
      .devices = base.devices,
      .chunks = base.chunks,
      .max_tp = at_least_one(kw, "max_tp", 256),
      .runtime = layout::parse_runtime(kw.get<std::string>("runtime").value_or("meshtp"))};
  if (kw.list("strategies")) request.strategies = base.strategies;
  const auto top = static_cast<std::size_t>(at_least_one(kw, "top", 10));
  return to_python(plan::to_json(plan::search_layouts(request, top), top));
}

py::object evaluate(const std::string& topology, const std::string& model, int devices,
                    const py::kwargs& kwargs) {
  const Keywords kw("evaluate", kwargs,
                    {"batch", "seq", "runtime", "dp", "pp", "mesh", "strategy", "chunks",
                     "sequence_parallel", "microbatches", "schedule", "zero", "recompute"});
  const plan::PlanRequest base = request_of(topology, model, devices, kw, "1");
  layout::PlanSpelling spelling;
  spelling.dp = kw.get<int>("dp").value_or(spelling.dp);
  spelling.pp = kw.get<int>("pp").value_or(spelling.pp);
  spelling.zero = kw.get<int>("zero").value_or(spelling.zero);
  spelling.microbatches = kw.get<int>("microbatches").value_or(spelling.microbatches);
  spelling.schedule = kw.get<std::string>("schedule").value_or(spelling.schedule);
  spelling.strategy = kw.get<std::string>("strategy").value_or(spelling.strategy);
  spelling.chunks = kw.get<int>("chunks").value_or(spelling.chunks);
  spelling.sequence_parallel =
      kw.get<bool>("sequence_parallel").value_or(spelling.sequence_parallel);
  spelling.recompute = kw.get<std::string>("recompute").value_or(spelling.recompute);
  const std::optional<std::string> mesh = kw.get<std::string>("mesh");
  // As `plan --3d --evaluate`: no mesh is (devices/(dp·pp), 1); no schedule the search's.
  layout::Plan layout = layout::build_plan(
      spelling, mesh ? std::optional(mesh_2d("--mesh", *mesh)) : std::nullopt, base.devices,
      fmt::format("the {} devices of '{}'", base.devices, base.topology.name));
  if (!kw.get<std::string>("schedule")) {
    layout.schedule = plan::search_schedule(layout.microbatches, layout.virtual_stages);
  }
  const plan::LayoutRequest request{
      .topology = base.topology,
      .model = base.model,
      .devices = base.devices,
      .runtime = layout::parse_runtime(kw.get<std::string>("runtime").value_or("meshtp"))};
  return to_python(
      plan::evaluation_to_json(plan::evaluate_layout(request, layout), base.topology.memory_gib));
}

// `meshtp simulate --json` run as a process: the simulation needs the runtime (MPI) and the
// simulated build (build-sim/) under smpirun, which this module does not link. Each keyword is
// the flag of its name (predict_only: --predict-only); True gives a flag alone.
py::object simulate(const std::string& topology, const std::string& model, int devices,
                    const py::kwargs& kwargs) {
  static constexpr std::initializer_list<const char*> kFlags = {
      "mesh", "strategy",   "chunks",       "what",          "layers",    "batch",   "seq",
      "top",  "strategies", "predict_only", "ignore_memory", "simulator", "smpirun", "report"};
  const Keywords kw("simulate", kwargs, kFlags);
  const std::string cli = MESHTP_CLI_BINARY;
  MESHTP_CHECK(std::filesystem::exists(cli),
               "meshtp.simulate runs the meshtp CLI, which is not at {}: build it "
               "(scripts/install.sh)",
               cli);
  if (devices == 0) devices = plan::load_topology(topology).device_count();
  py::list argv;
  for (const std::string& a :
       {cli, std::string("simulate"), std::string("--topology"), topology, std::string("--model"),
        model, std::string("--devices"), std::to_string(devices), std::string("--json")}) {
    argv.append(a);
  }
  for (const char* name : kFlags) {
    std::string flag = fmt::format("--{}", name);
    std::replace(flag.begin(), flag.end(), '_', '-');
    if (name == std::string_view("predict_only") || name == std::string_view("ignore_memory")) {
      if (kw.get<bool>(name).value_or(false)) argv.append(flag);
    } else if (const std::optional<std::string> value = kw.list(name)) {
      argv.append(flag);
      argv.append(*value);
    }
  }
  const py::object done =
      py::module_::import("subprocess")
          .attr("run")(argv, py::arg("capture_output") = true, py::arg("text") = true);
  if (py::cast<int>(done.attr("returncode")) != 0) {
    // The CLI's message: its "error: …" line.
    const std::string err = py::cast<std::string>(done.attr("stderr"));
    const std::size_t at = err.find("error: ");
    std::string message = at == std::string::npos ? err : err.substr(at + 7);
    message = message.substr(0, message.find('\n'));
    fail("{}", message);
  }
  return py::module_::import("json").attr("loads")(done.attr("stdout"));
}

}  // namespace
}  // namespace meshtp::python

PYBIND11_MODULE(meshtp, m) {
  using namespace meshtp::python;
  m.doc() =
      "meshtp's planner from Python: each function returns the dict the CLI prints with --json";
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const meshtp::Error& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });
  m.def("load_topology", &load_topology, py::arg("preset_or_path"),
        "A topology preset or JSON file as `meshtp topo show X --json` prints it");
  m.def("plan", &plan_2d, py::arg("topology"), py::arg("model"), py::arg("devices") = 0,
        "Rank every tensor-parallel strategy: `meshtp plan --json` ({'candidates', 'best'}).\n"
        "Keywords: batch, seq, strategies (list or 'all'), chunks (list)");
  m.def("plan_3d", &plan_3d, py::arg("topology"), py::arg("model"), py::arg("devices") = 0,
        "Search dp x pp x tp layouts: `meshtp plan --3d --json` ({'layouts', 'searched', "
        "'priced', 'best'}).\nKeywords: batch, seq, strategies, chunks, top, max_tp, runtime");
  m.def("evaluate", &evaluate, py::arg("topology"), py::arg("model"), py::arg("devices") = 0,
        "Price one layout: `meshtp plan --3d --evaluate --json` (a layout with 'fits').\n"
        "Keywords: batch, seq, runtime, dp, pp, mesh ('8x1'), strategy, chunks, "
        "sequence_parallel, microbatches, schedule, zero, recompute");
  m.def("simulate", &simulate, py::arg("topology"), py::arg("model"), py::arg("devices") = 0,
        "Run the layout on a simulated cluster: `meshtp simulate --json` (the simulated build "
        "build-sim/ and SimGrid's smpirun needed, except with predict_only=True).\n"
        "Keywords: mesh, strategy, chunks, what, layers, batch, seq, top, strategies, "
        "predict_only, ignore_memory, simulator, smpirun");
}
