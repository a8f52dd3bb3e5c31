"""Smoke test of an installed cuda_ext_example: the classic int64 arange and a float case.

    python -m cuda_ext_example smoke-test

Runs on CUDA when a GPU is there, on the CPU otherwise. Exits non-zero on any
mismatch with torch.add. Used after every release and by the Colab notebook.
"""

from __future__ import annotations

import sys

import torch

import cuda_ext_example


def main() -> int:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    print(f"cuda_ext_example {cuda_ext_example.__version__} | torch {torch.__version__} | {device}")
    if device == "cuda":
        print(f"GPU: {torch.cuda.get_device_name()}")
    failures = 0

    a = torch.arange(5, device=device)
    out = cuda_ext_example.my_add(a, a + 10)
    print(out)
    if not torch.equal(out, torch.add(a, a + 10)) or out.tolist() != [10, 12, 14, 16, 18]:
        print("MISMATCH: my_add on int64 arange")
        failures += 1

    x = torch.randn(1_000_003, device=device)
    y = torch.randn(1_000_003, device=device)
    for name in ("my_add", "my_fast_add"):
        got = getattr(cuda_ext_example, name)(x, y)
        ok = torch.equal(got, torch.add(x, y))
        print(f"{name} float32 n=1000003: {'ok' if ok else 'MISMATCH'}")
        failures += not ok

    print("SMOKE TEST PASSED" if failures == 0 else f"SMOKE TEST FAILED ({failures})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
