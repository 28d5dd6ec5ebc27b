"""The Python module `meshtp` against the CLI: every function's dict is the JSON that
`meshtp … --json` prints for the same inputs, and every error is a ValueError carrying the
message the CLI prints after "error: ". MESHTP_BIN names the CLI (tests/python/CMakeLists.txt);
PYTHONPATH finds the module just built.
"""
import json
import os
import pathlib
import re
import subprocess

import pytest

import meshtp

CLI = os.environ["MESHTP_BIN"]
TOPOLOGIES = pathlib.Path(__file__).resolve().parents[2] / "topologies"


def cli_json(*args):
    """The CLI's --json output, parsed."""
    done = subprocess.run([CLI, *args, "--json"], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def cli_error(*args):
    """The CLI's error message (its stderr's "error: …" line, without the prefix)."""
    done = subprocess.run([CLI, *args], capture_output=True, text=True)
    assert done.returncode != 0, done.stdout
    lines = [l for l in done.stderr.splitlines() if l.startswith("error: ")]
    assert lines, done.stderr
    return lines[0][len("error: "):]


def as_keywords(message):
    """The CLI's message as the module gives it: flags spelled as keywords ("--max-tp" is
    "max_tp"), except inside backticks (a command to run)."""
    parts = message.split("`")
    for i in range(0, len(parts), 2):
        parts[i] = re.sub(r"(^|[ ('\"])--([a-z][a-z0-9-]*)",
                          lambda m: m.group(0) if re.search(r"(/\S*|\.sh) $",
                                                            parts[i][:m.start(2) - 2])
                          else m.group(1) + m.group(2).replace("-", "_"), parts[i])
    return "`".join(parts)


def test_the_readme_one_liner():
    best = meshtp.plan("nvswitch-8xa100", "atp-m1", 8)["best"]
    assert best["feasible"] and best["strategy"] and best["plan"]["mesh"]


def test_plan_is_the_cli_json():
    got = meshtp.plan("nvswitch-8xa100", "atp-m1", 8)
    assert got == cli_json("plan", "--topology", "nvswitch-8xa100", "--model", "atp-m1",
                           "--devices", "8")
    assert meshtp.plan("nvswitch-8xa100", "atp-m1", batch=None, chunks=None) == got  # defaults


def test_plan_keywords_are_the_cli_flags():
    got = meshtp.plan("pcie-8xa100", "atp-m1", batch=8, seq=1024,
                      strategies=["atp", "meshslice"], chunks=[1, 2])
    assert got == cli_json("plan", "--topology", "pcie-8xa100", "--model", "atp-m1",
                           "--batch", "8", "--seq", "1024", "--strategies", "atp,meshslice",
                           "--chunks", "1,2")
    strategies = {c["strategy"] for c in got["candidates"]}
    assert "meshslice" in strategies and "wang" not in strategies and got["candidates"]


def test_plan_3d_is_the_cli_json():
    got = meshtp.plan_3d("nvswitch-8xa100", "atp-m1", 8, top=3, max_tp=4, runtime="megatron",
                         strategies=["atp", "tp1d"], chunks=[1, 2])
    assert got == cli_json("plan", "--3d", "--topology", "nvswitch-8xa100", "--model", "atp-m1",
                           "--devices", "8", "--top", "3", "--max-tp", "4", "--runtime",
                           "megatron", "--strategies", "atp,tp1d", "--chunks", "1,2")
    assert len(got["layouts"]) == 3 and got["best"] == got["layouts"][0]
    assert all(l["plan"]["mesh"][0] * l["plan"]["mesh"][1] <= 4 for l in got["layouts"])


def test_evaluate_is_the_cli_json():
    got = meshtp.evaluate("nvswitch-8xa100", "atp-m1", 8, dp=2, pp=2, mesh="2x1",
                          strategy="atp", chunks=2, microbatches=2, zero=1,
                          recompute="selective", batch=8, runtime="meshtp")
    assert got == cli_json("plan", "--3d", "--evaluate", "--topology", "nvswitch-8xa100",
                           "--model", "atp-m1", "--devices", "8", "--dp", "2", "--pp", "2",
                           "--mesh", "2x1", "--strategy", "atp", "--chunks", "2",
                           "--microbatches", "2", "--zero", "1", "--recompute", "selective",
                           "--batch", "8", "--runtime", "meshtp")
    assert got["fits"] and got["plan"]["schedule"] == "1f1b"  # no schedule: the search's


def test_evaluate_fused_attention_is_the_cli_json():
    got = meshtp.evaluate("dgx-h100-1x8", "tiny", 8, dp=2, mesh="4x1", strategy="megatron",
                          sequence_parallel=True, attention="fused", seq=32768)
    assert got == cli_json("plan", "--3d", "--evaluate", "--topology", "dgx-h100-1x8",
                           "--model", "tiny", "--devices", "8", "--dp", "2", "--mesh", "4x1",
                           "--strategy", "megatron", "--sequence-parallel", "--attention",
                           "fused", "--seq", "32768")
    assert got["plan"]["attention"] == "fused"
    unfused = meshtp.evaluate("dgx-h100-1x8", "tiny", 8, dp=2, mesh="4x1", strategy="megatron",
                              sequence_parallel=True, seq=32768)
    assert got["memory_gib"] < unfused["memory_gib"] / 10


def test_evaluate_schedule_sequence_parallel_and_no_fit():
    got = meshtp.evaluate("nvswitch-8xa100", "gpt3-175b", 8, pp=2, microbatches=4,
                          schedule="gpipe", sequence_parallel=True)
    assert got == cli_json("plan", "--3d", "--evaluate", "--topology", "nvswitch-8xa100",
                           "--model", "gpt3-175b", "--devices", "8", "--pp", "2",
                           "--microbatches", "4", "--schedule", "gpipe", "--sequence-parallel")
    assert not got["fits"] and got["does_not_fit"].startswith("does not fit: needs")
    assert got["plan"]["mesh"] == [4, 1] and got["plan"]["schedule"] == "gpipe"


def test_load_topology_of_a_preset_and_of_a_file():
    assert meshtp.load_topology("nvswitch-8xa100") == cli_json("topo", "show", "nvswitch-8xa100")
    path = str(TOPOLOGIES / "torus-4x4.json")
    got = meshtp.load_topology(path)
    assert got == cli_json("topo", "show", path)
    assert got["name"] == "torus-4x4"


@pytest.mark.parametrize("call, flags", [
    (lambda: meshtp.plan("no-such-cluster", "atp-m1"),
     ["plan", "--topology", "no-such-cluster", "--model", "atp-m1"]),
    (lambda: meshtp.plan("nvswitch-8xa100", "no-such-model"),
     ["plan", "--topology", "nvswitch-8xa100", "--model", "no-such-model"]),
    (lambda: meshtp.plan("nvswitch-8xa100", "atp-m1", 16),
     ["plan", "--topology", "nvswitch-8xa100", "--model", "atp-m1", "--devices", "16"]),
    (lambda: meshtp.plan_3d("nvswitch-8xa100", "atp-m1", strategies=["atp", "bogus"]),
     ["plan", "--3d", "--topology", "nvswitch-8xa100", "--model", "atp-m1", "--strategies",
      "atp,bogus"]),
    (lambda: meshtp.evaluate("nvswitch-8xa100", "atp-m1", mesh="4x4"),
     ["plan", "--3d", "--evaluate", "--topology", "nvswitch-8xa100", "--model", "atp-m1",
      "--mesh", "4x4"]),
    (lambda: meshtp.evaluate("nvswitch-8xa100", "atp-m1", dp=3),
     ["plan", "--3d", "--evaluate", "--topology", "nvswitch-8xa100", "--model", "atp-m1",
      "--dp", "3"]),
    (lambda: meshtp.evaluate("nvswitch-8xa100", "atp-m1", schedule="interleaved:x"),
     ["plan", "--3d", "--evaluate", "--topology", "nvswitch-8xa100", "--model", "atp-m1",
      "--schedule", "interleaved:x"]),
    (lambda: meshtp.load_topology("no-such-cluster"), ["topo", "show", "no-such-cluster"]),
])
def test_errors_are_value_errors_with_the_cli_message(call, flags):
    """The CLI's message, its flags named as the keywords the caller gave."""
    with pytest.raises(ValueError) as error:
        call()
    assert str(error.value) == as_keywords(cli_error(*flags))
    assert "--" not in str(error.value).split("`")[0]


def test_errors_name_keywords_not_flags():
    with pytest.raises(ValueError) as error:
        meshtp.plan("nvswitch-8xa100", "atp-m1", 16)
    assert "devices is 16" in str(error.value) and "--devices" not in str(error.value)
    with pytest.raises(ValueError) as error:
        meshtp.plan_3d("nvswitch-8xa100", "atp-m1", runtime="bogus")
    assert "--" not in str(error.value), str(error.value)
    with pytest.raises(ValueError) as error:
        meshtp.evaluate("nvswitch-8xa100", "atp-m1", mesh="4x4")
    assert "--" not in str(error.value), str(error.value)


def test_keyword_errors_name_the_keyword():
    with pytest.raises(ValueError, match=r"meshtp.plan: unknown keyword 'explain' \(known: "
                                         r"batch, seq, strategies, chunks, emit, emit_file, report\)"):
        meshtp.plan("nvswitch-8xa100", "atp-m1", explain=True)
    with pytest.raises(ValueError, match="meshtp.evaluate: unknown keyword 'top'"):
        meshtp.evaluate("nvswitch-8xa100", "atp-m1", top=3)
    with pytest.raises(ValueError, match=r"meshtp.evaluate: dp='2' has the wrong type"):
        meshtp.evaluate("nvswitch-8xa100", "atp-m1", dp="2")
    with pytest.raises(ValueError, match=r"meshtp.plan: chunks=\[1, 2.5\] has an item"):
        meshtp.plan("nvswitch-8xa100", "atp-m1", chunks=[1, 2.5])
    with pytest.raises(ValueError, match="top=0 must be an integer ≥ 1"):
        meshtp.plan_3d("nvswitch-8xa100", "atp-m1", top=0)
    with pytest.raises(ValueError, match="max_tp=-2 must be an integer ≥ 1"):
        meshtp.plan_3d("nvswitch-8xa100", "atp-m1", max_tp=-2)
    with pytest.raises(ValueError, match="batch=-1 must be an integer ≥ 1"):
        meshtp.evaluate("nvswitch-8xa100", "atp-m1", batch=-1)
    with pytest.raises(ValueError, match=r"meshtp.simulate: predict_only='yes' has the wrong"):
        meshtp.simulate("torus-4x4", "atp-m1", predict_only="yes")


SIMULATE = ["simulate", "--topology", "torus-4x4", "--model", "atp-m1", "--devices", "16",
            "--mesh", "4x4", "--strategy", "atp", "--what", "layer", "--layers", "1",
            "--batch", "1", "--seq", "64"]


def test_simulate_predict_only_is_the_cli_json():
    got = meshtp.simulate("torus-4x4", "atp-m1", mesh="4x4", strategy="atp", what="layer",
                          layers=1, batch=1, seq=64, predict_only=True)
    assert got == cli_json(*SIMULATE, "--predict-only")
    assert got["predict_only"] and got["runs"][0]["predicted"]["available"]


def test_simulate_report_writes_the_page(tmp_path):
    """report=DIR is the CLI's --report: DIR/report.json holds the dict returned, and the page
    beside it embeds its plots (cli_report_page opens such pages in Chromium)."""
    got = meshtp.simulate("torus-4x4", "atp-m1", mesh="4x4", strategy="atp", what="layer",
                          layers=1, batch=1, seq=64, predict_only=True,
                          report=str(tmp_path / "r"))
    written = json.loads((tmp_path / "r" / "report.json").read_text())
    assert written["report"] == "simulate" and written["result"] == got
    assert 'id="plot-step" alt=' in (tmp_path / "r" / "index.html").read_text()


@pytest.mark.skipif(not os.path.exists(os.environ.get("MESHTP_SIM_BINARY", "")),
                    reason="no simulated build (scripts/install.sh --sim)")
def test_simulate_runs_the_simulation():
    sim = os.environ["MESHTP_SIM_BINARY"]
    got = meshtp.simulate("torus-4x4", "atp-m1", mesh="4x4", strategy="atp", what="layer",
                          layers=1, batch=1, seq=64, simulator=sim)
    want = cli_json(*SIMULATE, "--simulator", sim)
    assert got["mode"] == want["mode"] and len(got["runs"]) == 1
    # Simulated time is deterministic; the simulation's own wall time is not.
    assert got["runs"][0]["simulated"] == want["runs"][0]["simulated"]
    assert got["runs"][0]["simulated"]["total_s"] > 0


def test_simulate_without_the_simulator_is_a_value_error():
    with pytest.raises(ValueError) as error:
        meshtp.simulate("torus-4x4", "atp-m1", mesh="4x4", strategy="atp", what="layer",
                        layers=1, batch=1, seq=64, simulator="/nonexistent/meshtp")
    assert str(error.value) == as_keywords(cli_error(*SIMULATE, "--simulator",
                                                     "/nonexistent/meshtp"))
    assert "/nonexistent/meshtp" in str(error.value) or "smpirun" in str(error.value)
    with pytest.raises(ValueError, match="meshtp.simulate: unknown keyword 'trace'"):
        meshtp.simulate("torus-4x4", "atp-m1", trace="t.json")


# Results feed back into the functions.

def test_mesh_as_results_give_it_or_as_the_cli_spells_it():
    best = meshtp.plan("nvswitch-8xa100", "atp-m1", 8)["best"]
    assert best["mesh"] == best["plan"]["mesh"] and isinstance(best["mesh"], list)
    as_list = meshtp.evaluate("nvswitch-8xa100", "atp-m1", 8, mesh=best["mesh"])
    as_text = meshtp.evaluate("nvswitch-8xa100", "atp-m1", 8, mesh="{}x{}".format(*best["mesh"]))
    assert as_list == as_text and as_list["plan"]["mesh"] == best["mesh"]
    assert meshtp.evaluate("nvswitch-8xa100", "atp-m1", 8, mesh=tuple(best["mesh"])) == as_list
    with pytest.raises(ValueError, match=r"mesh=\[4, 2, 1\] is not a mesh"):
        meshtp.evaluate("nvswitch-8xa100", "atp-m1", 8, mesh=[4, 2, 1])


def test_a_results_plan_is_evaluated_as_the_cli_evaluates_its_file(tmp_path):
    layouts = meshtp.plan_3d("nvswitch-8xa100", "atp-m1", 8, top=3)["layouts"]
    for row in layouts:
        again = meshtp.evaluate("nvswitch-8xa100", "atp-m1", 8, plan=row["plan"])
        assert again["t_step_s"] == pytest.approx(row["t_step_s"], rel=1e-12)
        assert again["plan"] == row["plan"]
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(layouts[0]["plan"]))
    assert meshtp.evaluate("nvswitch-8xa100", "atp-m1", 8, plan=layouts[0]["plan"]) == cli_json(
        "plan", "--3d", "--evaluate", "--topology", "nvswitch-8xa100", "--model", "atp-m1",
        "--devices", "8", "--plan", str(path))
    with pytest.raises(ValueError, match="dp conflicts with plan="):
        meshtp.evaluate("nvswitch-8xa100", "atp-m1", 8, plan=layouts[0]["plan"], dp=1)


