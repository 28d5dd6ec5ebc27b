#!/usr/bin/env python3
"""Writes the `meshtp gemm` test inputs in this folder. Not run by the test suite.

Values are small multiples of 1/4 so every product and sum is exact in fp32: the CLI
tests can demand bit-exact agreement with the product check_product.py computes.

  os.safetensors     a [8, 16], b [16, 12]   C = A·B    m=8 n=12 k=16
  ls.safetensors     a [8, 16], b [12, 16]   C = A·Bᵀ
  rs.safetensors     a [16, 8], b [16, 12]   C = Aᵀ·B
  odd_m.safetensors  a [9, 16], b [16, 12]   m=9 does not split over 2 mesh rows
  wrong_names.safetensors  x [8, 16], y [16, 12]   no tensor called 'a'

Run from anywhere:  python3 tests/data/gemm2d/make_inputs.py
"""
import os

import safetensors_io

HERE = os.path.dirname(os.path.abspath(__file__))


def matrix(rows, cols, seed):
    return ([rows, cols],
            [((r * 7 + c * 3 + seed * 5) % 11 - 5) / 4.0 for r in range(rows) for c in range(cols)])


def main():
    files = {
        "os": {"a": matrix(8, 16, 1), "b": matrix(16, 12, 2)},
        "ls": {"a": matrix(8, 16, 1), "b": matrix(12, 16, 2)},
        "rs": {"a": matrix(16, 8, 1), "b": matrix(16, 12, 2)},
        "odd_m": {"a": matrix(9, 16, 1), "b": matrix(16, 12, 2)},
        "wrong_names": {"x": matrix(8, 16, 1), "y": matrix(16, 12, 2)},
    }
    for name, tensors in files.items():
        safetensors_io.write(os.path.join(HERE, name + ".safetensors"), tensors)


if __name__ == "__main__":
    main()
