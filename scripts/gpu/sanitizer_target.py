"""What `compute-sanitizer` checks (memcheck, racecheck, initcheck): both ops over
every dtype, odd sizes, unaligned offsets and the largest sizes.

Inputs are made on the CPU and copied over, so initcheck sees them written.
Exits non-zero on a wrong result.
"""

import sys

import torch

import cuda_ext_example
from cuda_ext_example import SUPPORTED_DTYPES

SIZES = [1, 2, 7, 15, 17, 33, 1000, 4099, (1 << 20) + 3]
LARGEST = [(1 << 26) + 5]
wrong = 0
for dtype in SUPPORTED_DTYPES:
    for n in SIZES + (LARGEST if dtype in (torch.float32, torch.int8) else []):
        for offset in (0, 1, 2, 3):  # 2: 8- but not 16-byte aligned for float32
            a_cpu = (torch.randn(n + offset) * 100).to(dtype)
            b_cpu = (torch.randn(n + offset) * 100).to(dtype)
            a, b = a_cpu.cuda()[offset:], b_cpu.cuda()[offset:]
            ref = torch.add(a_cpu[offset:], b_cpu[offset:])
            for op in (cuda_ext_example.my_add, cuda_ext_example.my_fast_add):
                if not torch.equal(op(a, b).cpu(), ref):
                    print(f"WRONG {op.__name__} {dtype} n={n} offset={offset}")
                    wrong += 1
torch.cuda.synchronize()
print(f"sanitizer target: {wrong} wrong results")
sys.exit(1 if wrong else 0)
