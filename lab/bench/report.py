"""The reporting half of the benchmark: records, ratios, targets, the stdout table, markdown,
CSV and plot, for any workload. Pure functions of the measured numbers, so tests check them on
fake timings with no GPU."""

from __future__ import annotations

import csv
import math
import re
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .workload import Extra, Workload

# A device-to-device copy that moves what the op moves: a bandwidth bar, not a peer.
COPY = "copy"
# dtype name -> bytes per element. The names are also torch attribute names.
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "int64": 8}

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


@dataclass(frozen=True)
class Record:
    """One cell: `impl` at `size` (what the workload's sizes count) in `dtype` took `ms`, the
    median of the rounds; `spread_pct`: (slowest - fastest round) / median, in %; `rounds_ms`:
    each round's time, in the order the rounds ran (empty where only the median is known)."""

    size: int
    dtype: str
    impl: str
    ms: float
    gbps: float
    spread_pct: float = 0.0
    rounds_ms: tuple[float, ...] = ()


@dataclass(frozen=True)
class Row:
    """A Record with what its neighbours give: % of the copy roofline and the ratio of its GB/s
    to the best peer's at the same (size, dtype); > 1 is faster."""

    record: Record
    pct_roofline: float
    ratio_best_peer: float


@dataclass(frozen=True)
class Target:
    name: str
    status: str  # PASS, MISS, NOISE, or N/A where the run did not measure what it needs
    measured: str


def spread_pct(values: Sequence[float]) -> float:
    """How far rounds lie apart: (largest - smallest) / median, in %."""
    return (max(values) - min(values)) / statistics.median(values) * 100


def ratio_spread_pct(ours: Record, theirs: Record) -> float:
    """The round-to-round spread of the ratio of two records of one cell, in %: what noise can
    do to the ratio a target judges. Their rounds ran side by side, so a slow stretch of the
    GPU slows both and cancels in each round's ratio. Without both records' rounds, the larger
    of the two spreads."""
    if len(ours.rounds_ms) < 2 or len(ours.rounds_ms) != len(theirs.rounds_ms):
        return max(ours.spread_pct, theirs.spread_pct)
    return spread_pct([t / o for o, t in zip(ours.rounds_ms, theirs.rounds_ms, strict=True)])


def best_peer(records: Sequence[Record], peers: Sequence[str]) -> dict[tuple[int, str], Record]:
    """(size, dtype) -> the record of the fastest peer there."""
    best: dict[tuple[int, str], Record] = {}
    for r in records:
        key = (r.size, r.dtype)
        if r.impl in peers and (key not in best or r.gbps > best[key].gbps):
            best[key] = r
    return best


def size_label(size: int) -> str:
    """2^k for powers of two (every size the CLI measures), the count otherwise."""
    if size > 0 and size & (size - 1) == 0:
        return f"2^{size.bit_length() - 1}"
    return str(size)


def _ordered(values: Iterable[str], preferred: Sequence[str]) -> list[str]:
    """The distinct values, those of `preferred` first in its order, the rest as they come."""
    seen = list(dict.fromkeys(values))
    return [v for v in preferred if v in seen] + [v for v in seen if v not in preferred]


def dtypes_of(records: Sequence[Record]) -> list[str]:
    return _ordered((r.dtype for r in records), tuple(DTYPE_BYTES))


def annotate(records: Sequence[Record], roofline_gbps: float, workload: Workload) -> list[Row]:
    """Rows sorted by dtype, size and implementation, with % of roofline and the ratio to the
    best peer (nan where no peer was measured at that size and dtype)."""
    best = best_peer(records, workload.peers)
    dtype_rank = {d: i for i, d in enumerate(dtypes_of(records))}
    impl_rank = {m: i for i, m in enumerate(_ordered((r.impl for r in records), workload.impls))}
    rows = []
    for r in sorted(records, key=lambda r: (dtype_rank[r.dtype], r.size, impl_rank[r.impl])):
        peer = best.get((r.size, r.dtype))
        ratio = r.gbps / peer.gbps if peer else math.nan
        rows.append(Row(r, 100.0 * r.gbps / roofline_gbps, ratio))
    return rows


def index(rows: Sequence[Row]) -> dict[tuple[int, str, str], Row]:
    return {(row.record.size, row.record.dtype, row.record.impl): row for row in rows}