def test_progress_splits_is_taken_and_kept():
    got = meshtp.evaluate("nvswitch-8xa100", "atp-m1", 8, mesh=[4, 2], progress_splits=2)
    assert got["plan"]["progress_splits"] == 2
    again = meshtp.evaluate("nvswitch-8xa100", "atp-m1", 8, plan=got["plan"])
    assert again["plan"]["progress_splits"] == 2


# Plans carry provenance, and a plan for another model is refused.

def test_plans_carry_their_provenance():
    shape = {"layers", "hidden", "heads", "vocab", "batch", "seq"}
    rows = [meshtp.plan("nvswitch-8xa100", "small", 8)["best"],
            meshtp.plan_3d("nvswitch-8xa100", "small", 8, top=1)["best"],
            meshtp.evaluate("nvswitch-8xa100", "small", 8, mesh="4x2")]
    for row in rows:
        p = row["plan"]["provenance"]
        assert p["topology"] == "nvswitch-8xa100" and p["model"] == "small", p
        assert set(p["model_shape"]) == shape and p["model_shape"]["vocab"] == 256
        assert p["predicted_step_s"] == pytest.approx(row["t_step_s"])
    cli = cli_json("plan", "--topology", "nvswitch-8xa100", "--model", "small", "--devices", "8")
    assert cli["best"]["plan"]["provenance"] == rows[0]["plan"]["provenance"]
    for c in cli["candidates"]:
        assert "plan" not in c or c["plan"]["provenance"]["model"] == "small"


