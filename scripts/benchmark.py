#!/usr/bin/env python3
"""Memory-bandwidth benchmark of cuda_ext_example.my_add / my_fast_add against their peers.

    python scripts/benchmark.py [--sizes 12-28] [--dtypes float32,bfloat16,float16,int64]
                                [--out bench/results] [--quick] [--compile-dynamic]

Implementations: the peers torch.add (eager), torch.compile of torch.add (Inductor's
generated Triton kernel) and a plain Triton kernel (scripts/triton_add.py), then the
project's my_add and my_fast_add. Every one returns a new tensor, so they do the same work:
read a and b, write the output.

Timing: triton.testing.do_bench (CUDA events around each call, L2 flushed before each
call, median of the repetitions). GB/s counts the 3 tensors of traffic. The roofline is the
bandwidth of a device-to-device copy of 1 GiB (bytes read + written).

Launch overhead: for tiny tensors the GPU time is not what the user waits for, the host
time per call is, so it is measured separately (see measure_host_us).

Outputs, in --out: <gpu-name-slug>-<YYYY-MM-DD>.md, .csv and .png, and the table and the
targets on stdout.

Structure: the GPU part (run_benchmark) produces a list of Record, the copy roofline and
the host times; everything after that (table, targets, markdown, CSV, plot) is a pure
function of those, tested on fake numbers by tests/test_benchmark.py with no GPU. That is
also why torch, triton and the extension are imported only inside the GPU functions.
"""

from __future__ import annotations

import argparse
import csv
import functools
import math
import platform
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

# --------------------------------------------------------------------------- constants

PEERS = ("torch.add", "torch.compile", "triton")
OURS = ("my_add", "my_fast_add")
IMPLS = PEERS + OURS

# dtype name -> bytes per element. The names are also torch attribute names.
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "int64": 8}

# An elementwise add reads a and b and writes the output.
TENSORS_OF_TRAFFIC = 3

DEFAULT_SIZES = "12-28"  # log2 of the element counts
QUICK_SIZES = "12,16,20,24,28"

DEVICE = "cuda"  # one place to name it (a CPU dry run of the flow can swap it)
COPY_BYTES = 2**30  # the roofline's buffer: 1 GiB, far larger than any L2
HOST_N = 1024  # launch-bound size for the host-overhead measurement (float32)

# The targets my_fast_add is held to (see evaluate_targets).
TARGET_DTYPES = ("float32", "bfloat16")
PEER_TARGET_LOG2 = range(16, 29)
PEER_TARGET_RATIO = 1.00
EAGER_TARGET_LOG2 = range(20, 25)
EAGER_TARGET_RATIO = 1.05
ROOFLINE_TARGET_LOG2 = 28
ROOFLINE_TARGET_DTYPE = "float32"
ROOFLINE_TARGET_FRACTION = 0.98
HOST_TARGET_RATIO = 1.05

PASS, MISS, NA = "PASS", "MISS", "N/A"

CSV_COLUMNS = (
    "size",
    "log2_size",
    "dtype",
    "impl",
    "ms",
    "gbps",
    "pct_roofline",
    "ratio_best_peer",
)


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class Record:
    """One measurement: `impl` added two `size`-element `dtype` tensors in `ms` (median)."""

    size: int
    dtype: str
    impl: str
    ms: float
    gbps: float


@dataclass(frozen=True)
class Row:
    """A Record with what is derived from its neighbours: % of the copy roofline and the
    ratio of its GB/s to the best peer's at the same (size, dtype); > 1 is faster."""

    record: Record
    pct_roofline: float
    ratio_best_peer: float


@dataclass(frozen=True)
class Target:
    name: str
    status: str  # PASS, MISS, or N/A where the run did not measure what the target needs
    measured: str


def traffic_gbps(size: int, dtype: str, ms: float) -> float:
    """GB/s (1e9 bytes) of an add of `size` elements: 3 tensors read or written."""
    return TENSORS_OF_TRAFFIC * size * DTYPE_BYTES[dtype] / (ms * 1e-3) / 1e9


def make_record(size: int, dtype: str, impl: str, ms: float) -> Record:
    return Record(size, dtype, impl, ms, traffic_gbps(size, dtype, ms))