def judged_vs_best_peer(
    records: Sequence[Record], roofline_gbps: float, workload, label, log2_sizes=None
) -> tuple[dict[str, float | None], dict[str, float]]:
    """The judged implementation's ratio to the best peer per cell (`label(record)` names
    it; None where it was not measured), and each ratio's round spread; the sizes of
    `log2_sizes` only, if given."""
    best = best_peer(records, workload.peers)
    ratios: dict[str, float | None] = {}
    spreads: dict[str, float] = {}
    for row in annotate(records, roofline_gbps, workload):
        r = row.record
        if log2_sizes is not None and r.size.bit_length() - 1 not in log2_sizes:
            continue
        ratios.setdefault(label(r), None)
        if r.impl == workload.judged and (r.size, r.dtype) in best:
            ratios[label(r)] = row.ratio_best_peer
            spreads[label(r)] = ratio_spread_pct(r, best[r.size, r.dtype])
    return ratios, spreads


def best_peer_target(
    records: Sequence[Record], roofline_gbps: float, workload, log2_sizes: range, ratio: float
) -> Target:
    """The judged op's GB/s >= `ratio` x the best peer at every dtype and size 2^k, k in
    `log2_sizes` (the GELU and AdamW workloads' target)."""
    ratios, spreads = judged_vs_best_peer(
        records, roofline_gbps, workload, lambda r: f"{r.dtype} {size_label(r.size)}", log2_sizes
    )
    name = (
        f"GB/s >= {ratio:.2f}x best of {', '.join(workload.peers)} "
        f"at 2^{log2_sizes[0]}..2^{log2_sizes[-1]}"
    )
    return cell_target(name, ratios, ratio, spreads)


def cell_target(
    name: str,
    cells: dict[str, float | None],
    threshold: float,
    spread: dict[str, float] | None = None,
) -> Target:
    """PASS when every cell's ratio is >= threshold; MISS when a measured one is below; N/A
    when none is below but some were not measured (a partial run).

    `spread` (label -> %): the round-to-round spread of a cell's ratio. A cell below the
    threshold by less than that still counts as below (the targets are strict); the report only
    says how many misses such noise could explain."""
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


def _fmt_ratio(ratio: float) -> str:
    return "-" if math.isnan(ratio) else f"{ratio:.2f}x"


# --------------------------------------------------------------------------- text


