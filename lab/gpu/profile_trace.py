"""Runs the ops under torch.profiler and writes a Chrome trace (open it in
chrome://tracing or https://ui.perfetto.dev): kernel names and times are there.

    python -m lab.gpu.profile_trace [--out build/results/trace.json] [--size 24]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function

import cuda_ext_example


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m lab.gpu.profile_trace", description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("build/results/trace.json"))
    parser.add_argument(
        "--size", type=int, default=24, choices=range(10, 31), metavar="10..30",
        help="log2 of the element count (default 24)",
    )  # fmt: skip
    parser.add_argument("--iters", type=int, default=5)
    args = parser.parse_args()

    device = "cuda" if torch.cuda.is_available() else "cpu"
    a = torch.randn(2**args.size, device=device)
    b = torch.randn(2**args.size, device=device)
    ops = {
        "torch.add": torch.add,
        "my_add": cuda_ext_example.my_add,
        "my_fast_add": cuda_ext_example.my_fast_add,
    }
    for op in ops.values():  # warm up: module load and allocator out of the trace
        op(a, b)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with profile(activities=activities, record_shapes=True) as prof:
        for _ in range(args.iters):
            for name, op in ops.items():
                with record_function(name):
                    op(a, b)
        if device == "cuda":
            torch.cuda.synchronize()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    prof.export_chrome_trace(str(args.out))
    sort = "cuda_time_total" if device == "cuda" else "cpu_time_total"
    print(prof.key_averages().table(sort_by=sort, row_limit=15))
    print(f"Chrome trace written to {args.out}")


if __name__ == "__main__":
    main()
