"""The reporting half of the benchmark (benchmark.py): records, ratios, targets, table,
markdown, CSV and plot. Pure functions of the measured numbers, so
tests/test_benchmark.py checks them on fake timings with no GPU."""

from __future__ import annotations

import csv
import math
import re
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

# --------------------------------------------------------------------------- constants

PEERS = ("torch.add", "torch.compile", "triton")
OURS = ("my_add", "my_fast_add")
# A device-to-device copy that moves the same bytes as the add (1.5n elements read, 1.5n
# written): the size-matched bandwidth bar, not a peer.
COPY = "copy"
IMPLS = PEERS + OURS + (COPY,)

# dtype name -> bytes per element. The names are also torch attribute names.
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "int64": 8}

# An elementwise add reads a and b and writes the output.
TENSORS_OF_TRAFFIC = 3


HOST_N = 1024  # launch-bound size for the host-overhead measurement (float32)

# The targets my_fast_add is held to (see evaluate_targets).
TARGET_DTYPES = ("float32", "bfloat16")
PEER_TARGET_LOG2 = range(20, 29)
PEER_TARGET_RATIO = 1.00
EAGER_TARGET_LOG2 = range(20, 25)
EAGER_TARGET_RATIO = 1.05
ROOFLINE_TARGET_LOG2 = 28
ROOFLINE_TARGET_DTYPE = "float32"
ROOFLINE_TARGET_FRACTION = 0.98
HOST_TARGET_RATIO = 1.25
COPY_TARGET_LOG2 = range(20, 29)
COPY_TARGET_RATIO = 0.99
COLDSTART_TARGET_MS = 0.5  # first call of ours over torch's first new kernel

PASS, MISS, NA = "PASS", "MISS", "N/A"
# Every cell below the target is below it by less than its own round-to-round spread.
NOISE = "MISS within spread"

CSV_COLUMNS = (
    "size",
    "log2_size",
    "dtype",
    "impl",
    "ms",
    "gbps",
    "pct_roofline",
    "ratio_best_peer",
    "spread_pct",
    "rounds_ms",  # each round's time, ';'-separated: a ratio's spread can be redone from these
)


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class Record:
    """One measurement: `impl` added two `size`-element `dtype` tensors in `ms` (the median
    of the rounds); `spread_pct`: (slowest - fastest round) / median, in %; `rounds_ms`: each
    round's time, in the order the rounds ran (empty where only the median is known)."""

    size: int
    dtype: str
    impl: str
    ms: float
    gbps: float
    spread_pct: float = 0.0
    rounds_ms: tuple[float, ...] = ()


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


def make_record(size: int, dtype: str, impl: str, ms: float, spread_pct: float = 0.0) -> Record:
    return Record(size, dtype, impl, ms, traffic_gbps(size, dtype, ms), spread_pct)


def spread_pct(values: Sequence[float]) -> float:
    """How far a cell's rounds lie apart: (largest - smallest) / median, in %."""
    return (max(values) - min(values)) / statistics.median(values) * 100


def record_from_rounds(size: int, dtype: str, impl: str, samples_ms: Sequence[float]) -> Record:
    """The record of one cell timed in several rounds: their median and spread."""
    ms = statistics.median(samples_ms)
    record = make_record(size, dtype, impl, ms, spread_pct(samples_ms))
    return replace(record, rounds_ms=tuple(samples_ms))


def ratio_spread_pct(ours: Record, theirs: Record) -> float:
    """The round-to-round spread of the ratio of two records of one cell, in %: what noise
    can do to the ratio a target judges. Their rounds ran side by side (benchmark.time_rounds
    times every implementation of a round in one do_bench), so a slow stretch of the GPU
    slows both and cancels in each round's ratio, while it widens each record's own spread
    (3-8% at 2^21..2^23 on the H200, where the ratio moves 0.4-1.8%). Without the rounds of
    both (a record made from its median alone, make_record), the larger of the two spreads."""
    if len(ours.rounds_ms) < 2 or len(ours.rounds_ms) != len(theirs.rounds_ms):
        return max(ours.spread_pct, theirs.spread_pct)
    return spread_pct([t / o for o, t in zip(ours.rounds_ms, theirs.rounds_ms, strict=True)])