def size_label(size: int) -> str:
    """2^k for powers of two (every size the CLI measures), the count otherwise."""
    if size > 0 and size & (size - 1) == 0:
        return f"2^{size.bit_length() - 1}"
    return str(size)


def _log2(size: int) -> int:
    return size.bit_length() - 1


def _ordered(values: Iterable[str], preferred: Sequence[str]) -> list[str]:
    """The distinct values, those of `preferred` first in its order, the rest as they come."""
    seen = list(dict.fromkeys(values))
    return [v for v in preferred if v in seen] + [v for v in seen if v not in preferred]


def dtypes_of(records: Sequence[Record]) -> list[str]:
    return _ordered((r.dtype for r in records), tuple(DTYPE_BYTES))


def impls_of(records: Sequence[Record]) -> list[str]:
    return _ordered((r.impl for r in records), IMPLS)


# --------------------------------------------------------------------------- derived numbers


def best_peer_gbps(records: Sequence[Record]) -> dict[tuple[int, str], float]:
    """(size, dtype) -> the highest GB/s among the peers measured there."""
    best: dict[tuple[int, str], float] = {}
    for r in records:
        if r.impl in PEERS:
            key = (r.size, r.dtype)
            best[key] = max(best.get(key, 0.0), r.gbps)
    return best


def annotate(records: Sequence[Record], roofline_gbps: float) -> list[Row]:
    """Rows sorted by dtype, size and implementation, with % of roofline and peer ratio.

    The ratio is nan where no peer was measured at that (size, dtype)."""
    best = best_peer_gbps(records)
    dtype_rank = {d: i for i, d in enumerate(dtypes_of(records))}
    impl_rank = {m: i for i, m in enumerate(impls_of(records))}
    rows = []
    for r in sorted(records, key=lambda r: (dtype_rank[r.dtype], r.size, impl_rank[r.impl])):
        peer = best.get((r.size, r.dtype))
        ratio = r.gbps / peer if peer else math.nan
        rows.append(Row(r, 100.0 * r.gbps / roofline_gbps, ratio))
    return rows


def _index(rows: Sequence[Row]) -> dict[tuple[int, str, str], Row]:
    return {(row.record.size, row.record.dtype, row.record.impl): row for row in rows}


def _fmt_ratio(ratio: float) -> str:
    return "-" if math.isnan(ratio) else f"{ratio:.2f}x"


# --------------------------------------------------------------------------- stdout table


def format_table(rows: Sequence[Row]) -> str:
    """The long table: one line per measurement."""
    header = ("size", "dtype", "impl", "time (us)", "GB/s", "% roofline", "vs best peer")
    lines = [
        (
            size_label(row.record.size),
            row.record.dtype,
            row.record.impl,
            f"{row.record.ms * 1e3:.2f}",
            f"{row.record.gbps:.1f}",
            f"{row.pct_roofline:.1f}",
            _fmt_ratio(row.ratio_best_peer),
        )
        for row in rows
    ]
    widths = [max(len(cell) for cell in column) for column in zip(header, *lines, strict=True)]
    # Text columns left-aligned, numbers right-aligned.
    align = ["<", "<", "<", ">", ">", ">", ">"]

    def fmt(cells: Sequence[str]) -> str:
        return "  ".join(
            f"{c:{a}{w}}" for c, a, w in zip(cells, align, widths, strict=True)
        ).rstrip()

    out = [fmt(header), fmt(["-" * w for w in widths])]
    previous = None
    for row, line in zip(rows, lines, strict=True):
        # A blank line between (size, dtype) groups keeps the table scannable.
        group = (row.record.size, row.record.dtype)
        if previous is not None and group != previous:
            out.append("")
        previous = group
        out.append(fmt(line))
    return "\n".join(out)


def format_host_times(host_us: dict[str, float]) -> str:
    base = host_us.get("torch.add")
    lines = [f"Host time per call, n={HOST_N} float32 (launch-bound):"]
    for impl in _ordered(host_us, IMPLS):
        vs = f"  ({host_us[impl] / base:.2f}x torch.add)" if base else ""
        lines.append(f"  {impl:<14} {host_us[impl]:8.2f} us/call{vs}")
    return "\n".join(lines)