def test_a_plan_for_another_model_is_refused(tmp_path):
    made = meshtp.plan("nvlink-network-2", "small")["best"]["plan"]
    with pytest.raises(ValueError, match=r"meshtp.evaluate: plan was made for model 'small', "
                                         r"not this one 'tiny' \(layers 4 ≠ 2, hidden 256 ≠ 64"):
        meshtp.evaluate("nvlink-network-2", "tiny", plan=made)
    # train --plan refuses the same plan, by the same check (layout::check_model_fit).
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(made))
    assert re.match(r"--plan .*plan.json was made for model 'small', not this one 'tiny'",
                    cli_error("train", "--model", "tiny", "--plan", str(path), "--steps", "1"))


def test_a_plan_for_another_vocabulary_is_refused(tmp_path):
    small = json.loads((pathlib.Path(__file__).resolve().parents[2] / "models" / "small.json")
                       .read_text())
    small.update(name="small-512", vocab=512)
    model = tmp_path / "small-512.json"
    model.write_text(json.dumps(small))
    made = meshtp.plan("nvlink-network-2", str(model))["best"]["plan"]
    assert made["provenance"]["model_shape"]["vocab"] == 512
    with pytest.raises(ValueError, match=r"not this one 'small' \(vocab 512 ≠ 256\)"):
        meshtp.evaluate("nvlink-network-2", "small", plan=made)
    # A plan made for the layers alone (vocab 0) runs under any head.
    layers_only = meshtp.plan("nvswitch-8xa100", "atp-m1", 8)["best"]["plan"]
    assert layers_only["provenance"]["model_shape"]["vocab"] == 0


