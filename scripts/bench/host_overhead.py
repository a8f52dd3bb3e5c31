"""Where the host time of one call goes (n=1024 float32, launch-bound), layer by layer.

    python -m scripts.bench.host_overhead [--device cpu]

Each row adds one layer to the one above it, so the differences are what each layer costs:
- torch.add: torch's generated C++ binding, the bar the benchmark's host target is set by;
- a kernel launch through torch (torch.cuda._sleep(0)): what any launch costs from Python;
- aten.add through torch.ops: the torch.ops entry every custom op pays (boxed call, Python
  argument parsing), with torch's C++ autograd kernel;
- our op's no-grad twin through its C++ callable (`_op`): the dispatcher, stable-ABI boxing,
  our input checks, allocation, stream look-up, cuLaunchKernel: the floor of a stable-ABI
  op called from Python;
- + a Python function around it, + each check of the wrapper's fast path, built up in the
  wrapper's order (the last row of these is the fast path as shipped);
- cuda_ext_example.my_fast_add as shipped; change 22's wrapper (is_compiling() first, two
  Python calls where is_dynamo_compiling() is one); the wrapper of changes 17-21 (the public op's
  callable with autograd's dispatch key excluded around it), for comparison; the op through
  torch.ops (its Python autograd kernel of register_autograd included).
Timed as scripts/bench/benchmark.py times host calls: best of 7 interleaved rounds of 2000.
"""

from __future__ import annotations

import argparse
import sys

import torch

import cuda_ext_example
from scripts.bench.benchmark import best_host_times

op = torch.ops.cuda_ext_example.my_fast_add.default
twin = torch.ops.cuda_ext_example._my_fast_add_no_grad.default._op
is_compiling = torch.compiler.is_compiling
is_dynamo_compiling = torch.compiler.is_dynamo_compiling
forward_ad = torch.autograd.forward_ad
functorch = torch._C._are_functorch_transforms_active
grad_enabled = torch.is_grad_enabled
dispatch_modes = torch._C._len_torch_dispatch_stack
function_modes = torch._C._is_torch_function_mode_enabled
tracing = torch._C._is_tracing
plain = (torch.Tensor, torch.nn.Parameter)


# The shipped wrapper's fast-path checks in its order (src/cuda_ext_example/ops.py,
# _FAST_WRAPPER); row k of the layers runs the first k of them, then the twin.
CHECKS = {
    "+ torch.compile check": "if is_dynamo_compiling(): return op(a, b)",
    "+ torch.func / forward-AD check": (
        "if forward_ad._current_level >= 0 or functorch(): return op(a, b)"
    ),
    "+ subclass and grad checks": (
        "if a.__class__ not in plain or b.__class__ not in plain: return op(a, b)\n"
        "if grad_enabled() and (a.requires_grad or b.requires_grad): return op(a, b)"
    ),
    "+ mode and trace checks": (
        "if dispatch_modes() or function_modes() or tracing(): return op(a, b)"
    ),
}


def with_checks(count: int):
    """A Python function (a, b) that runs the first `count` checks, then calls the twin."""
    lines = [line for check in list(CHECKS.values())[:count] for line in check.split("\n")]
    body = "".join(f"    {line}\n" for line in [*lines, "return twin(a, b)"])
    scope = dict(globals())
    exec(compile(f"def layer(a, b):\n{body}", "<layer>", "exec"), scope)  # noqa: S102
    return scope["layer"]


def change22_wrapper():
    """The shipped wrapper as change 22 made it, with torch.compiler.is_compiling() as its
    first check (change 23 asks is_dynamo_compiling(), one Python call instead of two)."""
    from unittest import mock

    from cuda_ext_example import ops

    with mock.patch.object(torch.compiler, "is_dynamo_compiling", is_compiling):
        return ops.make_wrapper(ops.DECLARATIONS["my_fast_add"])


def exclusion_wrapper():
    """The fast path of changes 17-21: the public op's callable below autograd, by
    excluding autograd's dispatch key for the thread around the call."""
    public = op._op
    key = torch._C.DispatchKey.AutogradFunctionality
    exclude = torch._C._dispatch_tls_set_dispatch_key_excluded
    excluded = torch._C._dispatch_tls_is_dispatch_key_excluded

    def wrapper(*args):
        if is_compiling():
            return op(*args)
        if forward_ad._current_level >= 0 or functorch():
            return op(*args)
        if grad_enabled():
            for arg in args:
                if arg.requires_grad:
                    return op(*args)
        if excluded(key):
            return public(*args)
        exclude(key, True)
        try:
            return public(*args)
        finally:
            exclude(key, False)

    return wrapper


def layers(device: str) -> dict:
    ways = {"torch.add": torch.add}
    if device == "cuda":
        ways["a launch through torch (torch.cuda._sleep(0))"] = lambda a, b: torch.cuda._sleep(0)
    ways |= {
        "aten.add through torch.ops": torch.ops.aten.add.Tensor,
        "our op's no-grad twin (_op): the floor": twin,
        "+ a Python function (a, b)": with_checks(0),
        **{name: with_checks(k + 1) for k, name in enumerate(CHECKS)},
        "cuda_ext_example.my_fast_add": cuda_ext_example.my_fast_add,
        "the wrapper of change 22 (is_compiling first)": change22_wrapper(),
        "the exclusion wrapper of changes 17-21": exclusion_wrapper(),
        "torch.ops...my_fast_add (Python autograd kernel)": op,
    }
    return ways


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.bench.host_overhead")
    parser.add_argument(
        "--device", default="cuda", choices=("cuda", "cpu"), help="where the tensors live"
    )
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        print(
            "scripts.bench.host_overhead: no CUDA GPU here; --device cpu times the CPU path",
            file=sys.stderr,
        )
        return 2
    a = torch.randn(1024, device=args.device)
    b = torch.randn(1024, device=args.device)
    ways = layers(args.device)
    for name, fn in ways.items():
        if name != "a launch through torch (torch.cuda._sleep(0))":
            torch.testing.assert_close(fn(a, b), a + b, rtol=0, atol=0, msg=name)
    best = best_host_times(ways, a, b, calls=2000, repeats=7)
    print(f"torch {torch.__version__}, device {args.device}, n=1024 float32")
    previous = None
    for name, us in best.items():
        step = f"{us - previous:+6.2f}" if previous is not None and name.startswith("+") else ""
        print(f"{name:<50} {us:7.2f} us/call  {us / best['torch.add']:5.2f}x torch.add  {step}")
        previous = us
    return 0


if __name__ == "__main__":
    sys.exit(main())