def format_targets(targets: Sequence[Target]) -> str:
    lines = ["Targets (my_fast_add):"]
    lines += [f"  [{t.status:<4}] {t.name}: {t.measured}" for t in targets]
    return "\n".join(lines)


# --------------------------------------------------------------------------- targets


def _cell_target(name: str, cells: dict[str, float | None], threshold: float) -> Target:
    """PASS when every cell's ratio is >= threshold; MISS when a measured one is below;
    N/A when none is below but some were not measured (a partial run)."""
    measured = {label: v for label, v in cells.items() if v is not None and not math.isnan(v)}
    missing = [label for label in cells if label not in measured]
    if not measured:
        return Target(name, NA, "not measured in this run")
    below = {label: v for label, v in measured.items() if v < threshold}
    worst = min(measured, key=measured.get)
    parts = [f"worst {measured[worst]:.3f}x at {worst}"]
    if below:
        listed = ", ".join(f"{label} {v:.3f}x" for label, v in below.items())
        parts.append(f"{len(below)}/{len(cells)} below: {listed}")
    if missing:
        parts.append(f"{len(missing)} not measured")
    status = MISS if below else (NA if missing else PASS)
    return Target(name, status, "; ".join(parts))


def _ratio_cells(
    index: dict[tuple[int, str, str], Row],
    log2_sizes: Iterable[int],
    dtypes: Sequence[str],
    ratio: Callable[[int, str], float | None],
) -> dict[str, float | None]:
    return {
        f"{dtype} 2^{k}": ratio(2**k, dtype) if (2**k, dtype, "my_fast_add") in index else None
        for dtype in dtypes
        for k in log2_sizes
    }


def evaluate_targets(
    records: Sequence[Record], roofline_gbps: float, host_us: dict[str, float]
) -> list[Target]:
    index = _index(annotate(records, roofline_gbps))

    def vs_best_peer(size: int, dtype: str) -> float:
        return index[size, dtype, "my_fast_add"].ratio_best_peer

    def vs_torch_add(size: int, dtype: str) -> float | None:
        eager = index.get((size, dtype, "torch.add"))
        return index[size, dtype, "my_fast_add"].record.gbps / eager.record.gbps if eager else None

    dtypes = " and ".join(TARGET_DTYPES)
    first, last = PEER_TARGET_LOG2[0], PEER_TARGET_LOG2[-1]
    targets = [
        _cell_target(
            f"GB/s >= {PEER_TARGET_RATIO:.2f}x best peer at every size 2^{first}..2^{last}, "
            f"{dtypes}",
            _ratio_cells(index, PEER_TARGET_LOG2, TARGET_DTYPES, vs_best_peer),
            PEER_TARGET_RATIO,
        )
    ]
    first, last = EAGER_TARGET_LOG2[0], EAGER_TARGET_LOG2[-1]
    targets.append(
        _cell_target(
            f"GB/s >= {EAGER_TARGET_RATIO:.2f}x torch.add at 2^{first}..2^{last}, {dtypes}",
            _ratio_cells(index, EAGER_TARGET_LOG2, TARGET_DTYPES, vs_torch_add),
            EAGER_TARGET_RATIO,
        )
    )
    targets.append(_roofline_target(index, roofline_gbps))
    targets.append(_host_target(host_us))
    return targets


def _roofline_target(index: dict[tuple[int, str, str], Row], roofline_gbps: float) -> Target:
    k, dtype = ROOFLINE_TARGET_LOG2, ROOFLINE_TARGET_DTYPE
    name = f"GB/s at 2^{k} {dtype} >= {ROOFLINE_TARGET_FRACTION:.0%} of the copy roofline"
    row = index.get((2**k, dtype, "my_fast_add"))
    if row is None:
        return Target(name, NA, "not measured in this run")
    fraction = row.record.gbps / roofline_gbps
    status = PASS if fraction >= ROOFLINE_TARGET_FRACTION else MISS
    measured = f"{row.record.gbps:.1f} GB/s = {fraction:.1%} of {roofline_gbps:.1f} GB/s"
    return Target(name, status, measured)


