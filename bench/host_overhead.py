"""Host time per call at n=1024 (launch-bound) for the ways of calling our op,
to see where the time above torch.add goes.   python bench/host_overhead.py"""

import time

import torch

import cuda_ext_example

a = torch.randn(1024, device="cuda")
b = torch.randn(1024, device="cuda")
op = torch.ops.cuda_ext_example.my_fast_add


def below_autograd(x, y):
    with torch._C._AutoDispatchBelowAutograd():
        return op.default(x, y)


ways = {
    "torch.add": lambda: torch.add(a, b),
    "torch.ops...my_fast_add (packet)": lambda: op(a, b),
    "torch.ops...my_fast_add.default": lambda: op.default(a, b),
    "cuda_ext_example.my_fast_add": lambda: cuda_ext_example.my_fast_add(a, b),
    "op.default below autograd": lambda: below_autograd(a, b),
}
for name, fn in ways.items():
    for _ in range(200):
        fn()
    torch.cuda.synchronize()
    best = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(2000):
            fn()
        torch.cuda.synchronize()
        best.append((time.perf_counter() - start) / 2000 * 1e6)
    print(f"{name:<40} {min(best):7.2f} us/call (best of 5 x 2000)")
