#!/usr/bin/python3
"""Summarise scripts/bench-perf.sh's raw JSON lines: every target, its measured value, met or not.

  bench_perf_summary.py RAW_DIR OUT.json

RAW_DIR holds elementwise.jsonl (bench elementwise --json, one line per op and repeat),
layer.jsonl (bench layer --json, one line per case and repeat, with "np"), train.jsonl
(bench train --json), probe.jsonl (bench collectives --json: the 1 MiB all_reduce load
probe), optionally peer.json (bench_peer.py --json) and calibrate.jsonl (one line per
calibrate run: {"binary": "baseline" or "current", "elementwise_gbps": …}) and machine.json
(the CPU, OpenBLAS's kernel core). Every value is a median over the repeats; a block-stack row
is the best layout (mesh, chunks) of its config.
"""
import json
import os
import statistics
import sys

# (rows, cols) fp32 buffers; `meshtp calibrate`'s elementwise rate is bytes / time summed over
# these four kernels (bench/calibration.cpp, measure_elementwise_rate).
CALIBRATE_OPS = ('layernorm fwd', 'layernorm bwd', 'gelu fwd', 'gelu bwd')
LAYER_CONFIGS = ((512, 256, 4), (1024, 512, 2), (256, 128, 8))


def lines(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(l) for l in f if l.startswith('{')]


def med(xs):
    return statistics.median(xs) if xs else None


def spread(xs):
    return [min(xs), max(xs)] if xs else None


def elementwise(raw):
    rows = lines(os.path.join(raw, 'elementwise.jsonl'))
    fast = lambda r: r[r["kernels"] + "_s"]  # the instruction set that runs (avx512, avx2, portable)
    per_op = {}
    for r in rows:
        per_op.setdefault(r['op'], []).append(r)
    ops = {op: {'touches': rs[0]['touches'], 'kernels': rs[0]['kernels'],
                'reference_s': med([r['reference_s'] for r in rs]),
                'fast_s': med([fast(r) for r in rs]),
                'speedup': med([r['reference_s'] / fast(r) for r in rs]),
                'max_relative_error': max(r['max_relative_error'] for r in rs)}
           for op, rs in per_op.items()}
    # calibrate's rate, both ways, per repeat (ops of one repeat share the machine's load)
    rates = {'reference': [], 'fast': []}
    for rep in range(len(per_op.get(CALIBRATE_OPS[0], []))):
        picked = [per_op[op][rep] for op in CALIBRATE_OPS]
        nbytes = sum(r['touches'] * 4 * r['elements'] for r in picked)
        rates['reference'].append(nbytes / sum(r['reference_s'] for r in picked) / 1e9)
        rates['fast'].append(nbytes / sum(fast(r) for r in picked) / 1e9)
    ratio = [f / r for f, r in zip(rates['fast'], rates['reference'])]
    return ops, {'reference_gbps': med(rates['reference']), 'fast_gbps': med(rates['fast']),
                 'speedup': med(ratio), 'speedup_range': spread(ratio)}


def calibrate(raw):
    rows = lines(os.path.join(raw, 'calibrate.jsonl'))
    if not rows:
        return None
    gbps = {b: [r['elementwise_gbps'] for r in rows if r['binary'] == b]
            for b in ('baseline', 'current')}
    return {'baseline_gbps': med(gbps['baseline']), 'current_gbps': med(gbps['current']),
            'speedup': med([c / b for c, b in zip(gbps['current'], gbps['baseline'])]),
            'speedup_range': spread([c / b for c, b in zip(gbps['current'], gbps['baseline'])]),
            'runs': len(gbps['current'])}


def layer(raw):
    rows = lines(os.path.join(raw, 'layer.jsonl'))
    out = []
    for h, s, b in LAYER_CONFIGS:
        for np in (1, 2):
            cases = {}
            for r in rows:
                if (r['hidden'], r['seq'], r['batch'], r['np']) == (h, s, b, np):
                    cases.setdefault((tuple(r['mesh']), r['chunks']), []).append(r)
            if not cases:
                continue
            summary = [{'mesh': 'x'.join(map(str, m)), 'chunks': c,
                        'ratio_to_blas': med([r['ratio_to_blas'] for r in rs]),
                        'ratio_range': spread([r['ratio_to_blas'] for r in rs]),
                        'gflops_per_rank': med([r['tflops_per_rank'] * 1e3 for r in rs]),
                        'blas_gflops': med([r['blas_gflops'] for r in rs]),
                        'comm_wait_share': med([r['comm_wait_s'] / r['step_s'] for r in rs]),
                        'check_error': max(r['check_error'] for r in rs)}
                       for (m, c), rs in cases.items()]
            best = max(summary, key=lambda x: x['ratio_to_blas'])
            out.append({'config': f'h{h}/s{s}/b{b}', 'ranks': np, 'best': best, 'cases': summary,
                        'target': 0.90 if np == 1 else 0.85})
    return out