def _host_target(host_us: dict[str, float]) -> Target:
    name = f"host us/call (n={HOST_N} float32) <= {HOST_TARGET_RATIO:.2f}x torch.add"
    ours, eager = host_us.get("my_fast_add"), host_us.get("torch.add")
    if ours is None or eager is None:
        return Target(name, NA, "not measured in this run")
    ratio = ours / eager
    status = PASS if ratio <= HOST_TARGET_RATIO else MISS
    return Target(name, status, f"{ours:.2f} us vs {eager:.2f} us = {ratio:.3f}x")


# --------------------------------------------------------------------------- files


def slug(text: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3'."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "gpu"


def output_paths(out_dir: Path, gpu_name: str, date: str) -> dict[str, Path]:
    stem = f"{slug(gpu_name)}-{date}"
    return {ext: Path(out_dir) / f"{stem}.{ext}" for ext in ("md", "csv", "png")}


def write_csv(rows: Sequence[Row], path: Path) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(CSV_COLUMNS)
        for row in rows:
            r = row.record
            writer.writerow(
                [
                    r.size,
                    _log2(r.size),
                    r.dtype,
                    r.impl,
                    f"{r.ms:.6g}",
                    f"{r.gbps:.2f}",
                    f"{row.pct_roofline:.2f}",
                    "" if math.isnan(row.ratio_best_peer) else f"{row.ratio_best_peer:.4f}",
                ]
            )


def render_markdown(
    meta: dict[str, str],
    rows: Sequence[Row],
    targets: Sequence[Target],
    roofline_gbps: float,
    host_us: dict[str, float],
    plot_name: str | None = None,
) -> str:
    """The report: versions, roofline, targets, host times, then one GB/s table per dtype."""
    records = [row.record for row in rows]
    out = [f"# cuda_ext_example add benchmark: {meta.get('GPU', 'unknown GPU')}", ""]
    out += [f"- **{key}**: {value}" for key, value in meta.items()]
    out += [
        "",
        f"Copy roofline: **{roofline_gbps:.1f} GB/s** (`dst.copy_(src)` of 1 GiB, bytes read "
        "+ written). GB/s below counts 3 tensors of traffic (a, b read, out written): "
        "3 * n * element_size / time. Times are CUDA-event medians from "
        "`triton.testing.do_bench`, which flushes L2 before every call; small sizes can "
        "still exceed the roofline because the output is written back from L2 after the "
        "kernel ends.",
        "",
        "## Targets (my_fast_add)",
        "",
        "| status | target | measured |",
        "|---|---|---|",
    ]
    out += [f"| {t.status} | {t.name} | {t.measured} |" for t in targets]
    if host_us:
        base = host_us.get("torch.add")
        out += [
            "",
            f"## Host time per call (n={HOST_N} float32, launch-bound)",
            "",
            "Back-to-back calls timed with `time.perf_counter` up to a final "
            "`torch.cuda.synchronize()`: the host-side cost of a call, which is what a "
            "tiny add costs the caller.",
            "",
            "| impl | us/call | vs torch.add |",
            "|---|---:|---:|",
        ]
        for impl in _ordered(host_us, IMPLS):
            vs = f"{host_us[impl] / base:.2f}x" if base else "-"
            out.append(f"| {impl} | {host_us[impl]:.2f} | {vs} |")
    if plot_name:
        out += ["", f"![GB/s per size]({plot_name})"]
    out += _markdown_tables(rows, records)
    return "\n".join(out) + "\n"


def _markdown_tables(rows: Sequence[Row], records: Sequence[Record]) -> list[str]:
    index = _index(rows)
    impls = impls_of(records)
    out = [
        "",
        "## GB/s per size",
        "",
        "Each cell: GB/s (ratio to the best peer of that row, the fastest of "
        f"{', '.join(PEERS)}; above 1.00x is faster).",
    ]
    for dtype in dtypes_of(records):
        out += ["", f"### {dtype}", ""]
        out.append("| size | " + " | ".join(impls) + " | my_fast_add % roofline |")
        out.append("|---|" + "---:|" * (len(impls) + 1))
        for size in sorted({r.size for r in records if r.dtype == dtype}):
            cells = []
            for impl in impls:
                row = index.get((size, dtype, impl))
                cells.append(
                    f"{row.record.gbps:.0f} ({_fmt_ratio(row.ratio_best_peer)})" if row else "-"
                )
            fast = index.get((size, dtype, "my_fast_add"))
            cells.append(f"{fast.pct_roofline:.1f}%" if fast else "-")
            out.append(f"| {size_label(size)} | " + " | ".join(cells) + " |")
    return out


def plot_results(
    records: Sequence[Record], roofline_gbps: float, path: Path, title: str = ""
) -> None:
    """One subplot per dtype: GB/s against log2(size), one line per implementation, the
    copy roofline dashed."""
    import matplotlib

    matplotlib.use("Agg")  # files only; no display on the benchmark machines
    import matplotlib.pyplot as plt

    dtypes = dtypes_of(records)
    ncols = min(2, len(dtypes))
    nrows = math.ceil(len(dtypes) / ncols)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(6.5 * ncols, 4.5 * nrows), squeeze=False, sharey=True
    )
    flat = axes.flatten()
    for ax, dtype in zip(flat, dtypes, strict=False):  # flat may have a spare axis
        for impl in impls_of(records):
            points = sorted(
                (r.size, r.gbps) for r in records if r.dtype == dtype and r.impl == impl
            )
            if points:
                ax.plot(
                    [_log2(s) for s, _ in points],
                    [g for _, g in points],
                    marker="o",
                    markersize=3,
                    label=impl,
                    linewidth=2.2 if impl == "my_fast_add" else 1.3,
                )
        ax.axhline(roofline_gbps, linestyle="--", color="black", linewidth=1, label="copy roofline")
        ax.set_ylim(bottom=0)  # from 0, so the gaps between lines are not exaggerated
        ax.set_title(dtype)
        ax.set_xlabel("log2(elements)")
        ax.set_ylabel("GB/s (3 tensors of traffic)")
        ax.grid(True, alpha=0.3)
    for ax in flat[len(dtypes) :]:
        ax.set_visible(False)
    flat[0].legend(fontsize="small", loc="upper left")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_reports(
    records: Sequence[Record],
    roofline_gbps: float,
    host_us: dict[str, float],
    meta: dict[str, str],
    out_dir: Path,
    date: str,
) -> tuple[dict[str, Path], list[Target], list[Row]]:
    """Write the .md, .csv and .png; return their paths, the targets and the rows."""
    rows = annotate(records, roofline_gbps)
    targets = evaluate_targets(records, roofline_gbps, host_us)
    paths = output_paths(out_dir, meta.get("GPU", "gpu"), date)
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    write_csv(rows, paths["csv"])
    plot_results(records, roofline_gbps, paths["png"], title=meta.get("GPU", ""))
    markdown = render_markdown(meta, rows, targets, roofline_gbps, host_us, paths["png"].name)
    paths["md"].write_text(markdown)
    return paths, targets, rows


