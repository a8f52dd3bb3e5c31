"""What `compute-sanitizer` checks (memcheck, racecheck, initcheck): every declared op
over every dtype, odd sizes, unaligned offsets and the largest sizes, each op's library (its
fatbin) loaded at the op's first call under the tool.

Inputs are made on the CPU and copied over, so initcheck sees them written.
Exits non-zero on a wrong result, or when an op's first call loaded another op's library.
"""

import sys

import torch

import cuda_ext_example
from cuda_ext_example import _C, SUPPORTED_DTYPES
from cuda_ext_example.op_checks import DECLARATIONS, reference, sample_inputs

if not torch.cuda.is_available():
    sys.exit("scripts.gpu.sanitizer_target: needs a CUDA GPU (compute-sanitizer runs it)")

SIZES = [1, 2, 7, 15, 17, 33, 1000, 4099, (1 << 20) + 3]
LARGEST = [(1 << 26) + 5]
wrong = 0
for name, op in DECLARATIONS.items():
    before = set(_C.libraries(True))
    function, ref = getattr(cuda_ext_example, name), reference(op)
    for dtype in SUPPORTED_DTYPES:
        for n in SIZES + (LARGEST if dtype in (torch.float32, torch.int8) else []):
            for offset in (0, 1, 2, 3):  # 2: 8- but not 16-byte aligned for float32
                full = sample_inputs(op, n + offset, "cpu", dtype)
                got = function(*(x.cuda()[offset:] for x in full)).cpu()
                if not torch.equal(got, ref(*(x[offset:] for x in full))):
                    print(f"WRONG {name} {dtype} n={n} offset={offset}")
                    wrong += 1
    loaded = set(_C.libraries(True)) - before
    if loaded != {name}:  # one library per op, loaded at its first call
        print(f"WRONG {name}: its first calls loaded the libraries {sorted(loaded)}")
        wrong += 1
torch.cuda.synchronize()
print(f"sanitizer target: {wrong} wrong results")
sys.exit(1 if wrong else 0)
