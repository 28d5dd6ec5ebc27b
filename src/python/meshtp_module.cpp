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
// listed for a function is a ValueError naming it. Each is read as Python means it: an integer
// is an int (not a bool) within the 32 bits the CLI takes, a flag is True or False, a list is a
// list or a tuple with something in it; `mesh` is "4x1" or [4, 1], as results give it; `plan`
// is a result's "plan" dict (what `plan --out` writes), checked against the model as `train
// --plan` checks it. Defaults are the library's (plan::PlanQuery, plan::LayoutRequest). A
// meshtp::Error is a ValueError with the CLI's message, its flags spelled as keywords
// ("devices is 16", not "--devices is 16"). The JSON is built by the libraries (plan::to_json
// and friends) and handed to Python's json.loads, so the dict is the CLI's output by
// construction.
//
// Pure: plan, topo, layout and core only — no MPI, no simulator, no drawing. What needs them
// runs the CLI as a process with the same arguments: simulate, and emit= (the framework's
// configuration, returned as the dict's "emit") or report= (a page of plots, --report DIR).
#include <fmt/format.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "core/parse.hpp"
#include "layout/plan.hpp"
#include "plan/context_parallel.hpp"
#include "plan/layout_search.hpp"
#include "plan/planner.hpp"
#include "plan/presets.hpp"
#include "plan/provenance.hpp"

namespace py = pybind11;

namespace meshtp::python {
namespace {

constexpr std::int64_t kIntMax = std::numeric_limits<int>::max();
constexpr std::int64_t kIntMin = std::numeric_limits<int>::min();

py::object to_python(const nlohmann::json& j) {
  return py::module_::import("json").attr("loads")(j.dump());
}

nlohmann::json to_json(const py::handle& value) {
  return nlohmann::json::parse(
      py::cast<std::string>(py::module_::import("json").attr("dumps")(value)));
}

std::string repr_of(const py::handle& value) { return py::cast<std::string>(py::repr(value)); }

// A library message names the CLI's flags; a Python caller gave keywords: "--devices is 16" is
// "devices is 16", "--max-tp" "max_tp". A command's flags stay: in backticks, or after a
// script or a path ("scripts/install.sh --sim").
std::string as_keywords(const std::string& message) {
  std::string out;
  bool quoted = false;
  for (std::size_t i = 0; i < message.size(); ++i) {
    const char ch = message[i];
    if (ch == '`') quoted = !quoted;
    bool command = false;  // the previous word is a script or a path
    if (i >= 2 && message[i - 1] == ' ') {
      const std::size_t space = message.rfind(' ', i - 2);
      const std::size_t from = space == std::string::npos ? 0 : space + 1;
      const std::string before = message.substr(from, i - 1 - from);
      command = before.find('/') != std::string::npos ||
                (before.size() >= 3 && before.compare(before.size() - 3, 3, ".sh") == 0);
    }
    const bool starts_flag = !quoted && !command && ch == '-' && i + 2 < message.size() &&
                             message[i + 1] == '-' && std::islower(message[i + 2]) &&
                             (i == 0 || message[i - 1] == ' ' || message[i - 1] == '(' ||
                              message[i - 1] == '\'' || message[i - 1] == '"');
    if (!starts_flag) {
      out += ch;
      continue;
    }
    std::size_t j = i + 2;
    for (; j < message.size() && (std::isalnum(message[j]) || message[j] == '-'); ++j) {
      out += message[j] == '-' ? '_' : message[j];
    }
    i = j - 1;
  }
  return out;
}

// A function's keyword arguments: only the names it lists, each read as Python means it; None
// is the same as not given (the library's default).
class Keywords {
 public:
  Keywords(std::string function, const py::kwargs& kwargs, std::vector<std::string> known)
      : function_(std::move(function)), kwargs_(kwargs), known_(std::move(known)) {
    for (const auto& [key, value] : kwargs_) {
      const std::string name = py::cast<std::string>(key);
      if (std::find(known_.begin(), known_.end(), name) == known_.end()) {
        std::string names;
        for (const std::string& k : known_) names += (names.empty() ? "" : ", ") + k;
        fail("meshtp.{}: unknown keyword '{}' (known: {})", function_, name, names);
      }
    }
  }