# --------------------------------------------------------------------------- CLI parsing


def parse_sizes(text: str) -> list[int]:
    """'12-28' or '12,16,20' or '12-14,20' -> sorted distinct log2 sizes."""
    exponents: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
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
        description="GB/s of my_add / my_fast_add vs torch.add, torch.compile and Triton.",
    )
    parser.add_argument(
        "--sizes",
        type=parse_sizes,
        default=None,
        help=f"log2 element counts, e.g. 12-28 or 16,20,24 (default {DEFAULT_SIZES}; "
        f"{QUICK_SIZES} with --quick)",
    )
    parser.add_argument(
        "--dtypes",
        type=parse_dtypes,
        default=list(DTYPE_BYTES),
        help=f"comma-separated (default {','.join(DTYPE_BYTES)})",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("bench/results"),
        help="directory for the .md/.csv/.png (default bench/results)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="every 4th size and shorter do_bench runs: a smoke run, not a result",
    )
    parser.add_argument(
        "--compile-dynamic",
        action="store_true",
        help="compile torch.add once per dtype with dynamic shapes instead of once per "
        "(size, dtype) with static shapes (faster to run, but Inductor's kernel then cannot "
        "assume the size is a multiple of 16 and may lose vectorized loads)",
    )
    args = parser.parse_args(argv)
    if args.sizes is None:
        args.sizes = parse_sizes(QUICK_SIZES if args.quick else DEFAULT_SIZES)
    return args


