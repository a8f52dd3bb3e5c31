#!/usr/bin/env python3
"""GB/s of cuda_ext_example.my_square against its peers, as the GPU MODE lecture measures
a square: a (4096, N) float32 matrix, squared, for N = 2^7 .. 2^15 columns.

    python -m scripts.bench.square [--cols 7-15] [--out build/results] [--quick]
                                   [--compile-dynamic]

Implementations: the peers torch.square (eager), torch.compile of torch.square (Inductor's
kernel) and the lecture's row-wise Triton kernel (triton_square.py), then my_square. Each
returns a new tensor: read x, write x * x. Every one must equal torch.square bitwise before
it is timed.

Timing is benchmark.py's: triton.testing.do_bench (CUDA events, L2 flushed before each call),
in each round one do_bench over the implementations called in turn, median and spread of the
rounds; GB/s = 2 * numel * 4 bytes / time; the roofline is benchmark.py's 1 GiB copy.

Verdict: my_square >= 1.00x the best peer at every N. A miss by less than the round-to-round
spread of that ratio (report.ratio_spread_pct) is still a miss, and is reported as one that
noise could explain.

Outputs, in --out: square-<gpu-name-slug>-<YYYY-MM-DD>.md, .csv and .png, and the table
and the verdict on stdout. With no CUDA GPU it says so in one line and exits 2, as
`python -m scripts.bench` does.

The reporting half (everything above "GPU part") is pure and tested on fake timings by
tests/test_square_benchmark.py; torch, triton and the extension are imported only inside
the functions that time things.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import functools
import math
import sys
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path

from . import benchmark, report
from .report import Record, Row, Target

ROWS = 4096  # the lecture's matrix height
DTYPE = "float32"
ELEMENT_BYTES = 4
TENSORS_OF_TRAFFIC = 2  # x read, out written
DEFAULT_COLS = "7-15"  # log2 of N
QUICK_COLS = "7,11,15"
MAX_COLS_LOG2 = 16  # the Triton kernel holds a whole row in one block

PEERS = ("torch.square", "torch.compile", "triton")
OURS = "my_square"
IMPLS = (*PEERS, OURS)
TARGET_RATIO = 1.00
WITHIN_SPREAD = "MISS (within spread)"

CSV_COLUMNS = (
    "rows",
    "cols",
    "log2_cols",
    "numel",
    "impl",
    "ms",
    "gbps",
    "pct_roofline",
    "ratio_best_peer",
    "spread_pct",
)


# --------------------------------------------------------------------------- records


def square_gbps(numel: int, ms: float) -> float:
    """GB/s (1e9 bytes) of squaring numel float32 elements: read once, written once."""
    return TENSORS_OF_TRAFFIC * numel * ELEMENT_BYTES / (ms * 1e-3) / 1e9


def record_for(cols: int, impl: str, samples_ms: Sequence[float]) -> Record:
    """The cell (ROWS, cols) timed in rounds: report.py's median and spread, this traffic.

    Record.size is the element count, ROWS * cols."""
    numel = ROWS * cols
    record = report.record_from_rounds(numel, DTYPE, impl, samples_ms)
    return dataclasses.replace(record, gbps=square_gbps(numel, record.ms))


def cols_of(record: Record) -> int:
    return record.size // ROWS


def cols_label(cols: int) -> str:
    return f"N={report.size_label(cols)}"


def annotate(records: Sequence[Record], roofline_gbps: float) -> list[Row]:
    """Rows by N, then implementation (peers first), with % of the copy roofline and the
    ratio to the fastest peer at that N (nan where no peer was measured)."""
    best: dict[int, float] = {}
    for r in records:
        if r.impl in PEERS:
            best[r.size] = max(best.get(r.size, 0.0), r.gbps)
    rank = {impl: i for i, impl in enumerate(IMPLS)}
    rows = []
    for r in sorted(records, key=lambda r: (r.size, rank.get(r.impl, len(IMPLS)), r.impl)):
        ratio = r.gbps / best[r.size] if best.get(r.size) else math.nan
        rows.append(Row(r, 100.0 * r.gbps / roofline_gbps, ratio))
    return rows


@dataclasses.dataclass(frozen=True)
class Cell:
    """my_square at one N against the best peer there."""

    cols: int
    ours: Row
    best_peer: Record
    spread_pct: float  # the round-to-round spread of the ratio (report.ratio_spread_pct)

    @property
    def verdict(self) -> str:
        ratio = self.ours.ratio_best_peer
        if ratio >= TARGET_RATIO:
            return report.PASS
        if (TARGET_RATIO - ratio) * 100 <= self.spread_pct:
            return WITHIN_SPREAD
        return report.MISS


def cells(rows: Sequence[Row]) -> list[Cell]:
    """One Cell per N where both my_square and a peer were measured."""
    out = []
    for size in sorted({row.record.size for row in rows}):
        here = [row for row in rows if row.record.size == size]
        ours = next((row for row in here if row.record.impl == OURS), None)
        peers = [row.record for row in here if row.record.impl in PEERS]
        if ours is None or not peers:
            continue
        best = max(peers, key=lambda r: r.gbps)
        spread = report.ratio_spread_pct(ours.record, best)
        out.append(Cell(cols_of(ours.record), ours, best, spread))
    return out


def evaluate_target(rows: Sequence[Row]) -> Target:
    """report.py's strict cell target over every measured N: PASS only if no N is below."""
    measured = cells(rows)
    sizes = sorted({cols_of(row.record) for row in rows})
    span = f"{cols_label(sizes[0])}..{report.size_label(sizes[-1])}" if sizes else "no N"
    name = f"my_square GB/s >= {TARGET_RATIO:.2f}x best of {', '.join(PEERS)} at every {span}"
    ratios = {cols_label(c.cols): c.ours.ratio_best_peer for c in measured}
    spreads = {cols_label(c.cols): c.spread_pct for c in measured}
    # An N with no my_square or no peer measured is None: N/A, never a PASS.
    per_n = {cols_label(n): ratios.get(cols_label(n)) for n in sizes}
    return report._cell_target(name, per_n, TARGET_RATIO, spreads)


