#!/usr/bin/env python3
"""scripts/bench_perf_summary.py on hand-made raw lines with known answers.

Checks: calibrate's elementwise rate is bytes over time summed over the four LayerNorm/GeLU
kernels (not a mean of per-op speed-ups); a block-stack shape reports its best layout; every
value is the median over repeats; a target below its goal is MISSED, at or above it met.
"""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def write(path, rows):
    with open(path, 'w') as f:
        for r in rows:
            f.write(json.dumps(r) + '\n')


def check(cond, what):
    if not cond:
        sys.exit(f'FAILED: {what}')


with tempfile.TemporaryDirectory() as raw:
    ew = []
    for rep in range(3):
        # ln fwd 3 touches, ln bwd 6, gelu fwd 2, gelu bwd 5; elements 1e6 → bytes 64e6.
        # reference 10 ms each (40 ms), fast 1 ms for ln fwd and 3 ms for the others (10 ms):
        # rate ratio 4.0 exactly, while the mean of per-op speed-ups would be 5.0.
        for op, touches, fast in (('layernorm fwd', 3, 1e-3), ('layernorm bwd', 6, 3e-3),
                                  ('gelu fwd', 2, 3e-3), ('gelu bwd', 5, 3e-3),
                                  ('residual fwd', 3, 1e-3)):
            # the time of the instruction set that runs ("kernels") counts, not the others'
            ew.append({'op': op, 'touches': touches, 'elements': 1000000, 'reference_s': 0.01,
                       'portable_s': 0.02, 'avx2_s': 2 * fast, 'avx512_s': fast,
                       'kernels': 'avx512', 'max_relative_error': 1e-7})
    write(os.path.join(raw, 'elementwise.jsonl'), ew)
    layer = []
    for ratio_a, ratio_b in ((0.80, 0.95), (0.82, 0.97), (0.84, 0.99)):  # medians 0.82, 0.97
        for mesh, chunks, ratio in (([2, 1], 1, ratio_a), ([1, 2], 2, ratio_b)):
            layer.append({'np': 2, 'hidden': 512, 'seq': 256, 'batch': 4, 'mesh': mesh,
                          'chunks': chunks, 'ratio_to_blas': ratio, 'tflops_per_rank': 0.05,
                          'blas_gflops': 60.0, 'comm_wait_s': 0.1, 'step_s': 1.0,
                          'check_error': 1e-6})
    write(os.path.join(raw, 'layer.jsonl'), layer)
    write(os.path.join(raw, 'train.jsonl'),
          [{'ranks': 1, 'step_s': s, 'gflops_per_rank': 50.0, 'blas_gflops': 60.0,
            'ratio_to_blas': r, 'phases_s': {'gemm': s * 0.8, 'other': s * 0.2}}
           for s, r in ((0.5, 0.79), (0.6, 0.70), (0.4, 0.90))])
    write(os.path.join(raw, 'probe.jsonl'), [{'median_s': 0.001}, {'median_s': 0.002}])
    out = os.path.join(raw, 'summary.json')
    done = subprocess.run([sys.executable, os.path.join(ROOT, 'scripts', 'bench_perf_summary.py'),
                           raw, out], capture_output=True, text=True)
    check(done.returncode == 0, f'summariser exit {done.returncode}: {done.stderr}')
    with open(out) as f:
        s = json.load(f)

check(abs(s['elementwise_rate']['speedup'] - 4.0) < 1e-9,
      f"calibrate-rate speed-up {s['elementwise_rate']['speedup']} != 4.0")
stack = s['block_stack']
check(len(stack) == 1 and stack[0]['config'] == 'h512/s256/b4' and stack[0]['ranks'] == 2,
      f'block stack rows {stack}')
best = stack[0]['best']
check(best['mesh'] == '1x2' and best['chunks'] == 2 and abs(best['ratio_to_blas'] - 0.97) < 1e-9,
      f'best layout {best}')
check(best['ratio_range'] == [0.95, 0.99], f"range {best['ratio_range']}")
small = s['small_step'][0]
check(abs(small['ratio_to_blas'] - 0.79) < 1e-9 and abs(small['step_s'] - 0.5) < 1e-9,
      f'small step medians {small}')


def status(prefix):
    hits = [t['status'] for t in s['targets'] if t['name'].startswith(prefix)]
    check(len(hits) == 1, f"{len(hits)} targets named '{prefix}…': {s['targets']}")
    return hits[0]


check(status('block stack h512/s256/b4 2 rank(s)') == 'met', 'the block stack target')
check(status('small step 1 rank(s)') == 'MISSED', 'the small-step target')
check(status('elementwise rate (calibrate ops)') == 'met', 'the elementwise target')
check(s['probe_all_reduce_1mib_s'] == [0.001, 0.002], f"probe {s['probe_all_reduce_1mib_s']}")
print('bench_perf_summary: ok')
