"""What `compute-sanitizer` checks (memcheck, racecheck, initcheck): every declared op over
each of its dtypes, on its samples at sizes from one element to more than a block's
registers hold, in layouts of every kind (unaligned offsets, every element 2 apart), and for
the ops that broadcast the largest sizes and a broadcast call (the strided kernel), in-place
ops included; each op's library for a dtype (its fatbin) loaded at the op's first call in
that dtype under the tool.

Inputs are made on the CPU and copied over, so initcheck sees them written. Exits non-zero on
a wrong result, or when an op's first call in a dtype loaded another library than its own.
"""

import sys

import torch

import cuda_ext_example
from cuda_ext_example import _launch_shapes
from cuda_ext_example.op_checks import difference, reference, results, sample_arguments
from cuda_ext_example.ops import DECLARATIONS

if not torch.cuda.is_available():
    sys.exit("lab.gpu.sanitizer_target: needs a CUDA GPU (compute-sanitizer runs it)")

# From one element to more than a block's registers hold (a norm's row); the layouts at one.
SIZES = [1, 7, 33, 1000, 2047, 4099, 16384, 70000]
LAYOUT_SIZE = 4099
LARGEST = (1 << 26) + 5  # the vectorized kernel's 8-byte accesses, past 64 MiB a tensor
FUNCTIONS = {name: getattr(cuda_ext_example, name) for name in DECLARATIONS}
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


def check(name, op, args, label):
    """Ours on the GPU against the reference on the CPU (the same values)."""
    global wrong
    moved = [a.cuda() if isinstance(a, torch.Tensor) else a for a in args]
    ours = results(FUNCTIONS[name], op, moved)
    theirs = results(reference(op, FUNCTIONS), op, args)
    problem = difference(op, tuple(t.cpu() for t in ours), theirs)
    if problem:
        print(f"WRONG {name} {label}: {problem}")
        wrong += 1


def offset(t, by):
    """t's values `by` elements into their storage (no 16-byte alignment)."""
    flat = torch.zeros(t.numel() + by, dtype=t.dtype)
    flat[by:] = t.reshape(-1)
    return flat[by:].view(t.shape)


def strided(t):
    """t's values every other element of their storage."""
    holder = torch.zeros((*t.shape, 2), dtype=t.dtype)
    holder[..., 0] = t
    return holder[..., 0]


# Op names on the command line check those alone (racecheck: the ops with shared memory).
chosen = sys.argv[1:] or list(DECLARATIONS)
for name, op in ((n, DECLARATIONS[n]) for n in chosen):
    for dtype in (getattr(torch, d) for d in op["dtypes"]):
        before = set(_launch_shapes.libraries(True))
        largest = [LARGEST] if op["broadcasts"] and dtype == torch.float32 else []
        for n in SIZES + largest:
            check(name, op, sample_arguments(op, n, dtype, seed=n), f"{dtype} n={n}")
        args = sample_arguments(op, LAYOUT_SIZE, dtype)
        for by in (1, 2, 3):  # 2: 8- but not 16-byte aligned for float32
            shifted = [offset(a, by) if isinstance(a, torch.Tensor) else a for a in args]
            check(name, op, shifted, f"{dtype} offset={by}")
        check(name, op, [strided(a) if isinstance(a, torch.Tensor) else a for a in args],
              f"{dtype} strided")  # fmt: skip
        if op["broadcasts"] and len(op["outputs"]) == 1:  # the last input along the rows
            args = sample_arguments(op, 33 * 65, dtype)
            tensors = [a.view(33, 65) for a in args if isinstance(a, torch.Tensor)]
            tensors[-1] = tensors[-1][:1]
            scalars = [a for a in args if not isinstance(a, torch.Tensor)]
            check(name, op, [t.t() for t in tensors] + scalars, f"{dtype} broadcast")
        check_loaded(name, dtype, before)
torch.cuda.synchronize()
print(f"sanitizer target: {wrong} wrong results")
sys.exit(1 if wrong else 0)