def format_table(rows: Sequence[Row], size_name: str = "size", label=size_label) -> str:
    """The long stdout table: one line per measurement, a blank line between cells."""
    header = (
        size_name,
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
            label(row.record.size),
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
    align = "<<<>>>>>"  # text left, numbers right

    def fmt(cells: Sequence[str]) -> str:
        return "  ".join(f"{c:{a}{w}}" for c, a, w in zip(cells, align, widths, strict=True))

    out = [fmt(header).rstrip(), fmt(["-" * w for w in widths])]
    previous = None
    for row, line in zip(rows, lines, strict=True):
        cell = (row.record.size, row.record.dtype)
        if previous is not None and cell != previous:
            out.append("")
        previous = cell
        out.append(fmt(line).rstrip())
    return "\n".join(out)


def format_targets(targets: Sequence[Target], judged: str) -> str:
    lines = [f"Targets ({judged}):"]
    lines += [f"  [{t.status:<4}] {t.name}: {t.measured}" for t in targets]
    return "\n".join(lines)


def render_markdown(
    workload: Workload,
    meta: dict[str, str],
    rows: Sequence[Row],
    targets: Sequence[Target],
    roofline_gbps: float,
    extra_markdown: Sequence[str] = (),
    plot_name: str | None = None,
) -> str:
    """The report: versions, method, targets, the workload's own section, then one GB/s table
    per dtype."""
    out = [f"# cuda_ext_example {workload.name} benchmark: {meta.get('GPU', 'unknown GPU')}", ""]
    out += [f"- **{key}**: {value}" for key, value in meta.items()]
    out += [
        "",
        f"{workload.about} Copy roofline: **{roofline_gbps:.1f} GB/s** (`dst.copy_(src)` of 1 "
        "GiB, bytes read + written); `copy` below is a copy that moves what one call moves: a "
        "bar, not a peer. Times are CUDA-event medians from `triton.testing.do_bench`, which "
        "flushes L2 before every call (small sizes can still exceed the roofline: the output is "
        "written back from L2 after the kernel ends), each the median of rounds in which one "
        "do_bench called every implementation in turn. A target cell's miss is set against the "
        "round-to-round spread of its ratio (the CSV has each cell's rounds).",
        "",
        f"## Targets ({workload.judged})",
        "",
        "| status | target | measured |",
        "|---|---|---|",
    ]
    out += [f"| {t.status} | {t.name} | {t.measured} |" for t in targets]
    out += list(extra_markdown)
    if plot_name:
        out += ["", f"![GB/s per size]({plot_name})"]
    out += _gbps_tables(workload, rows)
    return "\n".join(out) + "\n"


def _gbps_tables(workload: Workload, rows: Sequence[Row]) -> list[str]:
    records = [row.record for row in rows]
    cells = index(rows)
    impls = _ordered((r.impl for r in records), workload.impls)
    judged = workload.judged
    out = [
        "",
        "## GB/s per size",
        "",
        "Each cell: GB/s (ratio to the best peer of that row, the fastest of "
        f"{', '.join(workload.peers)}; above 1.00x is faster).",
    ]
    for dtype in dtypes_of(records):
        out += ["", f"### {dtype}", ""]
        out.append(f"| {workload.size_name} | " + " | ".join(impls) + f" | {judged} % roofline |")
        out.append("|---|" + "---:|" * (len(impls) + 1))
        for size in sorted({r.size for r in records if r.dtype == dtype}):
            line = []
            for impl in impls:
                row = cells.get((size, dtype, impl))
                line.append(
                    f"{row.record.gbps:.0f} ({_fmt_ratio(row.ratio_best_peer)})" if row else "-"
                )
            ours = cells.get((size, dtype, judged))
            line.append(f"{ours.pct_roofline:.1f}%" if ours else "-")
            out.append(f"| {workload.label(size)} | " + " | ".join(line) + " |")
    return out


# --------------------------------------------------------------------------- files


def slug(text: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3'."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "gpu"


def output_paths(out_dir: Path, workload: str, gpu_name: str, date: str) -> dict[str, Path]:
    stem = f"{workload}-{slug(gpu_name)}-{date}"
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
                    r.size.bit_length() - 1,
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


def plot(
    workload: Workload, records: Sequence[Record], roofline_gbps: float, path: Path, title: str
) -> None:
    """One subplot per dtype: GB/s against log2(size), one line per implementation, the copy
    roofline dashed."""
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
        for impl in _ordered((r.impl for r in records), workload.impls):
            points = sorted((r.size, r.gbps) for r in records if (r.dtype, r.impl) == (dtype, impl))
            if points:
                ax.plot(
                    [workload.plot_x(s) for s, _ in points],
                    [g for _, g in points],
                    marker="o",
                    markersize=3,
                    label=impl,
                    linewidth=2.2 if impl == workload.judged else 1.3,
                )
        ax.axhline(roofline_gbps, linestyle="--", color="black", linewidth=1, label="copy roofline")
        ax.set_ylim(bottom=0)  # from 0, so the gaps between lines are not exaggerated
        ax.set_title(dtype)
        if workload.cases:  # named shapes, not log2 sizes
            ax.set_xticks(range(len(workload.cases)))
            ax.set_xticklabels(map(workload.label, workload.cases), rotation=60, fontsize="x-small")
        ax.set_xlabel(workload.size_name if workload.cases else f"log2({workload.size_name})")
        ax.set_ylabel("GB/s")
        ax.grid(True, alpha=0.3)
    for ax in flat[len(dtypes) :]:
        ax.set_visible(False)
    flat[0].legend(fontsize="small", loc="upper left")
    fig.suptitle(f"{workload.name}: {title}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    _palette(path)


def _palette(path: Path) -> None:
    """The PNG in 256 colours, a third of its size or less: results are committed, and a
    line plot needs no more."""
    from PIL import Image

    with Image.open(path) as image:
        small = image.convert("RGB").quantize(colors=256)
    small.save(path, optimize=True)


def write_reports(
    workload: Workload,
    records: Sequence[Record],
    roofline_gbps: float,
    meta: dict[str, str],
    out_dir: Path,
    date: str,
    extra: Extra | None = None,
) -> tuple[dict[str, Path], list[Target], list[Row]]:
    """Write the .md, .csv and .png; return their paths, the targets (the workload's cell
    targets, then its extra ones) and the rows."""
    rows = annotate(records, roofline_gbps, workload)
    targets = workload.targets(records, roofline_gbps) + (extra.targets if extra else [])
    gpu = meta.get("GPU", "gpu")
    paths = output_paths(out_dir, workload.name, gpu, date)
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    write_csv(rows, paths["csv"])
    plot(workload, records, roofline_gbps, paths["png"], title=gpu)
    markdown = render_markdown(
        workload,
        meta,
        rows,
        targets,
        roofline_gbps,
        extra.markdown if extra else (),
        paths["png"].name,
    )
    paths["md"].write_text(markdown)
    return paths, targets, rows
