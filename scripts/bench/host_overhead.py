"""Where the host time of one call goes (n=1024 float32, launch-bound), layer by layer.

    python -m scripts.bench.host_overhead [--device cpu]

Each row adds one layer to the one above it, so the differences are what each layer costs:
- torch.add: torch's generated C++ binding, the bar the benchmark's host target is set by;
- a kernel launch through torch (torch.cuda._sleep(0)): what any launch costs from Python;
- aten.add through torch.ops: the torch.ops entry every custom op pays (boxed call, Python
  argument parsing), with torch's C++ autograd kernel;
- our op's C++ callable (`_op`) below autograd, guard held across the loop: the dispatcher,
  stable-ABI boxing, our input checks, allocation, stream look-up, cuLaunchKernel: the floor
  of a stable-ABI op called from Python;
- + entering the below-autograd guard per call;
- + the grad check, + the torch.func/forward-AD check, + the torch.compile check: the fast
  path of our wrapper, built up;
- cuda_ext_example.my_fast_add as shipped; the op through torch.ops (its Python autograd kernel
  of register_autograd included).
Timed as scripts/bench/benchmark.py times host calls: best of 7 interleaved rounds of 2000.
"""

from __future__ import annotations

import argparse

import torch

import cuda_ext_example
from scripts.bench.benchmark import best_host_times, time_host_calls

op = torch.ops.cuda_ext_example.my_fast_add.default
op_c = op._op
below = torch._C._AutoDispatchBelowAutograd
grad_enabled = torch.is_grad_enabled
is_compiling = torch.compiler.is_compiling
functorch_active = torch._C._are_functorch_transforms_active
forward_ad = torch.autograd.forward_ad


def guard_per_call(a, b):
    with below():
        return op_c(a, b)


def plus_grad_check(a, b):
    if grad_enabled() and (a.requires_grad or b.requires_grad):
        return op(a, b)
    with below():
        return op_c(a, b)


def plus_transforms_check(a, b):
    if grad_enabled() and (a.requires_grad or b.requires_grad):
        return op(a, b)
    if forward_ad._current_level >= 0 or functorch_active():
        return op(a, b)
    with below():
        return op_c(a, b)


def plus_compile_check(a, b):
    if is_compiling():
        return op(a, b)
    return plus_transforms_check(a, b)


def layers(device: str) -> dict:
    ways = {"torch.add": torch.add}
    if device == "cuda":
        ways["a launch through torch (torch.cuda._sleep(0))"] = lambda a, b: torch.cuda._sleep(0)
    ways |= {
        "aten.add through torch.ops": torch.ops.aten.add.Tensor,
        "+ guard per call": guard_per_call,
        "+ grad check": plus_grad_check,
        "+ torch.func / forward-AD check": plus_transforms_check,
        "+ torch.compile check": plus_compile_check,
        "cuda_ext_example.my_fast_add": cuda_ext_example.my_fast_add,
        "torch.ops...my_fast_add (Python autograd kernel)": op,
    }
    return ways


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m scripts.bench.host_overhead")
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    a = torch.randn(1024, device=args.device)
    b = torch.randn(1024, device=args.device)
    best = best_host_times(layers(args.device), a, b, calls=2000, repeats=7)
    # The floor: the op with the below-autograd guard entered once for the whole loop.
    with below():
        time_host_calls(op_c, a, b, 200)
        floor = min(time_host_calls(op_c, a, b, 2000) for _ in range(7))
    rows = list(best.items())
    rows.insert(3 if args.device == "cuda" else 2, ("our _op below autograd, guard held", floor))
    print(f"torch {torch.__version__}, device {args.device}, n=1024 float32")
    previous = None
    for name, us in rows:
        step = f"{us - previous:+6.2f}" if previous is not None and name.startswith("+") else ""
        print(f"{name:<50} {us:7.2f} us/call  {us / best['torch.add']:5.2f}x torch.add  {step}")
        previous = us


if __name__ == "__main__":
    main()