# --------------------------------------------------------------------------- GPU part


@dataclass(frozen=True)
class Settings:
    warmup_ms: int  # do_bench warmup and repetition budgets, in ms of GPU time
    rep_ms: int
    host_calls: int
    host_repeats: int
    compile_dynamic: bool
    rounds: int = 3  # interleaved do_bench rounds per cell; the median is reported


def settings_for(args: argparse.Namespace) -> Settings:
    if args.quick:
        return Settings(10, 30, 500, 3, args.compile_dynamic, rounds=1)
    return Settings(25, 100, 2000, 5, args.compile_dynamic)


def bench_ms(fn: Callable[[], object], settings: Settings) -> float:
    """Median GPU time of fn() in ms: CUDA events around each call, L2 flushed before each
    (triton.testing.do_bench). Never a host clock around asynchronous launches."""
    from triton.testing import do_bench

    return float(do_bench(fn, warmup=settings.warmup_ms, rep=settings.rep_ms, return_mode="median"))


def measure_roofline_gbps(settings: Settings) -> float:
    """Device-to-device copy bandwidth: 1 GiB read + 1 GiB written."""
    import torch

    src = torch.empty(COPY_BYTES, dtype=torch.uint8, device=DEVICE).random_(0, 256)
    dst = torch.empty_like(src)
    ms = bench_ms(functools.partial(dst.copy_, src), settings)
    del src, dst
    torch.cuda.empty_cache()
    return 2 * COPY_BYTES / (ms * 1e-3) / 1e9


def compiled_add(dynamic: bool, max_shapes: int) -> Callable:
    """A fresh torch.compile of torch.add.

    The dynamo cache is reset first so each dtype starts clean. Static shapes (the
    default) specialize a kernel per size, like a static-shape user gets; the recompile
    limit is raised to allow that, and hitting it must fail rather than silently fall back
    to eager (which would time torch.add under the torch.compile label)."""
    import torch
    import torch._dynamo

    torch._dynamo.reset()
    config = torch._dynamo.config
    if hasattr(config, "recompile_limit"):
        config.recompile_limit = max(config.recompile_limit, max_shapes + 2)
    if hasattr(config, "fail_on_recompile_limit_hit"):
        config.fail_on_recompile_limit_hit = True

    def add(a, b):
        return torch.add(a, b)

    return torch.compile(add, dynamic=dynamic)


def implementations(settings: Settings, max_shapes: int) -> dict[str, Callable]:
    """name -> fn(a, b) returning a new tensor, peers first."""
    import torch
    from triton_add import triton_add  # scripts/ is on sys.path when run as a script

    import cuda_ext_example

    return {
        "torch.add": torch.add,
        "torch.compile": compiled_add(settings.compile_dynamic, max_shapes),
        "triton": triton_add,
        "my_add": cuda_ext_example.my_add,
        "my_fast_add": cuda_ext_example.my_fast_add,
    }


def make_inputs(n: int, dtype: str):
    import torch

    torch_dtype = getattr(torch, dtype)

    def one():
        if torch_dtype.is_floating_point:
            return torch.randn(n, dtype=torch_dtype, device=DEVICE)
        # Large magnitudes exercise the high bytes of the int64 values too.
        return torch.randint(-(2**40), 2**40, (n,), dtype=torch_dtype, device=DEVICE)

    return one(), one()


def check_outputs(impls: dict[str, Callable], a, b, label: str) -> None:
    """Every implementation must equal torch.add exactly before it is timed."""
    import torch

    expected = torch.add(a, b)
    for name, fn in impls.items():
        got = fn(a, b)
        if got.shape != expected.shape or got.dtype != expected.dtype:
            raise SystemExit(
                f"FAIL {name} {label}: got {got.dtype} {tuple(got.shape)}, "
                f"expected {expected.dtype} {tuple(expected.shape)}"
            )
        if not torch.equal(got, expected):
            bad = int((got != expected).sum())
            raise SystemExit(f"FAIL {name} {label}: {bad} elements differ from torch.add")