def best_peer_impl(records: Sequence[Record]) -> dict[tuple[int, str], Record]:
    """(size, dtype) -> the record of the fastest peer there."""
    best: dict[tuple[int, str], Record] = {}
    for r in records:
        key = (r.size, r.dtype)
        if r.impl in PEERS and (key not in best or r.gbps > best[key].gbps):
            best[key] = r
    return best


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
    return {key: r.gbps for key, r in best_peer_impl(records).items()}


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
    header = (
        "size",
        "dtype",
        "impl",
        "time (us)",
        "spread %",
        "GB/s",
        "% roofline",
        "vs best peer",
    )
    lines = [
        (
            size_label(row.record.size),
            row.record.dtype,
            row.record.impl,
            f"{row.record.ms * 1e3:.2f}",
            f"{row.record.spread_pct:.1f}",
            f"{row.record.gbps:.1f}",
            f"{row.pct_roofline:.1f}",
            _fmt_ratio(row.ratio_best_peer),
        )
        for row in rows
    ]
    widths = [max(len(cell) for cell in column) for column in zip(header, *lines, strict=True)]
    # Text columns left-aligned, numbers right-aligned.
    align = ["<", "<", "<", ">", ">", ">", ">", ">"]

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


def _cell_target(
    name: str,
    cells: dict[str, float | None],
    threshold: float,
    spread: dict[str, float] | None = None,
) -> Target:
    """PASS when every cell's ratio is >= threshold; MISS when a measured one is below;
    N/A when none is below but some were not measured (a partial run).

    `spread` (label -> %): the round-to-round spread of a cell's ratio. A cell
    below the threshold by less than that still counts as below (the targets are strict);
    the report only says how many misses such noise could explain."""
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
        if spread:
            noisy = [k for k, v in below.items() if (threshold - v) * 100 <= spread.get(k, 0.0)]
            parts.append(f"{len(noisy)} of those within the spread of the rounds")
            if len(noisy) == len(below):
                return Target(name, NOISE, "; ".join(parts))
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

    best = best_peer_impl(records)

    def spread_vs(other: Callable[[int, str], Record | None], log2_sizes) -> dict[str, float]:
        """label -> the spread of my_fast_add's ratio to the record it is compared with."""
        out = {}
        for dtype in TARGET_DTYPES:
            for k in log2_sizes:
                ours, theirs = index.get((2**k, dtype, "my_fast_add")), other(2**k, dtype)
                if ours and theirs:
                    out[f"{dtype} 2^{k}"] = ratio_spread_pct(ours.record, theirs)
        return out

    def records_of(impl: str) -> Callable[[int, str], Record | None]:
        """(size, dtype) -> impl's record there, or None."""

        def record(size: int, dtype: str) -> Record | None:
            row = index.get((size, dtype, impl))
            return row.record if row else None

        return record

    dtypes = " and ".join(TARGET_DTYPES)
    first, last = PEER_TARGET_LOG2[0], PEER_TARGET_LOG2[-1]
    targets = [
        _cell_target(
            f"GB/s >= {PEER_TARGET_RATIO:.2f}x best peer at every size 2^{first}..2^{last}, "
            f"{dtypes}",
            _ratio_cells(index, PEER_TARGET_LOG2, TARGET_DTYPES, vs_best_peer),
            PEER_TARGET_RATIO,
            spread_vs(lambda size, dtype: best.get((size, dtype)), PEER_TARGET_LOG2),
        )
    ]
    first, last = EAGER_TARGET_LOG2[0], EAGER_TARGET_LOG2[-1]
    targets.append(
        _cell_target(
            f"GB/s >= {EAGER_TARGET_RATIO:.2f}x torch.add at 2^{first}..2^{last}, {dtypes}",
            _ratio_cells(index, EAGER_TARGET_LOG2, TARGET_DTYPES, vs_torch_add),
            EAGER_TARGET_RATIO,
            spread_vs(records_of("torch.add"), EAGER_TARGET_LOG2),
        )
    )
    first, last = COPY_TARGET_LOG2[0], COPY_TARGET_LOG2[-1]

    def vs_copy(size: int, dtype: str) -> float | None:
        copy, eager = index.get((size, dtype, COPY)), index.get((size, dtype, "torch.add"))
        if not copy or not eager or copy.record.gbps <= eager.record.gbps:
            return math.inf  # the copy is no faster than torch.add here: nothing to meet
        return index[size, dtype, "my_fast_add"].record.gbps / copy.record.gbps

    cells = {k: v for k, v in _ratio_cells(index, COPY_TARGET_LOG2, TARGET_DTYPES, vs_copy).items()
             if v != math.inf}  # fmt: skip
    targets.append(
        _cell_target(
            f"GB/s >= {COPY_TARGET_RATIO:.2f}x the size-matched copy where the copy beats "
            f"torch.add, 2^{first}..2^{last}, {dtypes}",
            cells,
            COPY_TARGET_RATIO,
            spread_vs(records_of(COPY), COPY_TARGET_LOG2),
        )
    )
    targets.append(_roofline_target(index, roofline_gbps))
    targets.append(_host_target(host_us))
    return targets


