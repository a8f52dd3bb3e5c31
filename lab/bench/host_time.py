"""Host time per call of every op against its torch counterpart, each op in fresh processes of
its own: what a launch-bound caller pays for a call, measured where nothing else has run.

    python -m lab.bench.host_time [--processes 3] [--ops my_add,my_gelu] [--device cuda]

For each op, `--processes` fresh Python processes import torch and this package, make the
op's inputs (n = 1024 float32; RMSNorm one row of 1024), and time, interleaved, the op's
Python function, `torch.ops.cuda_ext_example.<op>`, torch's counterpart, that counterpart
under torch.compile and, where the lab has one, a Triton kernel: the best of 7 rounds of 3,000
back-to-back calls each, up to a final synchronize. Prints a table of the median over the
processes and their spread, and judges the targets: the Python function <= 1.3x torch's and
below torch.compile and Triton, torch.ops <= 1.5x.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import textwrap

PYTHON_TARGET, OPS_TARGET = 1.3, 1.5
# op -> (its counterpart in torch, as an expression of the inputs, and the inputs' setup).
N = 1024
CASES = {
    "my_add": ("torch.add(a, b)", "a, b = randn(N), randn(N)"),
    "my_fast_add": ("torch.add(a, b)", "a, b = randn(N), randn(N)"),
    "my_square": ("torch.square(a)", "a = randn(N); rows = a.view(1, N)"),
    "my_gelu": ("F.gelu(a, approximate='tanh')", "a = randn(N)"),
    "my_leaky_relu": ("F.leaky_relu(a, 0.01)", "a = randn(N)"),
    "my_rms_norm": ("F.rms_norm(a, (N,), w, 1e-6)", "a, w = randn(1, N), randn(N).abs() + 0.5"),
    "my_adamw_step": (
        "adamw.step()",
        "p, m, v, g = randn(N), randn(N).zero_(), randn(N).zero_(), randn(N)\n"
        "weight = torch.nn.Parameter(p.clone()); weight.grad = g.clone()\n"
        "adamw = torch.optim.AdamW([weight], lr=1e-3, fused=True)",
    ),
}
ARGUMENTS = {
    "my_add": "a, b",
    "my_fast_add": "a, b",
    "my_square": "a",
    "my_gelu": "a",
    "my_leaky_relu": "a",
    "my_rms_norm": "a, w",
    "my_adamw_step": "p, m, v, g, 1e-3, 1",
}
TRITON = {"my_add": ("lab.bench.triton_add", "triton_add", "a, b"),
          "my_fast_add": ("lab.bench.triton_add", "triton_add", "a, b"),
          "my_square": ("lab.bench.triton_square", "triton_square", "rows")}  # fmt: skip

CHILD = """
import json, sys, time, torch, torch.nn.functional as F
import cuda_ext_example
device = sys.argv[1]
N = {n}
def randn(*shape):
    return torch.randn(*shape, device=device)
{setup}
ops = torch.ops.cuda_ext_example
sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
calls = {{
    "{op}": lambda: cuda_ext_example.{op}({args}),
    "torch.ops.cuda_ext_example.{op}": lambda: ops.{op}({args}),
    "torch: {counterpart}": lambda: {counterpart},
}}
compiled = torch.compile(lambda: {counterpart})
calls["torch.compile: {counterpart}"] = compiled
{triton}
def time_calls(fn, count):
    sync()
    start = time.perf_counter()
    for _ in range(count):
        fn()
    sync()
    return (time.perf_counter() - start) / count * 1e6
for fn in calls.values():
    time_calls(fn, 100)
best = {{name: float("inf") for name in calls}}
for _ in range(7):
    for name, fn in calls.items():
        best[name] = min(best[name], time_calls(fn, 3000))
print(json.dumps(best))
"""


def child_source(op: str) -> str:
    counterpart, setup = CASES[op]
    triton = ""
    if op in TRITON:
        module, function, args = TRITON[op]
        triton = (
            "if device == 'cuda':\n"
            f"    from {module} import {function}\n"
            f"    calls['triton'] = lambda: {function}({args})\n"
        )
    return textwrap.dedent(CHILD).format(
        n=N, setup=setup, op=op, args=ARGUMENTS[op], counterpart=counterpart, triton=triton
    )


class ChildFailed(Exception):
    """A measuring process ended in an error: its last line."""


def measure(op: str, device: str) -> dict[str, float]:
    """One fresh process's best us/call of each implementation for `op`."""
    run = subprocess.run(
        [sys.executable, "-c", child_source(op), device], capture_output=True, text=True
    )
    if run.returncode != 0:
        last = (run.stderr.strip().splitlines() or [f"exit {run.returncode}"])[-1]
        raise ChildFailed(last)
    return json.loads(run.stdout.strip().splitlines()[-1])


def table(op: str, runs: list[dict[str, float]]) -> tuple[list[str], list[str]]:
    """The rows of one op (median us, spread over processes, vs torch) and its verdicts."""
    names = list(runs[0])
    median = {n: statistics.median(r[n] for r in runs) for n in names}
    torch_name = next(n for n in names if n.startswith("torch: "))
    rows = []
    for name in names:
        values = [r[name] for r in runs]
        ratio = median[name] / median[torch_name]
        rows.append(
            f"| {name} | {median[name]:.2f} | {min(values):.2f}-{max(values):.2f} | {ratio:.2f}x |"
        )
    ours, raw = median[op], median[f"torch.ops.cuda_ext_example.{op}"]
    others = [n for n in names if n.startswith(("torch.compile", "triton"))]
    verdicts = [
        f"{op}: Python function {ours / median[torch_name]:.2f}x torch "
        f"({'PASS' if ours / median[torch_name] <= PYTHON_TARGET else 'MISS'} <= {PYTHON_TARGET}x)"
        + "".join(
            f"; {'below' if ours < median[o] else 'NOT below'} {o.split(':')[0]}" for o in others
        ),
        f"{op}: torch.ops {raw / median[torch_name]:.2f}x torch "
        f"({'PASS' if raw / median[torch_name] <= OPS_TARGET else 'MISS'} <= {OPS_TARGET}x)",
    ]
    return rows, verdicts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lab.bench.host_time",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--ops", default=",".join(CASES), help="comma-separated op names")
    parser.add_argument("--device", default=None, help="cuda (default where there is a GPU)")
    args = parser.parse_args(argv)
    ops = [o for o in args.ops.split(",") if o]
    unknown = sorted(set(ops) - set(CASES))
    if unknown or args.processes < 1:
        parser.error(f"unknown ops {unknown}; known: {sorted(CASES)}" if unknown else
                     "--processes must be >= 1")  # fmt: skip
    device = args.device
    if device is None:
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    print(f"Host time per call, us, {device}: median of {args.processes} fresh processes, each "
          "the best of 7 rounds of 3,000 calls\n")  # fmt: skip
    print("| impl | us/call | spread | vs torch |\n|---|---:|---:|---:|")
    verdicts, failed = [], []
    for op in ops:
        try:
            runs = [measure(op, device) for _ in range(args.processes)]
        except ChildFailed as exc:  # said in the table; the other ops are still measured
            print(f"| {op} | failed: {exc} | | |", flush=True)
            failed.append(op)
            continue
        rows, found = table(op, runs)
        print("\n".join(rows), flush=True)
        verdicts += found
    print("\n" + "\n".join(verdicts + [f"{op}: not measured (failed)" for op in failed]))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