def train(raw):
    rows = lines(os.path.join(raw, 'train.jsonl'))
    out = []
    for np in sorted({r['ranks'] for r in rows}):
        rs = [r for r in rows if r['ranks'] == np]
        phases = {k: med([r['phases_s'][k] for r in rs]) for k in rs[0]['phases_s']}
        out.append({'ranks': np, 'step_s': med([r['step_s'] for r in rs]),
                    'gflops_per_rank': med([r['gflops_per_rank'] for r in rs]),
                    'blas_gflops': med([r['blas_gflops'] for r in rs]),
                    'ratio_to_blas': med([r['ratio_to_blas'] for r in rs]),
                    'ratio_range': spread([r['ratio_to_blas'] for r in rs]),
                    'phases_s': phases, 'target': 0.80})
    return out


def main():
    raw, out_path = sys.argv[1], sys.argv[2]
    ops, rate = elementwise(raw)
    result = {'elementwise_ops': ops, 'elementwise_rate': rate, 'calibrate': calibrate(raw),
              'block_stack': layer(raw), 'small_step': train(raw), 'peer': None}
    machine_path = os.path.join(raw, 'machine.json')
    result['machine'] = json.load(open(machine_path)) if os.path.exists(machine_path) else {}
    result['machine']['kernels'] = next(iter(ops.values()))['kernels'] if ops else None
    for name in ('uptime_start', 'uptime_end'):
        p = os.path.join(raw, name)
        result[name] = open(p).read().strip() if os.path.exists(p) else None
    result['probe_all_reduce_1mib_s'] = [r['median_s'] for r in lines(os.path.join(raw, 'probe.jsonl'))]
    peer_path = os.path.join(raw, 'peer.json')
    if os.path.exists(peer_path):
        with open(peer_path) as f:
            result['peer'] = json.load(f)

    targets = []
    ok = lambda v, t: 'met' if v is not None and v >= t else 'MISSED'
    for r in result['block_stack']:
        b = r['best']
        targets.append((f"block stack {r['config']} {r['ranks']} rank(s) ({b['mesh']}, c={b['chunks']})",
                        b['ratio_to_blas'], b['ratio_range'], r['target'], '× BLAS'))
    for r in result['small_step']:
        targets.append((f"small step {r['ranks']} rank(s)", r['ratio_to_blas'], r['ratio_range'],
                        r['target'], '× BLAS'))
    if result['peer']:
        for r in result['peer']['speed']:
            targets.append((f"small step vs PyTorch, {r['ranks']} rank(s)",
                            r['pytorch_step_s'] / r['meshtp_step_s'], None, 1.5, '× faster'))
    targets.append(('elementwise rate (calibrate ops) vs naive reference',
                    rate['speedup'], rate['speedup_range'], 4.0, '×'))
    if result['calibrate']:
        targets.append(('calibrate elementwise rate vs baseline binary',
                        result['calibrate']['speedup'], result['calibrate']['speedup_range'], 4.0,
                        '×'))
    result['targets'] = [{'name': n, 'value': v, 'range': rg, 'target': t, 'status': ok(v, t)}
                         for n, v, rg, t, _ in targets]

    print('\n== summary (medians; ratios measured in the same run)')
    m = result['machine']
    print(f"machine: {m.get('cpu', '?')}, {m.get('cores', '?')} cores; elementwise kernels "
          f"{m['kernels']}; OpenBLAS kernels {m.get('openblas_core', '?')}")
    print(f"load: {result['uptime_start']} | {result['uptime_end']}; a lone 1 MiB all_reduce on "
          f"2 ranks took " + ' and '.join(f'{t * 1e3:.2f} ms' for t in result['probe_all_reduce_1mib_s'])
          + ' (start, end)')
    for r in result['small_step']:
        total = sum(r['phases_s'].values())
        print(f"small step, {r['ranks']} rank(s): " + ', '.join(
            f"{k} {100 * v / total:.0f}%" for k, v in r['phases_s'].items() if v > 0))
    print(f"{'target':<62} {'median':>7} {'range of repeats':>16} {'goal':>5}")
    for n, v, rg, t, unit in targets:
        cell = f'{rg[0]:.2f}–{rg[1]:.2f}' if rg else '-'
        print(f"{n:<62} {v:>7.3f} {cell:>16} {t:>5.2f} {unit} {ok(v, t)}")
    tmp = out_path + '.tmp'
    with open(tmp, 'w') as f:
        json.dump(result, f, indent=1)
    os.replace(tmp, out_path)
    print(f'wrote {out_path}')


if __name__ == '__main__':
    main()