def run_cells(sizes: Sequence[int], dtypes: Sequence[str], settings: Settings) -> list[Record]:
    import torch

    records = []
    for dtype in dtypes:
        # One compile cache per dtype: a fresh torch.compile, then every size.
        impls = implementations(settings, max_shapes=len(sizes) + 1)
        for k in sizes:
            n = 2**k
            label = f"2^{k} {dtype}"
            a, b = make_inputs(n, dtype)
            check_outputs(impls, a, b, label)  # also compiles torch.compile for this shape
            # Round-robin rounds, median per implementation: clock or thermal drift
            # during a cell then hits every implementation alike, not just one.
            times = {name: [] for name in impls}
            for _ in range(settings.rounds):
                for name, fn in impls.items():
                    times[name].append(bench_ms(functools.partial(fn, a, b), settings))
            for name in impls:
                ms = statistics.median(times[name])
                record = make_record(n, dtype, name, ms)
                records.append(record)
                print(
                    f"  {label:<14} {name:<14} {ms * 1e3:10.2f} us {record.gbps:9.1f} GB/s",
                    file=sys.stderr,
                    flush=True,
                )
            del a, b
        torch.cuda.empty_cache()
    return records


def measure_host_us(fn: Callable, a, b, settings: Settings) -> float:
    """Host time per call in us: `host_calls` back-to-back calls, then one synchronize.

    At n=1024 the kernels take a couple of us while a launch costs more on the host, so
    the GPU keeps up and the wall-clock time is the host-side cost of a call (argument
    checks, dispatch, allocation, launch): the launch overhead is the thing measured here,
    which is why a host clock is right for this and only this. Median of `host_repeats`."""
    import torch

    for _ in range(50):  # warm up: compile, allocator, caches
        fn(a, b)
    torch.cuda.synchronize()
    samples = []
    for _ in range(settings.host_repeats):
        start = time.perf_counter()
        for _ in range(settings.host_calls):
            fn(a, b)
        torch.cuda.synchronize()
        samples.append((time.perf_counter() - start) / settings.host_calls * 1e6)
    return statistics.median(samples)


def run_host_times(settings: Settings) -> dict[str, float]:
    impls = implementations(settings, max_shapes=1)
    a, b = make_inputs(HOST_N, "float32")
    check_outputs(impls, a, b, f"n={HOST_N} float32")
    return {name: measure_host_us(fn, a, b, settings) for name, fn in impls.items()}


def driver_version() -> str:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
        return out.splitlines()[0].strip()
    except (OSError, subprocess.SubprocessError, IndexError):
        pass
    try:
        import torch

        # The CUDA driver API version (e.g. 13000), where nvidia-smi is missing.
        return f"unknown (CUDA driver API {torch._C._cuda_getDriverVersion()})"
    except Exception:
        return "unknown"


def collect_meta(now: datetime, settings: Settings) -> dict[str, str]:
    import torch
    import triton

    import cuda_ext_example

    compile_mode = "dynamic shapes" if settings.compile_dynamic else "static shapes, per size"
    return {
        "date": now.strftime("%Y-%m-%d %H:%M UTC"),
        "GPU": torch.cuda.get_device_name(0),
        "driver": driver_version(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "CUDA": str(torch.version.cuda),
        "python": platform.python_version(),
        "cuda_ext_example": cuda_ext_example.__version__,
        "settings": f"do_bench warmup={settings.warmup_ms} ms rep={settings.rep_ms} ms "
        f"(median); host {settings.host_calls} calls x {settings.host_repeats}; "
        f"torch.compile {compile_mode}",
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("benchmark.py needs a CUDA GPU", file=sys.stderr)
        return 2
    settings = settings_for(args)
    now = datetime.now(timezone.utc)
    meta = collect_meta(now, settings)
    print("\n".join(f"{k}: {v}" for k, v in meta.items()), flush=True)

    roofline = measure_roofline_gbps(settings)
    print(f"copy roofline: {roofline:.1f} GB/s", flush=True)
    records = run_cells(args.sizes, args.dtypes, settings)
    host_us = run_host_times(settings)

    paths, targets, rows = write_reports(
        records, roofline, host_us, meta, args.out, now.strftime("%Y-%m-%d")
    )
    print()
    print(format_table(rows))
    print()
    print(format_host_times(host_us))
    print()
    print(format_targets(targets))
    print()
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
