"""The benchmark command: GB/s of this package's ops against their peers, per workload.

    python -m lab.bench [--workload add|square|gelu|adamw|rms_norm|rms_norm_train]
                            [--sizes 12-28 | 65536x4096,...] [--dtypes float32,...]
                            [--out build/results] [--quick] [--compile-dynamic]

Every implementation returns a new tensor, so all do the same work; each must equal the
workload's reference exactly before it is timed (timing.py says how). Writes
<workload>-<gpu>-<date>.md, .csv and .png into --out, and the table and targets to stdout.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

from lab.cli_args import at_least_one

from . import adamw, add, gelu, report, rms_norm, square
from .report import COPY, DTYPE_BYTES, Record
from .timing import ROUND_ORDER, Settings
from .workload import Workload

WORKLOADS = {
    w.name: w
    for w in (
        add.WORKLOAD,
        square.WORKLOAD,
        gelu.WORKLOAD,
        adamw.WORKLOAD,
        rms_norm.FORWARD,
        rms_norm.TRAIN,
    )
}


def parse_sizes(text: str) -> list[int]:
    """'12-28' or '12,16,20' or '12-14,20' -> sorted distinct log2 sizes."""
    exponents: set[int] = set()
    for part in filter(None, (p.strip() for p in text.split(","))):
        low, sep, high = part.partition("-")
        try:
            first, last = int(low), int(high) if sep else int(low)
        except ValueError:
            raise argparse.ArgumentTypeError(f"bad size range {part!r}") from None
        if not 0 <= first <= last <= 30:
            raise argparse.ArgumentTypeError(f"sizes are log2 exponents in 0..30, got {part!r}")
        exponents.update(range(first, last + 1))
    if not exponents:
        raise argparse.ArgumentTypeError("no sizes given")
    return sorted(exponents)


def parse_cases(text: str, workload: Workload) -> list[int]:
    """'65536x4096,4096x1024' -> those of the workload's named shapes, in its order."""
    by_label = {workload.label(code): code for code in workload.cases}
    named = [p.strip() for p in text.split(",") if p.strip()]
    unknown = [p for p in named if p not in by_label]
    if unknown or not named:
        raise argparse.ArgumentTypeError(
            f"the {workload.name} workload measures its own shapes: name them from "
            f"{', '.join(by_label)} (got {', '.join(unknown) or 'none'})"
        )
    return [code for code in workload.cases if workload.label(code) in named]


def parse_dtypes(text: str) -> list[str]:
    dtypes = [d.strip() for d in text.split(",") if d.strip()]
    unknown = [d for d in dtypes if d not in DTYPE_BYTES]
    if unknown or not dtypes:
        raise argparse.ArgumentTypeError(
            f"unknown dtype(s) {unknown}; choose from {', '.join(DTYPE_BYTES)}"
        )
    return list(dict.fromkeys(dtypes))


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m lab.bench",
        description="GB/s of this package's ops against their peers (torch, torch.compile, "
        "Triton), per workload.",
    )
    parser.add_argument("--workload", choices=WORKLOADS, default="add")
    parser.add_argument(
        "--sizes",
        default=None,
        help="log2 sizes, e.g. 12-28 or 16,20,24, or a workload's named shapes, e.g. "
        "65536x4096,4096x1024 (default: the workload's; fewer make a partial run, whose "
        "targets say N/A)",
    )
    parser.add_argument(
        "--dtypes",
        type=parse_dtypes,
        default=None,
        help=f"from {','.join(DTYPE_BYTES)} (default: the workload's)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("build/results"),
        help="folder for the .md/.csv/.png (default build/results)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="fewer sizes, one round, shorter runs: a smoke run, not a result",
    )
    parser.add_argument(
        "--rounds",
        type=at_least_one("round"),
        default=5,
        help="rounds per cell, each on fresh tensors; the median is reported (default 5)",
    )
    parser.add_argument(
        "--rep-ms",
        type=at_least_one("ms"),
        default=100,
        help="do_bench's timing budget per implementation and round, in ms of GPU time; "
        "its warm-up is a quarter of it (default 100)",
    )
    parser.add_argument(
        "--compile-dynamic",
        action="store_true",
        help="compile once with dynamic shapes instead of once per size (faster "
        "to run, but Inductor's kernel may then lose vectorized loads)",
    )
    args = parser.parse_args(argv)
    args.workload = WORKLOADS[args.workload]
    try:
        if args.workload.cases:  # its own shapes, not 2^k
            default = args.workload.quick_cases if args.quick else args.workload.cases
            given = args.sizes is not None
            args.sizes = parse_cases(args.sizes, args.workload) if given else list(default)
            args.dtypes = args.dtypes or list(args.workload.dtypes)
            return args
        default = args.workload.quick_sizes if args.quick else args.workload.sizes
        args.sizes = parse_sizes(default if args.sizes is None else args.sizes)
    except argparse.ArgumentTypeError as exc:
        parser.error(f"--sizes: {exc}")
    if args.sizes[-1] > args.workload.max_log2:
        parser.error(
            f"--sizes: the {args.workload.name} workload goes up to 2^"
            f"{args.workload.max_log2}, got 2^{args.sizes[-1]}"
        )
    args.dtypes = args.dtypes or list(args.workload.dtypes)
    return args