  const std::string& function() const { return function_; }
  const std::vector<std::string>& known() const { return known_; }
  bool given(const std::string& name) const {
    return kwargs_.contains(name) && !kwargs_[py::str(name)].is_none();
  }
  py::object raw(const std::string& name) const { return kwargs_[py::str(name)]; }

  // An int, not a bool, within [lo, hi]: "batch=True is not an integer", "dp=4294967297 is out
  // of range (an integer from … to 2147483647)".
  std::int64_t integer_of(const std::string& name, const py::handle& value, std::int64_t lo,
                          std::int64_t hi) const {
    if (py::isinstance<py::bool_>(value)) {
      fail("meshtp.{}: {}={} is a bool, not an integer", function_, name, repr_of(value));
    }
    if (!py::isinstance<py::int_>(value)) {
      fail("meshtp.{}: {}={} has the wrong type (an integer is wanted)", function_, name,
           repr_of(value));
    }
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
    if (overflow != 0 || v > hi || (v < lo && lo == kIntMin)) {
      fail("meshtp.{}: {}={} is out of range (an integer from {} to {})", function_, name,
           repr_of(value), lo, hi);
    }
    if (v < lo) fail("meshtp.{}: {}={} must be an integer ≥ {}", function_, name, v, lo);
    return v;
  }
  std::optional<std::int64_t> integer(const std::string& name, std::int64_t lo = kIntMin,
                                      std::int64_t hi = kIntMax) const {
    if (!given(name)) return std::nullopt;
    return integer_of(name, raw(name), lo, hi);
  }
  // A number, int or float (not a bool), at least `lo`: "moe_imbalance=0.5 must be ≥ 1".
  std::optional<double> number(const std::string& name, double lo) const {
    if (!given(name)) return std::nullopt;
    const py::object value = raw(name);
    if (py::isinstance<py::bool_>(value) ||
        !(py::isinstance<py::int_>(value) || py::isinstance<py::float_>(value))) {
      fail("meshtp.{}: {}={} has the wrong type (a number is wanted)", function_, name,
           repr_of(value));
    }
    const double v = py::cast<double>(value);
    if (!(v >= lo) || !std::isfinite(v)) {
      fail("meshtp.{}: {}={} must be a number ≥ {}", function_, name, repr_of(value), lo);
    }
    return v;
  }
  std::optional<bool> flag(const std::string& name) const {
    if (!given(name)) return std::nullopt;
    if (!py::isinstance<py::bool_>(raw(name))) {
      fail("meshtp.{}: {}={} has the wrong type (True or False is wanted)", function_, name,
           repr_of(raw(name)));
    }
    return py::cast<bool>(raw(name));
  }
  std::optional<std::string> text(const std::string& name) const {
    if (!given(name)) return std::nullopt;
    if (!py::isinstance<py::str>(raw(name))) {
      fail("meshtp.{}: {}={} has the wrong type (a string is wanted)", function_, name,
           repr_of(raw(name)));
    }
    return py::cast<std::string>(raw(name));
  }
  // A list keyword as the CLI's comma-separated text: "atp,tp1d" or ["atp", "tp1d"]; 4 or
  // [1, 2, 4] for numbers. An empty list (or text) is refused: leave the keyword out instead.
  std::optional<std::string> list(const std::string& name) const {
    if (!given(name)) return std::nullopt;
    const py::object value = raw(name);
    const auto item_text = [&](const py::handle& item) -> std::string {
      if (py::isinstance<py::str>(item)) return py::cast<std::string>(item);
      if (py::isinstance<py::int_>(item) && !py::isinstance<py::bool_>(item)) {
        return std::to_string(integer_of(name, item, kIntMin, kIntMax));
      }
      fail("meshtp.{}: {}={} has an item that is not a string or an integer", function_, name,
           repr_of(value));
    };
    std::string text;
    if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
      for (const py::handle item : value) text += (text.empty() ? "" : ",") + item_text(item);
    } else if (py::isinstance<py::str>(value) ||
               (py::isinstance<py::int_>(value) && !py::isinstance<py::bool_>(value))) {
      text = item_text(value);
    } else {
      fail("meshtp.{}: {}={} is not a string, an integer or a list of them", function_, name,
           repr_of(value));
    }
    if (text.empty()) {
      fail("meshtp.{}: {}={} is empty: leave it out (or None) for the default", function_, name,
           repr_of(value));
    }
    return text;
  }
  // A tensor-parallel mesh as results give it, [4, 1], or as the CLI spells it, "4x1".
  std::optional<std::string> mesh(const std::string& name) const {
    if (!given(name)) return std::nullopt;
    const py::object value = raw(name);
    if (py::isinstance<py::str>(value)) return py::cast<std::string>(value);
    if ((py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) &&
        py::len(value) == 2) {
      return fmt::format("{}x{}", integer_of(name, value[py::int_(0)], 1, kIntMax),
                         integer_of(name, value[py::int_(1)], 1, kIntMax));
    }
    fail("meshtp.{}: {}={} is not a mesh: give \"d1xd2\" or [d1, d2]", function_, name,
         repr_of(value));
  }
  // A result's "plan" dict (or what `plan --out` wrote, loaded with json.load).
  std::optional<layout::Plan> plan(const std::string& name) const {
    if (!given(name)) return std::nullopt;
    if (!py::isinstance<py::dict>(raw(name))) {
      fail("meshtp.{}: {}= must be a plan dict (a result's \"plan\"), not {}", function_, name,
           repr_of(raw(name)));
    }
    return layout::plan_from_json(to_json(raw(name)),
                                  fmt::format("meshtp.{}: {}", function_, name));
  }

