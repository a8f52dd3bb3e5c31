"""Host time per call at n=1024 (launch-bound) for the ways of calling our op, to see
where the time above torch.add goes.   python -m scripts.bench.host_overhead [--device cpu]

The rows, from the floor up:
- torch.add, and aten.add through torch.ops: what any op pays for the torch.ops entry;
- `_op`: the C++ callable behind an OpOverload (no Python frame of torch's);
- "below autograd, guard held": the dispatcher + our kernel only (the floor for our op);
- the op through torch.ops (Python autograd kernel of register_autograd included);
- cuda_ext_example.my_fast_add, and other ways its wrapper could call the op.
Every way is timed as scripts/bench/benchmark.py times host calls: best of 7 interleaved rounds
of 2000 calls.
"""

import argparse

import torch

import cuda_ext_example
from scripts.bench.benchmark import best_host_times, time_host_calls

op = torch.ops.cuda_ext_example.my_fast_add.default
op_c = op._op
aten_add = torch.ops.aten.add.Tensor
below = torch._C._AutoDispatchBelowAutograd


def below_autograd(x, y):
    with below():
        return op(x, y)


def candidate_direct(x, y):
    # the OpOverload, Python autograd kernel included
    return op(x, y)


def previous_wrapper(x, y):
    # cuda_ext_example 0.1.0 before change 8: type checks first, guard, OpOverload
    if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor):
        raise TypeError("expected two torch.Tensor arguments")
    if torch.compiler.is_compiling() or (
        torch.is_grad_enabled() and (x.requires_grad or y.requires_grad)
    ):
        return op(x, y)
    with torch._C._AutoDispatchBelowAutograd():
        return torch.ops.cuda_ext_example.my_fast_add.default(x, y)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m scripts.bench.host_overhead")
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    a = torch.randn(1024, device=args.device)
    b = torch.randn(1024, device=args.device)
    ways = {
        "torch.add": torch.add,
        "torch.ops.aten.add.Tensor": aten_add,
        "torch.ops.aten.add.Tensor._op": aten_add._op,
        "torch.ops...my_fast_add.default": op,
        "torch.ops...my_fast_add.default._op": op_c,
        "op.default below autograd": below_autograd,
        "cuda_ext_example.my_fast_add": cuda_ext_example.my_fast_add,
        "candidate: direct OpOverload": candidate_direct,
        "previous wrapper (before change 8)": previous_wrapper,
    }
    best = best_host_times(ways, a, b, calls=2000, repeats=7)
    # The floor: the op with the below-autograd guard entered once for the whole loop.
    with below():
        time_host_calls(op_c, a, b, 200)
        held = min(time_host_calls(op_c, a, b, 2000) for _ in range(7))

    print(f"torch {torch.__version__}, device {args.device}, n=1024 float32")
    for name, us in best.items():
        print(f"{name:<40} {us:7.2f} us/call  {us / best['torch.add']:5.2f}x torch.add")
    name = "_op, below-autograd guard held"
    print(f"{name:<40} {held:7.2f} us/call  {held / best['torch.add']:5.2f}x torch.add")


if __name__ == "__main__":
    main()
