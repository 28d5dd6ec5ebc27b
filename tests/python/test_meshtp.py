"""The Python module `meshtp` against the CLI: every function's dict is the JSON that
`meshtp … --json` prints for the same inputs, and every error is a ValueError carrying the
message the CLI prints after "error: ". MESHTP_BIN names the CLI (tests/python/CMakeLists.txt);
PYTHONPATH finds the module just built.
"""
import json
import os
import pathlib
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
    with pytest.raises(ValueError) as error:
        call()
    assert str(error.value) == cli_error(*flags)


def test_keyword_errors_name_the_keyword():
    with pytest.raises(ValueError, match=r"meshtp.plan: unknown keyword 'explain' \(known: "
                                         r"batch, seq, strategies, chunks\)"):
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
    assert str(error.value) == cli_error(*SIMULATE, "--simulator", "/nonexistent/meshtp")
    assert "/nonexistent/meshtp" in str(error.value) or "smpirun" in str(error.value)
    with pytest.raises(ValueError, match="meshtp.simulate: unknown keyword 'trace'"):
        meshtp.simulate("torus-4x4", "atp-m1", trace="t.json")
