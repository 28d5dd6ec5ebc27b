#!/usr/bin/env python3
"""Runs every command the README shows, in order, as a reader would in one shell.

  scripts/check_readme_commands.py --build DIR [--sim-binary FILE] [--python-path DIR]
                                   [--readme FILE] [--self-check] [--list]

Every ```sh block is run line by line (a line ending in '\\' continues) by one bash, and every
```python block by python3, in the order the README shows them, in a fresh temporary directory
where `build` is DIR, `build-sim/src/cli/meshtp` the simulated binary, and `scripts`,
`models` and `topologies` the repository's, so what the commands write lands there and
nothing in the repository changes. PYTHONPATH is --python-path (the module just built).

Only two things are not run, each said in the output:
  - a block right after `<!-- readme_commands: skip (why) -->` (the README's two set-up
    commands: scripts/test.sh runs the test suite, this test among it, and is what CI runs);
  - `meshtp simulate` without --predict-only where there is no simulated build (build-sim/ is
    built by `scripts/install.sh --sim`, which the test command does).
A command that exits non-zero fails the test, naming the README line. --self-check first runs
a copy of the README whose first command names a topology that does not exist, and requires
that copy to fail. The ctest test `readme_commands` runs this with --self-check.
"""
import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIP = re.compile(r"<!--\s*readme_commands:\s*skip\b(.*?)-->", re.S)


def blocks(text):
    """(language, first line number, lines, skip reason or None) for each fenced block."""
    lines = text.split("\n")
    out, n, skip_reason = [], 0, None
    while n < len(lines):
        line = lines[n]
        m = re.match(r"^```(\w*)\s*$", line)
        if m and m.group(1):
            start, body = n + 1, []
            n += 1
            while n < len(lines) and not lines[n].startswith("```"):
                body.append(lines[n])
                n += 1
            out.append((m.group(1), start + 1, body, skip_reason))
            skip_reason = None
        else:
            s = SKIP.search(line)
            if s:
                skip_reason = s.group(1).strip().strip("()") or "marked skip"
            elif line.strip():
                skip_reason = None
        n += 1
    return out


def commands(start, body):
    """Logical shell lines: (README line number, text), continuations joined."""
    out, n = [], 0
    while n < len(body):
        first = n
        text = body[n]
        while text.rstrip().endswith("\\") and n + 1 < len(body):
            n += 1
            text = text.rstrip()[:-1] + " " + body[n].strip()
        n += 1
        if text.strip() and not text.strip().startswith("#"):
            out.append((start + first, text.strip()))
    return out


def needs_sim(cmd):
    return re.search(r"\bmeshtp simulate\b", cmd) and "--predict-only" not in cmd


def script_for(readme, have_sim, have_python, log):
    """One bash script running everything; each step echoes its README line first."""
    steps = ["set -eo pipefail"]
    for lang, start, body, skip in blocks(readme.read_text(encoding="utf-8")):
        if lang not in ("sh", "bash", "python"):
            continue
        if skip:
            log.append(f"README.md:{start}: {lang} block not run ({skip})")
            continue
        if lang == "python":
            if not have_python:
                log.append(f"README.md:{start}: python block not run (no --python-path)")
                continue
            steps.append(f"echo {shlex.quote(f'>>> README.md:{start}: python block')}")
            steps.append("python3 - <<'README_PYTHON_EOF'\n" + "\n".join(body) +
                         "\nREADME_PYTHON_EOF")
            continue
        for line, cmd in commands(start, body):
            if needs_sim(cmd) and not have_sim:
                log.append(f"README.md:{line}: not run (no simulated build): {cmd}")
                continue
            if cmd.startswith("python3") and not have_python:
                log.append(f"README.md:{line}: not run (no --python-path): {cmd}")
                continue
            steps.append(f"echo {shlex.quote(f'>>> README.md:{line}: {cmd}')}")
            steps.append(cmd)
    return "\n".join(steps) + "\n"


def run(readme, args):
    """Runs the README's commands; returns (ok, seconds, output)."""
    log = []
    have_sim = bool(args.sim_binary) and Path(args.sim_binary).is_file()
    have_python = bool(args.python_path) and Path(args.python_path).is_dir()
    script = script_for(readme, have_sim, have_python, log)
    if args.list:
        print(script)
        return True, 0.0, ""
    with tempfile.TemporaryDirectory(prefix="readme-commands-") as tmp:
        work = Path(tmp)
        os.symlink(Path(args.build).resolve(), work / "build")
        for name in ("scripts", "models", "topologies"):
            os.symlink(ROOT / name, work / name)
        if have_sim:
            (work / "build-sim" / "src" / "cli").mkdir(parents=True)
            os.symlink(Path(args.sim_binary).resolve(), work / "build-sim" / "src" / "cli" / "meshtp")
        env = dict(os.environ)
        if have_python:
            env["PYTHONPATH"] = str(Path(args.python_path).resolve())
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        began = time.monotonic()
        done = subprocess.run(["bash", "-c", script], cwd=work, env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL)
        seconds = time.monotonic() - began
    return done.returncode == 0, seconds, "\n".join(log + [done.stdout])


def self_check(args):
    """A damaged copy of the README (its first command's topology renamed, the rest cut)
    must fail."""
    text = (ROOT / "README.md").read_text(encoding="utf-8") if not args.readme else \
        Path(args.readme).read_text(encoding="utf-8")
    first = next((b for b in blocks(text) if b[0] == "sh" and not b[3]), None)
    if first is None:
        return "self-check: the README shows no runnable sh block"
    lang, start, body, _ = first
    cmd = commands(start, body)[0][1]
    damaged = cmd.replace("--topology ", "--topology no-such-topology-", 1)
    if damaged == cmd:
        return f"self-check: the first command ({cmd}) has no --topology to damage"
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "README.md"
        copy.write_text("```sh\n" + damaged + "\n```\n", encoding="utf-8")
        ok, _, out = run(copy, args)
    if ok:
        return f"self-check: a README copy running '{damaged}' passed: the check cannot fail"
    print(f"self-check: a README copy running '{damaged}' failed, as it must")
    return None


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default=str(ROOT / "build"))
    p.add_argument("--sim-binary", default="")
    p.add_argument("--python-path", default="")
    p.add_argument("--readme", default="")
    p.add_argument("--self-check", action="store_true")
    p.add_argument("--list", action="store_true", help="print the script, run nothing")
    args = p.parse_args()
    if args.self_check and not args.list:
        problem = self_check(args)
        if problem:
            print(problem)
            return 1
    readme = Path(args.readme) if args.readme else ROOT / "README.md"
    ok, seconds, out = run(readme, args)
    if args.list:
        return 0
    print(out.rstrip())
    if not ok:
        last = [l for l in out.split("\n") if l.startswith(">>> ")]
        print(f"FAILED: {last[-1][4:] if last else 'the first command'} (after {seconds:.1f} s)")
        return 1
    print(f"every command of {readme.name} ran ({seconds:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
