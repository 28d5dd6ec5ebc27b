#!/usr/bin/env python3
"""report_plan_words.py MESHTP WORK: the 2D table's report page says what it plots (issue 48,
"Reports"). `meshtp plan --report` prices every layer of the model, forward and backward (the
CLI's `step s`), so the page must not call it one layer; and its table's compute columns must
add up to the CLI's `compute s` (which counts the elementwise ops), each row to the same
candidate of report.json. Prints "report_plan_words: ok" when both hold."""
import html
import json
import os
import re
import shutil
import subprocess
import sys

meshtp, work = sys.argv[1:3]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
out = os.path.join(work, "plan")
subprocess.run([meshtp, "plan", "--topology", "pcie-8xa100", "--model", "tiny", "--report", out],
               check=True, capture_output=True)
page = open(os.path.join(out, "index.html")).read()
report = json.load(open(os.path.join(out, "report.json")))
if "one layer" in page:
    sys.exit("report_plan_words: the page says 'one layer', but plots every layer's step")
if "every layer of the model" not in html.unescape(page):
    sys.exit("report_plan_words: the page does not say its step is every layer's")
head = [html.unescape(h) for h in re.findall(r"<th>(.*?)</th>", page)]
rows = [[html.unescape(c) for c in re.findall(r"<td>(.*?)</td>", r)]
        for r in re.findall(r"<tr><td>.*?</tr>", page)]
if "compute ms" in head:
    sys.exit(f"report_plan_words: a 'compute' column that is not the CLI's: {head}")
gemm, elementwise, step = (head.index(h) for h in
                           ("compute: GeMMs ms", "compute: elementwise ops ms", "step ms"))
valid = [c for c in report["result"]["candidates"] if c.get("valid")]
for row, c in zip(rows, valid):
    shown = float(row[gemm]) + float(row[elementwise])
    if abs(shown - 1e3 * c["t_compute_s"]) > 1e-3 * 1e3 * c["t_compute_s"] + 1e-9 or \
            abs(float(row[step]) - 1e3 * c["t_step_s"]) > 1e-3 * 1e3 * c["t_step_s"]:
        sys.exit(f"report_plan_words: row {row[:2]}: compute {shown} ms, step {row[step]} ms; "
                 f"the CLI's {1e3 * c['t_compute_s']} and {1e3 * c['t_step_s']} ms")
print(f"report_plan_words: ok ({len(rows)} rows, compute columns = the CLI's compute s)")