def settings_of(args: argparse.Namespace) -> Settings:
    """How long each cell is timed: --quick's smoke run, or --rounds and --rep-ms."""
    if args.quick:
        return Settings(10, 30, rounds=1, compile_dynamic=args.compile_dynamic, quick=True)
    return Settings(max(1, args.rep_ms // 4), args.rep_ms, args.rounds, args.compile_dynamic)


def peer_versions(distributions: Sequence[str]) -> str:
    """'name version' of each distribution, 'name not installed' where it is missing."""
    from importlib import metadata

    def version(name: str) -> str:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return "not installed"

    return ", ".join(f"{name} {version(name)}" for name in distributions)


def missing_prerequisite(workload: Workload) -> str:
    """What the GPU run needs and this Python lacks, in one line with its fix ("" if none):
    found before any timing, so the run does not end in a traceback minutes in."""
    try:
        import cuda_ext_example
    except ImportError as exc:
        return (
            f"cuda_ext_example is not importable ({exc}); install it first "
            "(make install, or pip install a wheel of it)"
        )
    lacking = [op for op in workload.ours if not hasattr(cuda_ext_example, op)]
    if lacking:
        where = Path(cuda_ext_example.__file__).parent
        return (
            f"cuda_ext_example at {where} has no {', '.join(lacking)}; install a wheel "
            "built from this checkout"
        )
    try:
        import triton.testing  # noqa: F401  (do_bench times every implementation)
    except ImportError as exc:
        return f"needs triton for triton.testing.do_bench: {exc}"
    return ""


def run_cells(
    workload: Workload, sizes: Sequence[int], dtypes: Sequence[str], settings: Settings
) -> list[Record]:
    import torch

    from .timing import check_outputs, random_tensor, size_matched_copy, time_rounds

    records = []
    for dtype in dtypes:
        # One compile cache per dtype: a fresh torch.compile, then every size.
        impls = workload.implementations(settings.compile_dynamic, len(sizes) + 1)
        for k in sizes:
            size = k if workload.cases else 2**k  # a case, or a log2 size

            def fresh_calls(size=size, dtype=dtype, impls=impls) -> dict:
                """Every implementation and the size-matched copy, on fresh inputs."""
                inputs = workload.make_inputs(size, dtype, random_tensor)
                calls = {name: functools.partial(fn, *inputs) for name, fn in impls.items()}
                return {**calls, COPY: size_matched_copy(inputs[0], workload.tensors)}

            label = f"{workload.label(size)} {dtype}"
            inputs = workload.make_inputs(size, dtype, random_tensor)
            tolerance = (workload.tolerance or {}).get(dtype)
            check_outputs(impls, inputs, workload.peers[0], label, tolerance)  # also compiles
            for name, rounds_ms in time_rounds(fresh_calls, settings).items():
                record = workload.record(size, dtype, name, rounds_ms)
                records.append(record)
                print(
                    f"  {label:<14} {name:<14} {record.ms * 1e3:10.2f} us "
                    f"{record.gbps:9.1f} GB/s ±{record.spread_pct:.1f}%",
                    file=sys.stderr,
                    flush=True,
                )
            torch.cuda.empty_cache()
    return records


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    workload: Workload = args.workload
    import torch

    if not torch.cuda.is_available():
        print(
            f"lab.bench: no CUDA GPU here (torch {torch.__version__}), nothing measured: "
            "run it on a machine with an NVIDIA GPU",
            file=sys.stderr,
        )
        return 2
    missing = missing_prerequisite(workload)
    if missing:
        print(f"lab.bench: {missing}", file=sys.stderr)
        return 1
    settings = settings_of(args)
    now = datetime.now(timezone.utc)
    from lab.gpu.facts import benchmark_facts

    compile_mode = "dynamic shapes" if settings.compile_dynamic else "static shapes, per size"
    meta = {
        **benchmark_facts(now),
        "settings": f"do_bench warmup={settings.warmup_ms} ms rep={settings.rep_ms} ms per "
        f"implementation (median of {settings.rounds} {ROUND_ORDER}, each on fresh tensors); "
        f"torch.compile {compile_mode}",
    }
    if workload.peer_packages:
        meta["peer packages"] = peer_versions(workload.peer_packages)
    print("\n".join(f"{k}: {v}" for k, v in meta.items()), flush=True)

    from .timing import measure_roofline_gbps

    roofline = measure_roofline_gbps(settings)
    print(f"copy roofline: {roofline:.1f} GB/s", flush=True)
    records = run_cells(workload, args.sizes, args.dtypes, settings)
    extra = workload.extra(settings) if workload.extra else None
    paths, targets, rows = report.write_reports(
        workload, records, roofline, meta, args.out, now.strftime("%Y-%m-%d"), extra
    )
    print()
    print(report.format_table(rows, workload.size_name, workload.label))
    if extra:
        print()
        print(extra.text)
    print()
    print(report.format_targets(targets, workload.judged))
    print()
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    return 0
