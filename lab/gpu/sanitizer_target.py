"""What `compute-sanitizer` checks (memcheck, racecheck, initcheck): every declared op
over each of its dtypes, odd sizes, unaligned offsets, the largest sizes and a broadcast call
(the strided kernel), in-place ops included, each op's library for a dtype (its fatbin)
loaded at the op's first call in that dtype under the tool; the ops that are not elementwise
over sizes from one element to rows longer than a block's registers hold (their shared-memory
reductions for racecheck).

Inputs are made on the CPU and copied over, so initcheck sees them written.
Exits non-zero on a wrong result, or when an op's first call in a dtype loaded another library
than its own.
"""

import sys

import torch

import cuda_ext_example
from cuda_ext_example import _launch_shapes
from cuda_ext_example.op_checks import (
    CUSTOM,
    DECLARATIONS,
    check_one,
    difference,
    reference,
    results,
    sample_inputs,
    scalar_samples,
)  # fmt: skip

if not torch.cuda.is_available():
    sys.exit("lab.gpu.sanitizer_target: needs a CUDA GPU (compute-sanitizer runs it)")

SIZES = [1, 2, 7, 15, 17, 33, 1000, 4099, (1 << 20) + 3]
LARGEST = [(1 << 26) + 5]
wrong = 0


def check_loaded(name, dtype, before):
    """The calls since `before` (the libraries loaded then) loaded the op's library of that
    dtype, and no other."""
    global wrong
    loaded = set(_launch_shapes.libraries(True)) - before
    own = f"{name}_{str(dtype).removeprefix('torch.')}"
    if loaded != {own}:  # one library per op and dtype, loaded at its first call
        print(f"WRONG {name} {dtype}: its first calls loaded the libraries {sorted(loaded)}")
        wrong += 1


def check(name, op, tensors, label):
    """Ours on the GPU against the reference on the CPU (the same values)."""
    global wrong
    scalars = scalar_samples(op)
    ours = results(getattr(cuda_ext_example, name), op, [t.cuda() for t in tensors], scalars)
    theirs = results(reference(op), op, tensors, scalars)
    problem = difference(op, tuple(t.cpu() for t in ours), theirs)
    if problem:
        print(f"WRONG {name} {label}: {problem}")
        wrong += 1


for name, op in DECLARATIONS.items():
    for dtype in (getattr(torch, d) for d in op["dtypes"]):
        before = set(_launch_shapes.libraries(True))
        for n in SIZES + (LARGEST if dtype in (torch.float32, torch.int8) else []):
            for offset in (0, 1, 2, 3):  # 2: 8- but not 16-byte aligned for float32
                full = sample_inputs(op, n + offset, "cpu", dtype)
                check(name, op, [x[offset:] for x in full], f"{dtype} n={n} offset={offset}")
        # The strided kernel: the last input broadcast along the rows of a (33, 65) call.
        full = [x.view(33, 65) for x in sample_inputs(op, 33 * 65, "cpu", dtype)]
        if not op["mutates"] and len(full) > 1:
            full[-1] = full[-1][:1]
        check(name, op, [x.t() if not op["mutates"] else x for x in full], f"{dtype} strided")
        check_loaded(name, dtype, before)
# The ops that are not elementwise, on their declared samples: n is their size (a row's
# length for a norm), from one element to more than a block's registers hold.
for name, op in CUSTOM.items():
    for dtype in (getattr(torch, d) for d in op["dtypes"]):
        before = set(_launch_shapes.libraries(True))
        for n in (1, 7, 300, 1024, 2047, 4095, 4099, 8192, 16384, 30000, 70000):
            problem = check_one(cuda_ext_example, name, "cuda", dtype, n)
            if problem:
                print(f"WRONG {name} {dtype} n={n}: {problem}")
                wrong += 1
        check_loaded(name, dtype, before)
torch.cuda.synchronize()
print(f"sanitizer target: {wrong} wrong results")
sys.exit(1 if wrong else 0)
