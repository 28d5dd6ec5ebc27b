#!/usr/bin/env python3
"""check_product.py INPUT OUTPUT DATAFLOW: exits 0 iff tensor 'c' of OUTPUT equals
op(a)·op(b) of INPUT exactly (os: A·B, ls: A·Bᵀ, rs: Aᵀ·B), computed here in pure Python —
an outside check of `meshtp gemm`, independent of meshtp's own code."""
import sys

import safetensors_io


def main(inp, outp, dataflow):
    t = safetensors_io.read(inp)
    (ar, ac), a = t["a"]
    (br, bc), b = t["b"]
    (cr, cc), c = safetensors_io.read(outp)["c"]
    A = lambda i, p: a[i * ac + p] if dataflow != "rs" else a[p * ac + i]
    B = lambda p, j: b[p * bc + j] if dataflow != "ls" else b[j * bc + p]
    k = ar if dataflow == "rs" else ac
    worst = 0.0
    for i in range(cr):
        for j in range(cc):
            want = sum(A(i, p) * B(p, j) for p in range(k))
            worst = max(worst, abs(want - c[i * cc + j]))
    print("c [%d, %d]: max abs difference %g" % (cr, cc, worst))
    return 0 if worst == 0.0 else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