 private:
  std::string function_;
  py::kwargs kwargs_;
  std::vector<std::string> known_;
};

std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The keywords that take the work to the CLI (a process): a framework's configuration and
// the report page.
const std::vector<std::string> kOutputs = {"emit", "emit_file", "report"};

int devices_of(const std::string& function, const py::handle& devices) {
  const py::kwargs none;
  return static_cast<int>(Keywords(function, none, {}).integer_of("devices", devices, 0, kIntMax));
}

// topology, model, devices and the shape and plan keywords common to every planner call; the
// defaults are plan::PlanQuery's.
plan::PlanRequest request_of(const std::string& topology, const std::string& model, int devices,
                             const Keywords& kw, bool with_chunks) {
  plan::PlanQuery query{.topology = topology, .model = model, .shape = {}, .devices = devices};
  query.shape.batch = kw.integer("batch", 1).value_or(0);  // as --batch: not given, or ≥ 1
  query.shape.seq = kw.integer("seq", 1).value_or(0);
  if (const auto s = kw.list("strategies")) query.strategies = *s;
  if (const auto c = kw.list("chunks"); c && with_chunks) query.chunks = *c;
  return plan::plan_request(query);
}

// The CLI run as a process, `meshtp <command…> --topology T --model M --devices N --json` and
// one flag per keyword given (a bool keyword: its flag alone when True; `plan`: a plan file).
// emit= adds the configuration's text to the dict as "emit". The CLI's error is a ValueError.
py::object run_cli(const std::vector<std::string>& command, const std::string& topology,
                   const std::string& model, int devices, const Keywords& kw) {
  const std::string cli = MESHTP_CLI_BINARY;
  MESHTP_CHECK(std::filesystem::exists(cli),
               "meshtp.{} runs the meshtp CLI, which is not at {}: build it (scripts/install.sh)",
               kw.function(), cli);
  if (devices == 0) devices = plan::load_topology(topology).device_count();
  const py::module_ tempfile = py::module_::import("tempfile");
  const py::object scratch = tempfile.attr("TemporaryDirectory")(py::arg("prefix") = "meshtp-");
  const std::string dir = py::cast<std::string>(scratch.attr("name"));
  py::list argv;
  argv.append(cli);
  for (const std::string& c : command) argv.append(c);
  for (const std::string& a :
       {std::string("--topology"), topology, std::string("--model"), model,
        std::string("--devices"), std::to_string(devices), std::string("--json")}) {
    argv.append(a);
  }
  std::string emit_file;
  for (const std::string& name : kw.known()) {
    if (!kw.given(name)) continue;
    std::string flag = "--" + name;
    std::replace(flag.begin(), flag.end(), '_', '-');
    const py::object value = kw.raw(name);
    if (name == "plan") {
      const std::string path = dir + "/plan.json";
      layout::save_plan(path, *kw.plan(name));
      argv.append(flag);
      argv.append(path);
    } else if (py::isinstance<py::bool_>(value)) {
      if (*kw.flag(name)) argv.append(flag);
    } else if (name == "mesh") {
      argv.append(flag);
      argv.append(*kw.mesh(name));
    } else if (py::isinstance<py::float_>(value)) {
      argv.append(flag);
      argv.append(fmt::format("{}", *kw.number(name, -std::numeric_limits<double>::infinity())));
    } else if (py::isinstance<py::int_>(value)) {
      argv.append(flag);
      argv.append(std::to_string(*kw.integer(name)));
    } else if (name == "emit_file") {
      emit_file = *kw.text(name);
      argv.append(flag);
      argv.append(emit_file);
    } else {
      argv.append(flag);
      argv.append(*kw.list(name));
    }
  }
  if (kw.given("emit") && emit_file.empty()) {
    emit_file = dir + "/emitted";
    argv.append("--emit-file");
    argv.append(emit_file);
  }
  const py::object done =
      py::module_::import("subprocess")
          .attr("run")(argv, py::arg("capture_output") = true, py::arg("text") = true);
  if (py::cast<int>(done.attr("returncode")) != 0) {
    // The CLI's message: its "error: …" line.
    const std::string err = py::cast<std::string>(done.attr("stderr"));
    const std::size_t at = err.find("error: ");
    std::string message = at == std::string::npos ? err : err.substr(at + 7);
    fail("{}", message.substr(0, message.find('\n')));
  }
  py::object result = py::module_::import("json").attr("loads")(done.attr("stdout"));
  if (kw.given("emit")) {
    result[py::str("emit")] = py::module_::import("pathlib").attr("Path")(emit_file).attr(
        "read_text")(py::arg("encoding") = "utf-8");
  }
  scratch.attr("cleanup")();
  return result;
}

bool to_cli(const Keywords& kw) {
  return std::any_of(kOutputs.begin(), kOutputs.end(),
                     [&](const std::string& k) { return kw.given(k); });
}

py::object load_topology(const std::string& preset_or_path) {
  return to_python(plan::to_json(plan::load_topology(preset_or_path)));
}

py::object plan_2d(const std::string& topology, const std::string& model,
                   const py::object& devices_arg, const py::kwargs& kwargs) {
  const Keywords kw("plan", kwargs,
                    std::vector<std::string>{"batch", "seq", "strategies", "chunks"} + kOutputs);
  const int devices = devices_of("plan", devices_arg);
  const plan::PlanRequest request = request_of(topology, model, devices, kw, true);
  if (to_cli(kw)) return run_cli({"plan"}, topology, model, devices, kw);
  return to_python(plan::to_json(plan::plan(request)));
}

py::object plan_3d(const std::string& topology, const std::string& model,
                   const py::object& devices_arg, const py::kwargs& kwargs) {
  const Keywords kw(
      "plan_3d", kwargs,
      std::vector<std::string>{"batch", "seq", "strategies", "chunks", "top", "max_tp", "runtime",
                               "max_cp", "cp_comm", "uneven_stages", "max_ep",
                               "moe_imbalance"} +
          kOutputs);
  const int devices = devices_of("plan_3d", devices_arg);
  const plan::PlanRequest base = request_of(topology, model, devices, kw, true);
  // The search's own strategies and chunks (plan::LayoutRequest's) unless given.
  plan::LayoutRequest request{
      .topology = base.topology, .model = base.model, .devices = base.devices};
  if (kw.given("strategies")) request.strategies = base.strategies;
  if (kw.given("chunks")) request.chunks = base.chunks;
  request.max_tp = static_cast<int>(kw.integer("max_tp", 1).value_or(request.max_tp));
  if (const auto r = kw.text("runtime")) request.runtime = layout::parse_runtime(*r);
  // Context parallelism and uneven stages searched (docs/long_context.md), as --3d's flags.
  request.max_cp = static_cast<int>(kw.integer("max_cp", 1).value_or(request.max_cp));
  if (const auto c = kw.text("cp_comm")) request.cp_comms = plan::parse_cp_comms(*c);
  request.uneven_stages = kw.flag("uneven_stages").value_or(request.uneven_stages);
  // Mixture of experts (docs/moe.md), as --max-ep and --moe-imbalance.
  request.max_ep = static_cast<int>(kw.integer("max_ep", 1).value_or(request.max_ep));
  request.moe_imbalance = kw.number("moe_imbalance", 1).value_or(request.moe_imbalance);
  const auto top = static_cast<std::size_t>(kw.integer("top", 1).value_or(plan::kShownLayouts));
  if (to_cli(kw)) return run_cli({"plan", "--3d"}, topology, model, devices, kw);
  return to_python(plan::to_json(plan::search_layouts(request, top), top));
}

py::object evaluate(const std::string& topology, const std::string& model,
                    const py::object& devices_arg, const py::kwargs& kwargs) {
  const std::vector<std::string> spelled = {
      "dp",           "pp",       "mesh", "strategy",  "chunks",         "sequence_parallel",
      "microbatches", "schedule", "zero", "recompute", "progress_splits",
      "cp",           "cp_comm",  "first_stage_layers", "last_stage_layers", "ep", "etp",
      "attention"};
  const Keywords kw(
      "evaluate", kwargs,
      std::vector<std::string>{"batch", "seq", "runtime", "plan", "moe_imbalance"} + spelled +
          kOutputs);
  const int devices = devices_of("evaluate", devices_arg);
  const plan::PlanRequest base = request_of(topology, model, devices, kw, false);
  const std::string where = fmt::format("the {} devices of '{}'", base.devices, base.topology.name);
  layout::Plan layout;
  if (const std::optional<layout::Plan> given = kw.plan("plan")) {
    for (const std::string& name : spelled) {
      MESHTP_CHECK(!kw.given(name),
                   "meshtp.evaluate: {} conflicts with plan=: the plan names the layout", name);
    }
    layout = *given;
    const std::string warning =
        layout::check_model_fit(layout, base.model, base.model.name, "meshtp.evaluate: plan");
    if (!warning.empty()) {
      py::module_::import("warnings").attr("warn")(warning);
    }
    layout.check_ranks(base.devices, where);
  } else {
    layout::PlanSpelling s;
    s.dp = static_cast<int>(kw.integer("dp").value_or(s.dp));
    s.pp = static_cast<int>(kw.integer("pp").value_or(s.pp));
    s.zero = static_cast<int>(kw.integer("zero").value_or(s.zero));
    s.microbatches = static_cast<int>(kw.integer("microbatches").value_or(s.microbatches));
    s.schedule = kw.text("schedule").value_or(s.schedule);
    s.strategy = kw.text("strategy").value_or(s.strategy);
    s.chunks = static_cast<int>(kw.integer("chunks").value_or(s.chunks));
    s.sequence_parallel = kw.flag("sequence_parallel").value_or(s.sequence_parallel);
    s.recompute = kw.text("recompute").value_or(s.recompute);
    s.attention = kw.text("attention").value_or(s.attention);
    s.progress_splits = static_cast<int>(kw.integer("progress_splits").value_or(s.progress_splits));
    // dp, pp and the mesh name one context slice's devices/cp ranks (as --evaluate's flags).
    const int cp = static_cast<int>(kw.integer("cp", 1).value_or(1));
    MESHTP_CHECK(base.devices % cp == 0,
                 "meshtp.evaluate: cp={}: the {} devices of '{}' do not split into cp={} groups",
                 cp, base.devices, base.topology.name, cp);
    const std::optional<std::string> mesh = kw.mesh("mesh");
    layout = layout::build_plan(s, mesh ? std::optional(mesh_2d("--mesh", *mesh)) : std::nullopt,
                                base.devices / cp,
                                cp == 1 ? where : fmt::format("{}, over cp={}", where, cp));
    layout = plan::with_context_parallel(
        layout, cp, layout::parse<layout::CpComm>(kw.text("cp_comm").value_or("ring")),
        static_cast<int>(kw.integer("first_stage_layers", 0).value_or(0)),
        static_cast<int>(kw.integer("last_stage_layers", 0).value_or(0)));
    // As `plan --3d --evaluate`: no schedule is the search's.
    if (!kw.given("schedule")) layout = plan::with_search_schedule(layout);
    layout.ep = static_cast<int>(kw.integer("ep", 1).value_or(1));
    layout.etp = static_cast<int>(kw.integer("etp", 1).value_or(0));
  }
  plan::LayoutRequest request{.topology = base.topology,
                              .model = base.model,
                              .devices = base.devices,
                              .max_cp = layout.cp,
                              .cp_comms = {layout.cp_comm},
                              .uneven_stages = layout.uneven(),
                              .moe_imbalance = kw.number("moe_imbalance", 1).value_or(1.0)};
  if (const auto r = kw.text("runtime")) request.runtime = layout::parse_runtime(*r);
  if (to_cli(kw)) return run_cli({"plan", "--3d", "--evaluate"}, topology, model, devices, kw);
  return to_python(plan::evaluation_to_json(request, plan::evaluate_layout(request, layout)));
}

// `meshtp simulate --json` run as a process: the simulation needs the runtime (MPI) and the
// simulated build (build-sim/) under smpirun, which this module does not link. Each keyword is
// the flag of its name (predict_only: --predict-only); True gives a flag alone.
py::object simulate(const std::string& topology, const std::string& model,
                    const py::object& devices_arg, const py::kwargs& kwargs) {
  const Keywords kw(
      "simulate", kwargs,
      {"mesh", "strategy", "chunks", "what", "layers", "batch", "seq", "top", "strategies",
       "predict_only", "ignore_memory", "simulator", "smpirun", "report", "plan"});
  for (const char* name : {"predict_only", "ignore_memory"}) kw.flag(name);
  for (const char* name : {"chunks", "layers", "batch", "seq", "top"}) kw.integer(name, 1);
  for (const char* name : {"strategy", "what", "simulator", "smpirun", "report"}) kw.text(name);
  kw.mesh("mesh");
  kw.list("strategies");
  return run_cli({"simulate"}, topology, model, devices_of("simulate", devices_arg), kw);
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
      PyErr_SetString(PyExc_ValueError, as_keywords(e.what()).c_str());
    }
  });
  m.def("load_topology", &load_topology, py::arg("preset_or_path"),
        "A topology preset or JSON file as `meshtp topo show X --json` prints it");
  m.def("plan", &plan_2d, py::arg("topology"), py::arg("model"), py::arg("devices") = 0,
        "Rank every tensor-parallel strategy: `meshtp plan --json` ({'candidates', 'best'}).\n"
        "Keywords: batch, seq, strategies (list or 'all'), chunks (list), emit (a framework: "
        "its configuration as the dict's 'emit'), emit_file, report (a directory)");
  m.def("plan_3d", &plan_3d, py::arg("topology"), py::arg("model"), py::arg("devices") = 0,
        "Search dp x pp x tp layouts: `meshtp plan --3d --json` ({'layouts', 'searched', "
        "'priced', 'best'}).\nKeywords: batch, seq, strategies, chunks, top, max_tp, runtime, "
        "max_cp, cp_comm ('ring,a2a'), uneven_stages, max_ep, moe_imbalance, emit, emit_file, "
        "report");
  m.def("evaluate", &evaluate, py::arg("topology"), py::arg("model"), py::arg("devices") = 0,
        "Price one layout: `meshtp plan --3d --evaluate --json` (a layout with 'fits').\n"
        "Keywords: batch, seq, runtime, plan (a result's 'plan' dict) or dp, pp, mesh ('8x1' "
        "or [8, 1]), strategy, chunks, sequence_parallel, microbatches, schedule, zero, "
        "recompute, attention, progress_splits, cp, cp_comm, first_stage_layers, "
        "last_stage_layers, ep, etp; "
        "moe_imbalance; emit, "
        "emit_file, report");
  m.def("simulate", &simulate, py::arg("topology"), py::arg("model"), py::arg("devices") = 0,
        "Run the layout on a simulated cluster: `meshtp simulate --json` (the simulated build "
        "build-sim/ and SimGrid's smpirun needed, except with predict_only=True).\n"
        "Keywords: mesh, strategy, chunks, what, layers, batch, seq, top, strategies, "
        "predict_only, ignore_memory, simulator, smpirun, report, plan");
}