# --------------------------------------------------------------------------- text and files


def format_verdict(target: Target) -> str:
    return f"Verdict: [{target.status}] {target.name}: {target.measured}"


def format_table(rows: Sequence[Row]) -> str:
    """Markdown: one line per N, GB/s of each implementation, then my_square's ratio to the
    best peer, the spread that ratio is judged against, and the verdict."""
    index = {(row.record.size, row.record.impl): row for row in rows}
    impls = [i for i in IMPLS if any(row.record.impl == i for row in rows)]
    by_size = {c.ours.record.size: c for c in cells(rows)}
    header = ["N", *impls, f"{OURS} vs best peer", "spread", "verdict"]
    out = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 2) + "---|"]
    for size in sorted({row.record.size for row in rows}):
        line = [report.size_label(size // ROWS)]
        for impl in impls:
            row = index.get((size, impl))
            line.append(f"{row.record.gbps:.0f}" if row else "-")
        cell = by_size.get(size)
        if cell:
            line += [
                f"{cell.ours.ratio_best_peer:.3f}x ({cell.best_peer.impl})",
                f"{cell.spread_pct:.1f}%",
                cell.verdict,
            ]
        else:
            line += ["-", "-", "-"]
        out.append("| " + " | ".join(line) + " |")
    return "\n".join(out)


def write_csv(rows: Sequence[Row], path: Path) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(CSV_COLUMNS)
        for row in rows:
            r, cols = row.record, cols_of(row.record)
            ratio = row.ratio_best_peer
            writer.writerow(
                [
                    ROWS,
                    cols,
                    cols.bit_length() - 1,
                    r.size,
                    r.impl,
                    f"{r.ms:.6g}",
                    f"{r.gbps:.2f}",
                    f"{row.pct_roofline:.2f}",
                    "" if math.isnan(ratio) else f"{ratio:.4f}",
                    f"{r.spread_pct:.2f}",
                ]
            )


def plot(records: Sequence[Record], roofline_gbps: float, path: Path, title: str = "") -> None:
    """GB/s against N (log2 axis), one line per implementation, the copy roofline dashed:
    the lecture's perf_report plot, drawn the way report.plot_results draws the add's."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for impl in [i for i in IMPLS if any(r.impl == i for r in records)]:
        points = sorted((cols_of(r), r.gbps) for r in records if r.impl == impl)
        ax.plot(
            [c for c, _ in points],
            [g for _, g in points],
            marker="o",
            markersize=3,
            label=impl,
            linewidth=2.2 if impl == OURS else 1.3,
        )
    ax.axhline(roofline_gbps, linestyle="--", color="black", linewidth=1, label="copy roofline")
    ax.set_xscale("log", base=2)
    ax.set_ylim(bottom=0)
    ax.set_xlabel(f"N (columns of a ({ROWS}, N) {DTYPE} matrix)")
    ax.set_ylabel("GB/s (2 * numel * 4 bytes / time)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small", loc="lower right")
    ax.set_title(f"square: {title}" if title else "square")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def render_markdown(
    meta: dict[str, str],
    rows: Sequence[Row],
    target: Target,
    roofline_gbps: float,
    plot_name: str | None = None,
) -> str:
    out = report.header("square", meta)
    out += [
        "",
        f"A ({ROWS}, N) {DTYPE} matrix squared by each implementation (a new output each "
        "call). GB/s = 2 * numel * 4 bytes / time (x read, out written). Times are "
        "CUDA-event medians from `triton.testing.do_bench` (L2 flushed before every call), "
        "each the median of rounds, in each of which one do_bench called every "
        "implementation in turn; spread = the round-to-round spread of my_square's ratio to "
        "the best peer, (largest - smallest) / median. "
        f"Copy roofline: **{roofline_gbps:.1f} GB/s** (`dst.copy_(src)` of 1 GiB).",
        "",
        "## Verdict",
        "",
        f"**{target.status}**: {target.name}: {target.measured}",
    ]
    if plot_name:
        out += ["", f"![GB/s per N]({plot_name})"]
    out += ["", "## GB/s per N", "", format_table(rows)]
    return "\n".join(out) + "\n"


def write_reports(
    records: Sequence[Record],
    roofline_gbps: float,
    meta: dict[str, str],
    out_dir: Path,
    date: str,
) -> tuple[dict[str, Path], Target, list[Row]]:
    """Write the .md, .csv and .png (names apart from the add benchmark's in the same
    folder); return their paths, the verdict and the rows."""
    rows = annotate(records, roofline_gbps)
    target = evaluate_target(rows)
    paths = report.output_paths(out_dir, f"square {meta.get('GPU', 'gpu')}", date)
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    write_csv(rows, paths["csv"])
    plot(records, roofline_gbps, paths["png"], title=meta.get("GPU", ""))
    paths["md"].write_text(render_markdown(meta, rows, target, roofline_gbps, paths["png"].name))
    return paths, target, rows


# --------------------------------------------------------------------------- CLI


def parse_cols(text: str) -> list[int]:
    """benchmark.parse_sizes's syntax ('7-15', '8,12'), for log2 N up to MAX_COLS_LOG2."""
    exponents = benchmark.parse_sizes(text)
    if exponents[-1] > MAX_COLS_LOG2:
        raise argparse.ArgumentTypeError(
            f"column sizes are log2 exponents in 0..{MAX_COLS_LOG2}, got 2^{exponents[-1]}"
        )
    return exponents


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m scripts.bench.square",
        description=f"GB/s of my_square vs {', '.join(PEERS)} on a ({ROWS}, N) {DTYPE} matrix.",
    )
    parser.add_argument(
        "--cols",
        type=parse_cols,
        default=None,
        help=f"log2 of N, e.g. 7-15 or 8,12 (default {DEFAULT_COLS}; {QUICK_COLS} with --quick)",
    )
    benchmark.add_run_options(
        parser,
        quick="three sizes, one round, shorter do_bench runs: a smoke run, not a result",
        compile_dynamic="compile torch.square once with dynamic shapes instead of once per N",
    )
    args = parser.parse_args(argv)
    if args.cols is None:
        args.cols = parse_cols(QUICK_COLS if args.quick else DEFAULT_COLS)
    return args


# --------------------------------------------------------------------------- GPU part


NO_MY_SQUARE = "this cuda_ext_example has no my_square"


def find_my_square() -> tuple[Callable | None, str]:
    """(cuda_ext_example.my_square or None, what is installed), without raising."""
    try:
        import cuda_ext_example
    except ImportError as exc:
        return None, f"cuda_ext_example is not importable: {exc}"
    where = (
        f"cuda_ext_example {getattr(cuda_ext_example, '__version__', '?')} "
        f"from {Path(cuda_ext_example.__file__).parent}"
    )
    return getattr(cuda_ext_example, "my_square", None), where


def compiled_square(dynamic: bool, max_shapes: int) -> Callable:
    """torch.compile of torch.square, set up as benchmark.compiled_add sets up the add's:
    a clean dynamo cache, room for one static-shape kernel per N, and hitting the recompile
    limit fails instead of timing eager under this label."""
    import torch
    import torch._dynamo

    torch._dynamo.reset()
    config = torch._dynamo.config
    if hasattr(config, "recompile_limit"):
        config.recompile_limit = max(config.recompile_limit, max_shapes + 2)
    if hasattr(config, "fail_on_recompile_limit_hit"):
        config.fail_on_recompile_limit_hit = True

    def square(x):
        return torch.square(x)

    return torch.compile(square, dynamic=dynamic)


def implementations(my_square: Callable, dynamic: bool, max_shapes: int) -> dict[str, Callable]:
    """name -> fn(x) returning a new tensor, peers first."""
    import torch

    from .triton_square import triton_square

    return {
        "torch.square": torch.square,
        "torch.compile": compiled_square(dynamic, max_shapes),
        "triton": triton_square,
        OURS: my_square,
    }


def check_outputs(impls: dict[str, Callable], x, label: str) -> None:
    """Every implementation must equal torch.square bit for bit before it is timed."""
    import torch

    expected = torch.square(x)
    for name, fn in impls.items():
        got = fn(x)
        if got.shape != expected.shape or got.dtype != expected.dtype:
            raise SystemExit(
                f"FAIL {name} {label}: got {got.dtype} {tuple(got.shape)}, "
                f"expected {expected.dtype} {tuple(expected.shape)}"
            )
        differ = got.contiguous().view(torch.int32) != expected.view(torch.int32)
        if bool(differ.any()):
            raise SystemExit(
                f"FAIL {name} {label}: {int(differ.sum())} elements differ from torch.square"
            )


def fresh_input(cols: int):
    import torch

    return torch.randn(ROWS, cols, dtype=torch.float32, device=benchmark.DEVICE)


def run_cells(
    cols_log2: Sequence[int], impls: dict[str, Callable], settings: benchmark.Settings
) -> list[Record]:
    import torch

    records = []
    for k in cols_log2:
        cols = 2**k
        label = f"({ROWS}, 2^{k}) {DTYPE}"
        check_outputs(impls, fresh_input(cols), label)  # also compiles torch.compile's kernel

        def round_impls(cols=cols):
            x = fresh_input(cols)
            return {name: functools.partial(fn, x) for name, fn in impls.items()}

        for name, samples in benchmark.time_rounds(round_impls, settings).items():
            record = record_for(cols, name, samples)
            records.append(record)
            print(
                f"  {label:<20} {name:<14} {record.ms * 1e3:10.2f} us "
                f"{record.gbps:9.1f} GB/s ±{record.spread_pct:.1f}%",
                file=sys.stderr,
                flush=True,
            )
        torch.cuda.empty_cache()
    return records


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    my_square, installed = find_my_square()
    if not torch.cuda.is_available():
        note = "" if my_square else f"; note: {NO_MY_SQUARE} ({installed})"
        print(
            f"scripts.bench.square: no CUDA GPU here (torch {torch.__version__}), "
            f"nothing measured: run it on a machine with an NVIDIA GPU{note}",
            file=sys.stderr,
        )
        return 2
    if my_square is None:
        print(
            f"scripts.bench.square: {NO_MY_SQUARE} ({installed}); install a wheel that has it",
            file=sys.stderr,
        )
        return 1
    try:
        import triton.testing  # noqa: F401  (do_bench times every implementation)
    except ImportError as exc:
        print(f"scripts.bench.square: needs triton for triton.testing.do_bench: {exc}")
        return 1

    settings = benchmark.settings_for(args)
    now = datetime.now(timezone.utc)
    from scripts.gpu.facts import benchmark_facts

    compile_mode = "dynamic shapes" if settings.compile_dynamic else "static shapes, per N"
    meta = {
        **benchmark_facts(now),
        "settings": f"do_bench warmup={settings.warmup_ms} ms rep={settings.rep_ms} ms per "
        f"implementation (median), {settings.rounds} {benchmark.ROUND_ORDER}; "
        f"torch.compile {compile_mode}",
    }
    print("\n".join(f"{k}: {v}" for k, v in meta.items()), flush=True)

    roofline = benchmark.measure_roofline_gbps(settings)
    print(f"copy roofline: {roofline:.1f} GB/s", flush=True)
    impls = implementations(my_square, settings.compile_dynamic, max_shapes=len(args.cols))
    records = run_cells(args.cols, impls, settings)

    paths, target, rows = write_reports(records, roofline, meta, args.out, now.strftime("%Y-%m-%d"))
    print()
    print(format_table(rows))
    print()
    print(format_verdict(target))
    print()
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
