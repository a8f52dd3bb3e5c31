"""Smoke test of an installed cuda_ext_example: the classic int64 arange, then every
declared op against its reference, bit for bit or within its declared tolerance (float32,
int64, bfloat16: each op in the dtypes it declares).

    python -m cuda_ext_example smoke-test

Runs on CUDA when a GPU is there, on the CPU otherwise. Exits non-zero on any
mismatch. Used after every release and by the Colab notebook.
"""

from __future__ import annotations

import sys

import torch

import cuda_ext_example
from cuda_ext_example.op_checks import SMOKE_SIZE, mismatches
from cuda_ext_example.ops import DECLARATIONS


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

    for dtype in (torch.float32, torch.int64, torch.bfloat16):
        wrong = mismatches(cuda_ext_example, device, dtype, n=SMOKE_SIZE)
        name = str(dtype).removeprefix("torch.")
        ops = [n for n, op in DECLARATIONS.items() if name in op["dtypes"]]
        verdict = "ok" if not wrong else f"MISMATCH {wrong}"
        print(f"{', '.join(ops)} {dtype} n={SMOKE_SIZE}: {verdict}")
        failures += len(wrong)

    print("SMOKE TEST PASSED" if failures == 0 else f"SMOKE TEST FAILED ({failures})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