# Python's types as Python means them.

@pytest.mark.parametrize("call, message", [
    (lambda: meshtp.plan("nvswitch-8xa100", "atp-m1", batch=True),
     r"meshtp.plan: batch=True is a bool, not an integer"),
    (lambda: meshtp.plan("nvswitch-8xa100", "atp-m1", True),
     r"meshtp.plan: devices=True is a bool, not an integer"),
    (lambda: meshtp.evaluate("nvswitch-8xa100", "atp-m1", dp=True),
     r"meshtp.evaluate: dp=True is a bool, not an integer"),
    (lambda: meshtp.plan_3d("nvswitch-8xa100", "atp-m1", top=False),
     r"meshtp.plan_3d: top=False is a bool, not an integer"),
    (lambda: meshtp.evaluate("nvswitch-8xa100", "atp-m1", sequence_parallel=1),
     r"meshtp.evaluate: sequence_parallel=1 has the wrong type \(True or False"),
    (lambda: meshtp.plan("nvswitch-8xa100", "atp-m1", chunks=[1, True]),
     r"meshtp.plan: chunks=\[1, True\] has an item that is not a string or an integer"),
    (lambda: meshtp.plan("nvswitch-8xa100", "atp-m1", strategies=[]),
     r"meshtp.plan: strategies=\[\] is empty: leave it out"),
    (lambda: meshtp.plan_3d("nvswitch-8xa100", "atp-m1", chunks=()),
     r"meshtp.plan_3d: chunks=\(\) is empty: leave it out"),
    (lambda: meshtp.plan("nvswitch-8xa100", "atp-m1", strategies=""),
     r"meshtp.plan: strategies='' is empty: leave it out"),
    (lambda: meshtp.plan("nvswitch-8xa100", "atp-m1", batch=2**31),
     r"meshtp.plan: batch=2147483648 is out of range \(an integer from 1 to 2147483647\)"),
    (lambda: meshtp.plan("nvswitch-8xa100", "atp-m1", 2**40),
     r"meshtp.plan: devices=1099511627776 is out of range"),
    (lambda: meshtp.evaluate("nvswitch-8xa100", "atp-m1", dp=2**64),
     r"meshtp.evaluate: dp=18446744073709551616 is out of range"),
    (lambda: meshtp.evaluate("nvswitch-8xa100", "atp-m1", zero=-2**63 - 1),
     r"meshtp.evaluate: zero=-9223372036854775809 is out of range"),
    (lambda: meshtp.plan("nvswitch-8xa100", "atp-m1", chunks=[1, 2**33]),
     r"meshtp.plan: chunks=8589934592 is out of range"),
    (lambda: meshtp.plan_3d("nvswitch-8xa100", "atp-m1", max_tp=2**31),
     r"meshtp.plan_3d: max_tp=2147483648 is out of range"),
    (lambda: meshtp.evaluate("nvswitch-8xa100", "atp-m1", plan="plan.json"),
     r"meshtp.evaluate: plan= must be a plan dict"),
])
def test_types_as_python_means_them(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# emit= and report=: the CLI's --emit and --report, from Python.

def test_emit_gives_the_frameworks_configuration(tmp_path):
    args = ("dgx-a100-8x8", "gpt3-175b")
    got = meshtp.plan_3d(*args, top=2, emit="megatron")
    text = got.pop("emit")
    # The rest is the dict of the same search priced as Megatron-LM runs a pipeline: an emitted
    # layout is chosen as its framework runs it (--emit implies --runtime megatron).
    assert got == meshtp.plan_3d(*args, top=2, runtime="megatron")
    cli = subprocess.run([CLI, "plan", "--3d", "--topology", args[0], "--model", args[1],
                          "--emit", "megatron"], capture_output=True, text=True, check=True)
    assert text == cli.stdout and "--tensor-model-parallel-size" in text
    out = tmp_path / "titan.toml"
    got = meshtp.evaluate(*args, pp=8, mesh=[8, 1], microbatches=16, emit="torchtitan",
                          emit_file=str(out))
    assert got["emit"] == out.read_text() and "[parallelism]" in got["emit"]
    got = meshtp.plan("nvswitch-8xa100", "atp-m1", 8, emit="deepspeed")
    assert json.loads("\n".join(l for l in got["emit"].splitlines() if not l.startswith("#")))
    with pytest.raises(ValueError, match="unknown framework 'bogus'"):
        meshtp.plan("nvswitch-8xa100", "atp-m1", 8, emit="bogus")


def test_report_writes_the_page(tmp_path):
    got = meshtp.plan("nvswitch-8xa100", "atp-m1", 8, report=str(tmp_path / "r"))
    assert got == meshtp.plan("nvswitch-8xa100", "atp-m1", 8)
    written = json.loads((tmp_path / "r" / "report.json").read_text())
    assert written["result"] == got
    assert (tmp_path / "r" / "index.html").stat().st_size > 0


def test_defaults_come_from_the_library():
    """The module copies no CLI default: its chunks, top, max_tp and the evaluation's schedule
    are plan::PlanQuery's, plan::LayoutRequest's and plan::with_search_schedule's."""
    source = (pathlib.Path(__file__).resolve().parents[2] / "src" / "python" /
              "meshtp_module.cpp").read_text()
    for copied in ('"1,2,4"', "plan::search_schedule(", "value_or(256)", "value_or(10)",
                   'value_or("meshtp")', 'value_or("1")'):
        assert copied not in source, copied
    assert meshtp.plan("nvswitch-8xa100", "atp-m1", 8) == cli_json(
        "plan", "--topology", "nvswitch-8xa100", "--model", "atp-m1", "--devices", "8")
    assert len(meshtp.plan_3d("nvswitch-8xa100", "atp-m1", 8)["layouts"]) == len(cli_json(
        "plan", "--3d", "--topology", "nvswitch-8xa100", "--model", "atp-m1")["layouts"])


# Context parallelism and uneven stages: the --3d search's and --evaluate's keywords, each
# result the dict the CLI prints for the same flags.

def test_context_parallel_keywords_give_the_clis_dicts():
    searched = meshtp.plan_3d("dgx-h100-2048x8", "llama3-405b", seq=131072, batch=128, max_cp=16,
                              uneven_stages=True, max_tp=8, strategies=["tp1d"], top=1,
                              runtime="megatron")
    assert searched["best"]["plan"]["cp"] > 1
    assert searched == cli_json("plan", "--3d", "--runtime", "megatron", "--topology", "dgx-h100-2048x8",
                                "--model", "llama3-405b", "--seq", "131072", "--batch", "128",
                                "--max-cp", "16", "--uneven-stages", "--max-tp", "8",
                                "--strategies", "tp1d", "--top", "1")
    one = meshtp.evaluate("dgx-h100-2x8", "llama3-8b", seq=8192, batch=16, cp=2, mesh=[8, 1],
                          runtime="megatron")
    assert one["plan"]["cp"] == 2
    assert one == cli_json("plan", "--3d", "--evaluate", "--runtime", "megatron", "--topology", "dgx-h100-2x8",
                           "--model", "llama3-8b", "--seq", "8192", "--batch", "16", "--cp", "2",
                           "--mesh", "8x1")
    with pytest.raises(ValueError, match=r"cp=3: the 16 devices of 'dgx-h100-2x8' do not split"):
        meshtp.evaluate("dgx-h100-2x8", "llama3-8b", cp=3, mesh=[8, 1])
    with pytest.raises(ValueError, match=r"unknown cp communication 'bogus'"):
        meshtp.plan_3d("dgx-h100-2x8", "llama3-8b", cp_comm="bogus")


# Mixture of experts (docs/moe.md): the --3d search's and --evaluate's keywords, each result
# the dict the CLI prints for the same flags.

def test_moe_keywords_give_the_clis_dicts():
    searched = meshtp.plan_3d("dgx-h100-2x8", "mixtral-8x7b", runtime="megatron", top=1,
                              max_ep=4, moe_imbalance=1.5)
    assert 1 < searched["best"]["plan"]["ep"] <= 4
    assert searched == cli_json("plan", "--3d", "--runtime", "megatron", "--topology",
                                "dgx-h100-2x8", "--model", "mixtral-8x7b", "--top", "1",
                                "--max-ep", "4", "--moe-imbalance", "1.5")
    one = meshtp.evaluate("dgx-h100-1x8", "mixtral-8x7b", dp=8, mesh=[1, 1], ep=8, etp=1,
                          microbatches=32, zero=1, runtime="megatron", moe_imbalance=1.25)
    assert (one["plan"]["ep"], one["plan"]["etp"]) == (8, 1)
    assert one == cli_json("plan", "--3d", "--evaluate", "--runtime", "megatron", "--topology",
                           "dgx-h100-1x8", "--model", "mixtral-8x7b", "--dp", "8", "--mesh",
                           "1x1", "--ep", "8", "--etp", "1", "--microbatches", "32", "--zero",
                           "1", "--moe-imbalance", "1.25")
    with pytest.raises(ValueError, match=r"num_experts=8 of 'mixtral-8x7b' do not split over ep=3"):
        meshtp.evaluate("dgx-h100-1x8", "mixtral-8x7b", dp=8, mesh=[1, 1], ep=3, microbatches=32)
    with pytest.raises(ValueError, match=r"moe_imbalance=0.5 must be a number ≥ 1"):
        meshtp.plan_3d("dgx-h100-1x8", "tiny-moe", moe_imbalance=0.5)