def coldstart_target(ours_ms: float | None, torch_ms: float | None) -> Target:
    name = (f"first call of a process <= {COLDSTART_TARGET_MS} ms over torch's first new "
            "kernel")  # fmt: skip
    if ours_ms is None or torch_ms is None:
        return Target(name, NA, "not measured in this run")
    over = ours_ms - torch_ms
    status = PASS if over <= COLDSTART_TARGET_MS else MISS
    return Target(name, status, f"{ours_ms:.2f} ms vs {torch_ms:.2f} ms = {over:+.2f} ms")


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
                    f"{r.spread_pct:.2f}",
                    ";".join(f"{ms:.6g}" for ms in r.rounds_ms),
                ]
            )


def header(benchmark: str, meta: dict[str, str]) -> list[str]:
    """A report's title and its versions (GPU, driver, torch, ...), one bullet each."""
    out = [f"# cuda_ext_example {benchmark} benchmark: {meta.get('GPU', 'unknown GPU')}", ""]
    return out + [f"- **{key}**: {value}" for key, value in meta.items()]


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
    out = header("add", meta)
    out += [
        "",
        f"Copy roofline: **{roofline_gbps:.1f} GB/s** (`dst.copy_(src)` of 1 GiB, bytes read "
        "+ written). GB/s below counts 3 tensors of traffic (a, b read, out written): "
        "3 * n * element_size / time. Times are CUDA-event medians from "
        "`triton.testing.do_bench`, which flushes L2 before every call; small sizes can "
        "still exceed the roofline because the output is written back from L2 after the "
        "kernel ends. Each time is the median of rounds, in each of which one do_bench "
        "called every implementation in turn; the CSV and the stdout table give each cell's "
        "spread, (slowest - fastest round) / median. A target cell's miss is set against the "
        "spread of its ratio over the rounds (a slow stretch of the GPU slows every "
        "implementation of a round alike).",
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
            "`torch.cuda.synchronize()`, best of interleaved rounds: the host-side cost of "
            "a call, which is what a tiny add costs the caller.",
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
    coldstart: Target | None = None,
) -> tuple[dict[str, Path], list[Target], list[Row]]:
    """Write the .md, .csv and .png; return their paths, the targets (the cold-start one
    measured apart, in fresh processes) and the rows."""
    rows = annotate(records, roofline_gbps)
    targets = evaluate_targets(records, roofline_gbps, host_us)
    if coldstart is not None:
        targets.append(coldstart)
    paths = output_paths(out_dir, meta.get("GPU", "gpu"), date)
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    write_csv(rows, paths["csv"])
    plot_results(records, roofline_gbps, paths["png"], title=meta.get("GPU", ""))
    markdown = render_markdown(meta, rows, targets, roofline_gbps, host_us, paths["png"].name)
    paths["md"].write_text(markdown)
    return paths, targets, rows
