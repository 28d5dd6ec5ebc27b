#!/usr/bin/env python3
"""The report pages open in a browser with their plots: report_page_test.py MESHTP WORK.

Writes three pages — `meshtp plan --report`, `meshtp plan --3d --report` and, from a recorded
`meshtp simulate --report` (tests/data/report/simulate_report.json: the simulation needs
build-sim/), scripts/report.py's page of it — then loads them in headless Chromium (Debian's
chromium-headless-shell, or chromium) in one run: a checking page holds each in an iframe
(--allow-file-access-from-files makes them readable from it), and once everything has loaded
draws every <img> of each page on a canvas and counts its opaque pixels. matplotlib's PNGs
have an opaque white background, so a plot that decoded whole is opaque everywhere; a
truncated or damaged PNG still has its size but leaves pixels transparent, and garbage has
no size at all. The counts come back through --dump-dom.

Every page must show its expected plots (by id), each decoded whole. A fourth page, the plan
page with one plot's PNG cut in half, must fail the same check: the check can fail.

Exits 77 (ctest: skipped) only when no Chromium is installed.
"""
import html
import json
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SKIP = 77

CHECK_PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>report check</title></head><body>
{frames}
<pre id="meshtp-check"></pre>
<script>
window.addEventListener('load', () => {{
  const pages = [];
  for (const f of document.querySelectorAll('iframe')) {{
    const doc = f.contentDocument;
    const plots = [];
    for (const img of (doc ? doc.querySelectorAll('img') : [])) {{
      const w = img.naturalWidth, h = img.naturalHeight;
      let opaque = 0;
      if (w > 0 && h > 0) {{
        const c = document.createElement('canvas');
        c.width = w;
        c.height = h;
        const x = c.getContext('2d');
        x.drawImage(img, 0, 0);
        const px = x.getImageData(0, 0, w, h).data;
        for (let k = 3; k < px.length; k += 4) if (px[k] === 255) opaque++;
      }}
      plots.push({{id: img.id, cls: img.className, width: w, height: h, opaque}});
    }}
    pages.push({{page: f.getAttribute('src'), title: doc ? doc.title : null, plots}});
  }}
  document.getElementById('meshtp-check').textContent = JSON.stringify(pages);
}});
</script></body></html>
"""


def chromium():
    for name in ("chromium-headless-shell", "chromium"):
        path = shutil.which(name)
        if path:
            return path
    return None


def run(cmd, **kw):
    start = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, **kw)
    if done.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {done.returncode}:\n{done.stdout}{done.stderr}")
    print(f"{time.monotonic() - start:5.1f} s  {os.path.basename(cmd[0])} {' '.join(cmd[1:])}")
    return done.stdout


def report_python(script):
    """The interpreter meshtp itself would run report.py with (cli/report_dir.hpp)."""
    for python in ("python3", "/usr/bin/python3"):
        if subprocess.run([python, script, "--check"], capture_output=True).returncode == 0:
            return python
    sys.exit("FAIL: no python3 with matplotlib (python3-matplotlib)")


def load(browser, work, pages):
    """{page: [plot, …]} for each page (a path under work), from one Chromium run."""
    frames = "\n".join(f'<iframe src="{html.escape(p)}"></iframe>' for p in pages)
    check = os.path.join(work, "check.html")
    with open(check, "w") as f:
        f.write(CHECK_PAGE.format(frames=frames))
    cmd = [browser, "--headless", "--disable-gpu", "--allow-file-access-from-files",
           "--dump-dom", "file://" + check]
    if os.geteuid() == 0:
        cmd.insert(1, "--no-sandbox")  # Chromium refuses to run as root with its sandbox
    dom = run(cmd)
    m = re.search(r'<pre id="meshtp-check">(.*?)</pre>', dom, re.S)
    if not m or not m.group(1):
        sys.exit(f"FAIL: the checking page did not run its script:\n{dom[:2000]}")
    return {p["page"]: p for p in json.loads(html.unescape(m.group(1)))}


def problems(page, expected):
    """What is wrong with one page's plots (empty: nothing)."""
    out = []
    ids = [p["id"] for p in page["plots"] if p["cls"] == "plot"]
    if ids != expected:
        out.append(f"plots {ids}, expected {expected}")
    for p in page["plots"]:
        if p["width"] == 0 or p["height"] == 0:
            out.append(f"{p['id']}: did not decode (no size)")
        elif p["opaque"] != p["width"] * p["height"]:
            out.append(f"{p['id']}: decoded {p['opaque']} of {p['width'] * p['height']} pixels")
    return out


def main():
    meshtp, work = sys.argv[1], sys.argv[2]
    browser = chromium()
    if browser is None:
        print("SKIP: no chromium-headless-shell or chromium on the PATH "
              "(apt-get install chromium-headless-shell)")
        return SKIP
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    run([meshtp, "plan", "--topology", "pcie-8xa100", "--model", "atp-m1", "--devices", "8",
         "--report", os.path.join(work, "plan")])
    run([meshtp, "plan", "--3d", "--topology", "dgx-a100-8x8", "--model", "gpt3-175b",
         "--top", "6", "--json", "--report", os.path.join(work, "plan3d")])
    script = os.path.join(REPO, "scripts", "report.py")
    os.makedirs(os.path.join(work, "simulate"))
    run([report_python(script), script,
         os.path.join(REPO, "tests", "data", "report", "simulate_report.json"),
         os.path.join(work, "simulate", "index.html")])
    # The plan page with its memory plot's PNG cut in half (whole base64 quads: still PNG).
    with open(os.path.join(work, "plan", "index.html")) as f:
        text = f.read()
    start = text.index("base64,", text.index('id="plot-memory"')) + len("base64,")
    end = text.index('"', start)
    os.makedirs(os.path.join(work, "broken"))
    with open(os.path.join(work, "broken", "index.html"), "w") as f:
        f.write(text[:start] + text[start:start + (end - start) // 8 * 4] + text[end:])

    expected = {"plan/index.html": ["plot-step", "plot-memory"],
                "plan3d/index.html": ["plot-step", "plot-memory"],
                "simulate/index.html": ["plot-step", "plot-memory", "plot-reference"]}
    pages = load(browser, work, list(expected) + ["broken/index.html"])
    failed = False
    for name, plots in expected.items():
        page = pages[name]
        bad = problems(page, plots)
        print(f"{name}: '{page['title']}': "
              + ", ".join(f"{p['id']} {p['width']}x{p['height']}" for p in page["plots"])
              + (f" — FAIL: {'; '.join(bad)}" if bad else " — ok"))
        failed |= bool(bad)
    broken = problems(pages["broken/index.html"], expected["plan/index.html"])
    print("broken/index.html (memory plot cut in half): "
          + ("; ".join(broken) + " — caught, as it must be" if broken else "FAIL: not caught"))
    if failed or not broken:
        return 1
    print("every page shows its plots, decoded whole")
    return 0


if __name__ == "__main__":
    sys.exit(main())
