"""The benchmark on fake timings: the add workload's ratios and targets, report.py's table,
markdown, CSV and plot, timing.py's rounds, and the command line. No GPU, no triton."""

from __future__ import annotations

import csv
import dataclasses
import math
import sys
import types
from pathlib import Path

import pytest

from lab.bench import adamw, add, benchmark, gelu, report, square, timing
from lab.bench.workload import Extra

ROOT = Path(__file__).resolve().parents[2]
ADD = add.WORKLOAD
MISS, NA, PASS, NOISE = report.MISS, report.NA, report.PASS, report.NOISE

ROOFLINE = 3000.0
HOST_US = {
    "torch.add": 5.0,
    "torch.compile": 20.0,
    "triton": 12.0,
    "my_add": 6.0,
    "my_fast_add": 5.1,
}
# GB/s of every implementation in every cell, before the per-test tweaks: my_fast_add is
# 2200 / 2100 = 1.048x the best peer (torch.compile), 1.10x torch.add and 1.023x the
# size-matched copy (not a peer), which beats torch.add everywhere, so every copy cell counts.
BASE_GBPS = {
    "torch.add": 2000.0,
    "torch.compile": 2100.0,
    "triton": 2050.0,
    "my_add": 1500.0,
    "my_fast_add": 2200.0,
    report.COPY: 2150.0,
}
DTYPES = ("float32", "bfloat16", "int64")
SIZES = range(12, 29)


def rec(k: int, dtype: str, impl: str, gbps: float) -> report.Record:
    """A record of one round whose time gives exactly `gbps` (3 tensors of traffic)."""
    nbytes = 3 * 2**k * report.DTYPE_BYTES[dtype]
    return ADD.record(2**k, dtype, impl, [nbytes / (gbps * 1e9) * 1e3])


def targets_of(records, host_us=None):
    """The add's targets: its cell targets, then the host-time one."""
    host = HOST_US if host_us is None else host_us
    return ADD.targets(records, ROOFLINE) + [add.host_target(host)]


def fake_records(overrides: dict[tuple[int, str, str], float] | None = None):
    """Every (size, dtype, impl) at BASE_GBPS, except the (log2, dtype, impl) overrides."""
    overrides = {
        # Better than every peer and at 98.3% of the roofline: the roofline target passes.
        (28, "float32", "my_fast_add"): 2950.0,
        # Far below the peers, but at 2^14: outside every target's range.
        (14, "bfloat16", "my_fast_add"): 1000.0,
        # Worse than the peers (0.95x), but int64 is not a target dtype.
        (20, "int64", "my_fast_add"): 1995.0,
        **(overrides or {}),
    }
    return [
        rec(k, dtype, impl, overrides.get((k, dtype, impl), gbps))
        for dtype in DTYPES
        for k in SIZES
        for impl, gbps in BASE_GBPS.items()
    ]


def by_name(targets):
    """Targets keyed by their position's meaning (the names carry the numbers)."""
    keys = ("best_peer", "torch_add", "copy", "roofline", "host")
    assert len(targets) == len(keys)
    return dict(zip(keys, targets, strict=True))


def test_gbps_counts_three_tensors():
    # 2^20 float32 elements in 1 ms: 3 * 4 MiB / 1 ms.
    assert ADD.tensors == 3
    assert ADD.gbps(2**20, "float32", 1.0) == pytest.approx(3 * 4 * 2**20 / 1e6)
    r = ADD.record(2**10, "bfloat16", "my_add", [0.5])
    assert r.gbps == pytest.approx(3 * 2 * 2**10 / 0.5e-3 / 1e9)
    assert rec(20, "int64", "triton", 1234.5).gbps == pytest.approx(1234.5)


def test_ratio_to_best_peer_and_roofline():
    rows = report.annotate(fake_records(), ROOFLINE, ADD)
    index = {(r.record.size, r.record.dtype, r.record.impl): r for r in rows}
    cell = {impl: index[2**20, "float32", impl] for impl in BASE_GBPS}
    assert report.COPY in ADD.impls and report.COPY not in ADD.peers
    # The best peer is torch.compile (2100); peers get their ratio to it too.
    assert cell["torch.compile"].ratio_best_peer == pytest.approx(1.0)
    assert cell["torch.add"].ratio_best_peer == pytest.approx(2000 / 2100)
    assert cell["triton"].ratio_best_peer == pytest.approx(2050 / 2100)
    assert cell["my_add"].ratio_best_peer == pytest.approx(1500 / 2100)
    assert cell["my_fast_add"].ratio_best_peer == pytest.approx(2200 / 2100)
    assert cell["my_fast_add"].pct_roofline == pytest.approx(100 * 2200 / 3000)
    # The copy is not a peer (the best stays torch.compile), but it gets its ratio too.
    assert cell[report.COPY].ratio_best_peer == pytest.approx(2150 / 2100)
    assert index[2**28, "float32", "my_fast_add"].pct_roofline == pytest.approx(100 * 2950 / 3000)
    # Worse in one cell, better in the others.
    assert index[2**14, "bfloat16", "my_fast_add"].ratio_best_peer == pytest.approx(1000 / 2100)
    # Sorted by dtype, then size, then implementation (peers first, the copy last).
    assert [r.record.impl for r in rows[: len(ADD.impls)]] == list(ADD.impls)
    assert ADD.impls[-1] == report.COPY
    assert [r.record.dtype for r in rows[:: len(rows) // 3]] == list(DTYPES)


def test_best_peer_ignores_our_implementations():
    records = [rec(16, "float32", "torch.add", 100.0), rec(16, "float32", "my_fast_add", 900.0)]
    assert report.best_peer(records, ADD.peers) == {(2**16, "float32"): records[0]}
    rows = report.annotate([rec(16, "float32", "my_add", 1.0)], ROOFLINE, ADD)
    assert math.isnan(rows[0].ratio_best_peer)  # no peer measured there


def test_targets_on_the_base_numbers():
    targets = by_name(targets_of(fake_records()))
    assert {k: t.status for k, t in targets.items()} == {
        "best_peer": PASS,
        "torch_add": PASS,
        "copy": PASS,
        "roofline": PASS,
        "host": PASS,
    }
    assert "worst 1.048x" in targets["best_peer"].measured
    assert "worst 1.100x" in targets["torch_add"].measured
    assert "worst 1.023x" in targets["copy"].measured
    assert "2^20..2^28" in targets["best_peer"].name
    assert "2^20..2^28" in targets["copy"].name
    assert "1.50x torch.add and below triton and torch.compile" in targets["host"].name
    assert "98.3% of 3000.0 GB/s" in targets["roofline"].measured
    assert "5.10 us vs 5.00 us = 1.020x; triton 12.00 us, torch.compile 20.00 us" in (
        targets["host"].measured
    )


def with_spread(records, spread: dict[tuple[int, str, str], float]):
    """The records with the (log2, dtype, impl) -> spread_pct of `spread`, 0 elsewhere."""
    return [
        dataclasses.replace(
            r, spread_pct=spread.get((r.size.bit_length() - 1, r.dtype, r.impl), 0.0)
        )
        for r in records
    ]


def test_a_miss_outside_the_rounds_spread_is_a_miss(tmp_path):
    # Two cells below the best peer (torch.compile, 2100): 0.990x with a 2% spread of the
    # rounds (noise could explain it), 0.952x with a 1% spread (it cannot).
    records = fake_records(
        {(22, "float32", "my_fast_add"): 2079.0, (26, "float32", "my_fast_add"): 2000.0}
    )
    spread = {(22, "float32", "torch.compile"): 2.0, (26, "float32", "my_fast_add"): 1.0}
    records = with_spread(records, spread)
    target = by_name(targets_of(records))["best_peer"]
    assert target.status == MISS  # one miss noise cannot explain: a plain MISS
    assert "2/18 below" in target.measured
    assert "1 of those within the spread of the rounds" in target.measured
    # The spread travels to the CSV.
    report.write_csv(report.annotate(records, ROOFLINE, ADD), tmp_path / "r.csv")
    with open(tmp_path / "r.csv", newline="") as f:
        spreads = {
            (r["log2_size"], r["impl"], r["dtype"]): r["spread_pct"] for r in csv.DictReader(f)
        }
    assert spreads["22", "torch.compile", "float32"] == "2.00"
    assert spreads["22", "my_fast_add", "float32"] == "0.00"


def test_misses_all_within_the_rounds_spread_are_noise_not_pass():
    # 2079 / 2100 = 0.990x the best peer: 1% below, within torch.compile's 2% spread (the
    # larger of the two spreads in the ratio counts).
    records = fake_records({(22, "float32", "my_fast_add"): 2079.0})
    noisy = with_spread(records, {(22, "float32", "torch.compile"): 2.0})
    target = by_name(targets_of(noisy))["best_peer"]
    assert target.status == NOISE == "MISS within spread"
    assert target.status != PASS
    assert "worst 0.990x at float32 2^22" in target.measured
    assert "1/18 below" in target.measured
    assert "1 of those within the spread of the rounds" in target.measured
    text = report.format_targets(targets_of(noisy), "my_fast_add")
    assert "[MISS within spread] GB/s >= 1.00x best peer" in text
    # Our own spread counts the same as the peer's.
    noisy = with_spread(records, {(22, "float32", "my_fast_add"): 2.0})
    target = by_name(targets_of(noisy))["best_peer"]
    assert target.status == NOISE
    # A spread smaller than the 1% shortfall, or none at all: a plain MISS.
    for spread in ({(22, "float32", "torch.compile"): 0.5}, {}):
        targets = targets_of(with_spread(records, spread))
        assert by_name(targets)["best_peer"].status == MISS, spread
    # The spread of a record that is not in the ratio (triton is not the best peer) does not.
    noisy = with_spread(records, {(22, "float32", "triton"): 5.0})
    target = by_name(targets_of(noisy))["best_peer"]
    assert target.status == MISS


def test_best_peer_target_misses_on_one_cell():
    # 2000 GB/s at 2^26 float32 is 0.952x torch.compile's 2100: one cell below 1.00x.
    records = fake_records({(26, "float32", "my_fast_add"): 2000.0})
    targets = by_name(targets_of(records))
    assert targets["best_peer"].status == MISS
    assert "worst 0.952x at float32 2^26" in targets["best_peer"].measured
    assert "1/18 below" in targets["best_peer"].measured
    assert targets["torch_add"].status == PASS  # 2^26 is outside 2^20..2^24
    # Exactly equal to the best peer is enough.
    records = fake_records({(26, "float32", "my_fast_add"): 2100.0})
    assert by_name(targets_of(records))["best_peer"].status == PASS


@pytest.mark.parametrize(
    ("k", "dtype", "status"),
    [
        (19, "float32", PASS),  # below 2^20: not a target cell
        (20, "float32", MISS),
        (24, "bfloat16", MISS),
        (28, "bfloat16", MISS),  # 2^28 is in the range now
        (28, "int64", PASS),  # not a target dtype
    ],
)
def test_best_peer_target_covers_2_20_to_2_28(k, dtype, status):
    assert list(add.PEER_TARGET_LOG2) == list(range(20, 29))
    records = fake_records({(k, dtype, "my_fast_add"): 1000.0})
    target = by_name(targets_of(records))["best_peer"]
    assert target.status == status
    if status == MISS:
        assert f"worst 0.476x at {dtype} 2^{k}" in target.measured


def test_copy_target_where_the_copy_beats_torch_add():
    # float32 2^20: a copy at 2250 GB/s beats torch.add (2000); my_fast_add's 2200 is 0.978x
    # of it, below 0.99x.
    records = fake_records({(20, "float32", report.COPY): 2250.0})
    targets = by_name(targets_of(records))
    assert targets["copy"].status == MISS
    assert "worst 0.978x at float32 2^20" in targets["copy"].measured
    assert "1/18 below: float32 2^20 0.978x" in targets["copy"].measured
    # The other targets do not look at the copy.
    assert targets["best_peer"].status == PASS
    assert targets["torch_add"].status == PASS
    # 0.99x of the copy is enough (2200 / 2222 = 0.9901x).
    records = fake_records({(20, "float32", report.COPY): 2222.0})
    assert by_name(targets_of(records))["copy"].status == PASS
    # The copy range is 2^20..2^28: a fast copy at 2^19 or in int64 is not judged.
    records = fake_records(
        {(19, "float32", report.COPY): 9000.0, (28, "int64", report.COPY): 9000.0}
    )
    assert by_name(targets_of(records))["copy"].status == PASS
    records = fake_records({(28, "bfloat16", report.COPY): 9000.0})
    target = by_name(targets_of(records))["copy"]
    assert target.status == MISS
    assert "bfloat16 2^28" in target.measured


def test_copy_target_skips_cells_where_the_copy_is_no_faster_than_torch_add():
    # bfloat16 2^24: the copy (1900) is slower than torch.add (2000); my_fast_add at 1800 is
    # 0.947x the copy there, but that cell is not judged. float32 2^22: the copy ties
    # torch.add (2000); my_fast_add at 1950 (0.975x) is not judged there either.
    skipped = {
        (24, "bfloat16", report.COPY): 1900.0,
        (24, "bfloat16", "my_fast_add"): 1800.0,
        (22, "float32", report.COPY): 2000.0,
        (22, "float32", "my_fast_add"): 1950.0,
    }
    targets = by_name(targets_of(fake_records(skipped)))
    assert targets["copy"].status == PASS
    assert "worst 1.023x" in targets["copy"].measured
    assert targets["best_peer"].status == MISS  # the same cells do count against the peers
    # With a judged miss elsewhere, the count shows the two skipped cells are not cells.
    records = fake_records({**skipped, (20, "float32", report.COPY): 2250.0})
    target = by_name(targets_of(records))["copy"]
    assert target.status == MISS
    assert "1/16 below: float32 2^20 0.978x" in target.measured
    assert "bfloat16 2^24" not in target.measured and "float32 2^22" not in target.measured


def test_copy_target_without_copy_rows_is_na():
    records = [r for r in fake_records() if r.impl != report.COPY]
    target = by_name(targets_of(records))["copy"]
    assert target.status == NA


def test_torch_add_target_needs_five_percent():
    # bfloat16 2^22: 2080 GB/s is 1.04x torch.add (2000), though still 0.99x the best peer.
    records = fake_records({(22, "bfloat16", "my_fast_add"): 2080.0})
    targets = by_name(targets_of(records))
    assert targets["torch_add"].status == MISS
    assert "bfloat16 2^22 1.040x" in targets["torch_add"].measured
    assert targets["best_peer"].status == MISS
    # A faster torch.add moves the bar: 2200 / 2100 = 1.048x < 1.05x at float32 2^24.
    records = fake_records({(24, "float32", "torch.add"): 2100.0})
    targets = by_name(targets_of(records))
    assert targets["torch_add"].status == MISS
    assert targets["best_peer"].status == PASS


def test_roofline_target_misses_below_98_percent():
    records = fake_records({(28, "float32", "my_fast_add"): 2900.0})  # 96.7%
    target = by_name(targets_of(records))["roofline"]
    assert target.status == MISS
    assert target.measured == "2900.0 GB/s = 96.7% of 3000.0 GB/s"


@pytest.mark.parametrize(
    ("fast_us", "status", "measured"),
    [
        (7.5, PASS, "7.50 us vs 5.00 us = 1.500x"),  # exactly 1.5x
        (7.6, MISS, "7.60 us vs 5.00 us = 1.520x"),
        (4.0, PASS, "4.00 us vs 5.00 us = 0.800x"),
    ],
)
def test_host_target(fast_us, status, measured):
    assert add.HOST_TARGET_RATIO == 1.5
    host = {**HOST_US, "my_fast_add": fast_us}
    target = by_name(targets_of(fake_records(), host))["host"]
    assert target.status == status
    assert target.measured.startswith(measured)
    assert "<= 1.50x torch.add" in target.name


def test_host_target_needs_the_python_function_below_the_other_routes():
    # 1.4x torch.add, but slower than a Triton kernel's launch: a miss
    host = {"torch.add": 5.0, "torch.compile": 20.0, "triton": 6.5, "my_fast_add": 7.0}
    target = by_name(targets_of(fake_records(), host))["host"]
    assert target.status == MISS
    assert "triton 6.50 us" in target.measured
    without = {k: v for k, v in host.items() if k != "triton"}
    assert by_name(targets_of(fake_records(), without))["host"].status == NA


@pytest.mark.parametrize(
    ("ours", "theirs", "status", "measured"),
    [
        (1.2, 0.8, PASS, "1.20 ms vs 0.80 ms = +0.40 ms"),
        (1.5, 1.0, PASS, "1.50 ms vs 1.00 ms = +0.50 ms"),  # exactly 0.5 ms over
        (1.6, 1.0, MISS, "1.60 ms vs 1.00 ms = +0.60 ms"),
        (30.0, 2.0, MISS, "30.00 ms vs 2.00 ms = +28.00 ms"),
        (0.5, 1.0, PASS, "0.50 ms vs 1.00 ms = -0.50 ms"),  # faster than torch's
        (None, 1.0, NA, "not measured in this run"),
        (1.0, None, NA, "not measured in this run"),
    ],
)
def test_coldstart_target(ours, theirs, status, measured):
    target = add.coldstart_target(ours, theirs)
    assert (target.status, target.measured) == (status, measured)
    assert "<= 0.5 ms over torch's first new kernel" in target.name


def test_targets_not_measured_are_na_not_pass():
    # A partial run (--sizes 12-14, float32 only, no host times) measures no target's cells.
    records = [r for r in fake_records() if r.size <= 2**14 and r.dtype == "float32"]
    targets = targets_of(records, {})
    assert [t.status for t in targets] == [NA] * 5
    # Some cells measured and passing, others missing: still not a PASS.
    records = [r for r in fake_records() if r.size <= 2**20]
    targets = by_name(targets_of(records))
    assert targets["best_peer"].status == NA
    assert "16 not measured" in targets["best_peer"].measured
    assert targets["copy"].status == NA
    assert "16 not measured" in targets["copy"].measured
    # ...but a measured miss is a MISS whatever is missing.
    records = [r for r in fake_records({(20, "float32", "my_fast_add"): 1.0}) if r.size <= 2**20]
    targets = by_name(targets_of(records))
    assert targets["best_peer"].status == MISS
    assert targets["copy"].status == MISS


def test_table_and_target_text():
    records = fake_records({(26, "float32", "my_fast_add"): 2000.0})
    rows = report.annotate(records, ROOFLINE, ADD)
    table = report.format_table(rows)
    lines = table.splitlines()
    assert lines[0].startswith("size")
    assert lines[0].endswith("GB/s  % roofline  vs best peer")
    data = [line.split() for line in lines[2:] if line]
    assert len(data) == len(records)
    fast = next(cells for cells in data if cells[:3] == ["2^26", "float32", "my_fast_add"])
    assert fast[-3:] == ["2000.0", "66.7", "0.95x"]
    copy = next(cells for cells in data if cells[:3] == ["2^26", "float32", report.COPY])
    assert copy[-3:] == ["2150.0", "71.7", "1.02x"]
    # 2000 GB/s misses the best peer (0.952x) and the copy (0.930x), nothing else.
    text = report.format_targets(targets_of(records), "my_fast_add")
    assert text.count("[MISS]") == 2 and text.count("[PASS]") == 3
    assert "[MISS] GB/s >= 0.99x the size-matched copy" in text
    assert "5.10 us/call  (1.02x torch.add)" in add.host_text(HOST_US)


def test_csv(tmp_path):
    records = fake_records()
    path = tmp_path / "r.csv"
    report.write_csv(report.annotate(records, ROOFLINE, ADD), path)
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
    assert tuple(reader.fieldnames) == report.CSV_COLUMNS
    assert len(rows) == len(records) == len(DTYPES) * len(SIZES) * len(BASE_GBPS)
    row = next(
        r for r in rows if (r["size"], r["dtype"], r["impl"]) == (str(2**20), "float32", "my_add")
    )
    assert row["log2_size"] == "20"
    assert float(row["gbps"]) == pytest.approx(1500, abs=0.01)
    assert float(row["pct_roofline"]) == pytest.approx(50.0)
    assert float(row["ratio_best_peer"]) == pytest.approx(1500 / 2100, abs=1e-4)
    assert float(row["ms"]) == pytest.approx(3 * 4 * 2**20 / 1500e9 * 1e3, rel=1e-5)


def test_write_reports(tmp_path):
    records = fake_records({(26, "float32", "my_fast_add"): 2000.0})
    meta = {
        "date": "2026-11-22 10:00 UTC",
        "GPU": "NVIDIA H100 80GB HBM3",
        "driver": "580.95.05",
        "torch": "2.11.0+cu130",
        "triton": "3.6.0",
        "CUDA": "13.0",
        "python": "3.12.3",
    }
    out = tmp_path / "benchmarks" / "results"
    host = Extra([add.host_target(HOST_US)], add.host_markdown(HOST_US, 2000, 7))
    paths, targets, rows = report.write_reports(ADD, records, ROOFLINE, meta, out, "2026-11-22",
                                                host)  # fmt: skip
    assert {p.name for p in paths.values()} == {
        f"add-nvidia-h100-80gb-hbm3-2026-11-22.{ext}" for ext in ("md", "csv", "png")
    }
    assert all(p.parent == out for p in paths.values())
    assert paths["png"].read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    from PIL import Image

    with Image.open(paths["png"]) as image:  # 256 colours: committed results stay small
        assert image.mode == "P"
    assert len(rows) == len(records)
    assert [t.status for t in targets] == [MISS, PASS, MISS, PASS, PASS]

    md = paths["md"].read_text()
    assert md.startswith("# cuda_ext_example add benchmark: NVIDIA H100 80GB HBM3\n")
    for key, value in meta.items():
        assert f"- **{key}**: {value}" in md
    assert "Copy roofline: **3000.0 GB/s**" in md
    assert "## Targets (my_fast_add)" in md
    assert "| MISS | GB/s >= 1.00x best peer" in md
    assert "| MISS | GB/s >= 0.99x the size-matched copy" in md
    assert md.count("| PASS |") == 3
    assert "best of 7 interleaved rounds of 2000 calls" in md
    assert "| my_fast_add | 5.10 | 1.02x |" in md
    assert "![GB/s per size](add-nvidia-h100-80gb-hbm3-2026-11-22.png)" in md
    for dtype in DTYPES:
        assert f"### {dtype}" in md
    assert "| elements | torch.add | torch.compile | triton | my_add | my_fast_add | copy |" in md
    assert (
        "| 2^26 | 2000 (0.95x) | 2100 (1.00x) | 2050 (0.98x) | 1500 (0.71x) | 2000 (0.95x) "
        "| 2150 (1.02x) | 66.7% |" in md
    )
    assert "| 2^28 |" in md and "| 98.3% |" in md

    # No extra measured (a workload without one): the cell targets alone.
    paths, targets, _ = report.write_reports(ADD, records, ROOFLINE, meta, out, "2026-11-22")
    assert [t.status for t in targets] == [MISS, PASS, MISS, PASS]
    assert "Host time" not in paths["md"].read_text()


def test_plot_with_one_dtype(tmp_path):
    # A partial run: one dtype, no spare subplot logic needed, still a PNG.
    records = [r for r in fake_records() if r.dtype == "bfloat16"]
    path = tmp_path / "one.png"
    report.plot(ADD, records, ROOFLINE, path, title="fake")
    assert path.read_bytes()[:4] == b"\x89PNG"


def test_cli_parsing():
    assert benchmark.parse_sizes("12-28") == list(range(12, 29))
    assert benchmark.parse_sizes("20,12-14, 28") == [12, 13, 14, 20, 28]
    for bad in ("x", "20-12", "31", ""):
        with pytest.raises(Exception, match="size"):
            benchmark.parse_sizes(bad)
    assert benchmark.parse_dtypes("bfloat16,float32") == ["bfloat16", "float32"]
    with pytest.raises(Exception, match="float64"):
        benchmark.parse_dtypes("float32,float64")
    args = benchmark.parse_args([])
    assert args.workload is ADD
    assert args.sizes == list(range(12, 29))
    assert args.dtypes == ["float32", "bfloat16", "float16", "int64"]
    assert args.out == Path("build/results")  # tool outputs stay out of the tracked tree
    assert benchmark.parse_args(["--quick"]).sizes == [12, 16, 20, 24, 28]
    assert benchmark.parse_args(["--quick", "--sizes", "20"]).sizes == [20]
    assert benchmark.settings_of(args) == timing.Settings(25, 100, rounds=5)
    timed = benchmark.settings_of(benchmark.parse_args(["--rounds", "2", "--rep-ms", "40"]))
    assert (timed.warmup_ms, timed.rep_ms, timed.rounds, timed.quick) == (10, 40, 2, False)
    assert benchmark.settings_of(benchmark.parse_args(["--quick"])).quick
    assert report.slug("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3"


def test_cli_picks_the_workload_and_its_defaults():
    args = benchmark.parse_args(["--workload", "square"])
    assert args.workload is square.WORKLOAD
    assert (args.sizes, args.dtypes) == (list(range(7, 16)), ["float32"])
    assert benchmark.parse_args(["--workload", "square", "--quick"]).sizes == [7, 11, 15]
    assert benchmark.parse_args(["--workload", "square", "--sizes", "8,12-13"]).sizes == [8, 12, 13]


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--workload", "cube"], "invalid choice: 'cube'"),
        (["--workload", "square", "--sizes", "17"], "goes up to 2^16, got 2^17"),
    ],
)
def test_cli_refuses_what_a_workload_cannot_run(argv, said, capsys):
    with pytest.raises(SystemExit) as exc:
        benchmark.parse_args(argv)
    assert exc.value.code == 2
    assert said in capsys.readouterr().err


def test_bench_modules_import_no_gpu_stack():
    # The reporting half must stay importable where torch and triton are missing.
    for name in (
        "benchmark",
        "report",
        "timing",
        "workload",
        "add",
        "square",
        "gelu",
        "adamw",
        "rms_norm",
    ):
        source = (ROOT / "lab" / "bench" / f"{name}.py").read_text()
        top_level = [line for line in source.splitlines() if line.startswith(("import ", "from "))]
        assert not [line for line in top_level if "torch" in line or "triton" in line], name


def test_missing_package_is_one_line_and_exit_1(monkeypatch, capsys):
    # A GPU machine without the package installed: one line naming the fix, before any
    # timing, instead of a traceback from the first cell.
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setitem(sys.modules, "cuda_ext_example", None)  # import raises ImportError
    monkeypatch.setattr(timing, "measure_roofline_gbps", lambda settings: pytest.fail("timed"))
    assert benchmark.main([]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("lab.bench: cuda_ext_example is not importable (")
    assert captured.err.endswith("install it first (make install, or pip install a wheel of it)\n")


def test_a_package_without_the_workloads_op_is_one_line_and_exit_1(monkeypatch, capsys):
    torch = pytest.importorskip("torch")
    fake = types.ModuleType("cuda_ext_example")
    fake.__file__ = "/somewhere/cuda_ext_example/__init__.py"
    monkeypatch.setitem(sys.modules, "cuda_ext_example", fake)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert benchmark.main(["--workload", "square"]) == 1
    assert capsys.readouterr().err == (
        "lab.bench: cuda_ext_example at /somewhere/cuda_ext_example has no my_square; "
        "install a wheel built from this checkout\n"
    )


def test_rounds_are_interleaved_and_summarised(monkeypatch):
    rounds = []
    fake_ms = {"x": iter([1.0, 3.0, 2.0]), "y": iter([5.0, 5.0, 5.0])}

    def fake_interleaved_ms(calls, settings):
        rounds.append([call() for call in calls.values()])
        return {name: next(fake_ms[name]) for name in calls}

    monkeypatch.setattr(timing, "interleaved_ms", fake_interleaved_ms)
    settings = timing.Settings(1, 1, rounds=3)
    fresh = []

    def round_impls():  # what each round gets: calls bound to fresh inputs
        fresh.append(len(rounds))
        return {"x": lambda: "x", "y": lambda: "y"}

    times = timing.time_rounds(round_impls, settings)
    # One interleaved_ms per round over every implementation (which goes forward then back).
    assert rounds == [["x", "y"], ["x", "y"], ["x", "y"]]
    assert fresh == [0, 1, 2]  # new inputs before each round, not one allocation for all
    assert times == {"x": [1.0, 3.0, 2.0], "y": [5.0, 5.0, 5.0]}
    record = ADD.record(2**20, "float32", "x", times["x"])
    assert record.ms == 2.0 and record.spread_pct == pytest.approx(100.0)
    assert record.rounds_ms == (1.0, 3.0, 2.0)
    assert record.gbps == pytest.approx(ADD.gbps(2**20, "float32", 2.0))


def fake_do_bench(untimed: int, timed_ms: list[float], seen: list):
    """A do_bench that calls fn `untimed` times (its first call, estimate and warm-up), then
    once per entry of timed_ms, and returns those as return_mode="all" does."""

    def do_bench(fn, warmup, rep, return_mode):
        seen.append((warmup, rep, return_mode))
        for _ in range(untimed):
            fn()
        return [(fn(), ms)[1] for ms in timed_ms]

    return do_bench


def test_interleaved_ms_goes_round_the_calls_in_one_do_bench():
    ran, seen = [], []
    calls = {name: (lambda name=name: ran.append(name)) for name in ("x", "y", "z")}
    settings = timing.Settings(2, 10)
    # 3 warm calls of its own, then 8 untimed calls in do_bench: its timed calls start at z.
    do_bench = fake_do_bench(8, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0], seen)
    got = timing.interleaved_ms(calls, settings, do_bench)
    assert ran[:3] == ["x", "y", "z"]  # each once before do_bench estimates a call's time
    assert ran[3:] == ["x", "y", "z", "z", "y", "x"] * 2 + ["x", "y", "z"]  # forward, back
    # Timed: z z y x x y z -> z gets 1, 2, 7; y 3, 6; x 4, 5. Medians of each one's own calls.
    assert got == {"z": 2.0, "y": 4.5, "x": 4.5}
    # do_bench's budgets grow with the number of calls, so each gets what a do_bench of its
    # own would have given it.
    assert seen == [(6, 30, "all")]


@pytest.mark.parametrize("names", ["xy", "wxyz", "xyz"])
def test_interleaved_ms_times_each_call_at_odd_and_even_calls_alike(names):
    # On an H100 or H200 alternate calls differ by up to 4% for a whole do_bench. Here odd calls
    # take 2 ms and even ones 1 ms: in plain turns (x y x y) x would get 1 and y 2.
    calls = {name: (lambda: None) for name in names}
    timed = [1.0 + (i % 2) for i in range(8 * len(names))]
    got = timing.interleaved_ms(calls, timing.Settings(1, 1),
                                   fake_do_bench(3, timed, []))  # fmt: skip
    assert set(got.values()) == {1.5}, got


def test_interleaved_ms_refuses_a_call_it_did_not_time():
    calls = {"x": lambda: None, "y": lambda: None}
    do_bench = fake_do_bench(0, [1.0], [])  # one timed call: y never ran timed
    with pytest.raises(RuntimeError, match="no call of y"):
        timing.interleaved_ms(calls, timing.Settings(1, 1), do_bench)


def test_ratio_spread_is_the_spread_of_the_ratio_round_by_round():
    # A slow round slows both implementations alike: each record spreads 20%, their ratio not
    # at all; so a 1% miss is not noise.
    ours = ADD.record(2**20, "float32", "my_fast_add", [1.01, 1.212, 1.01])
    peer = ADD.record(2**20, "float32", "torch.add", [1.0, 1.2, 1.0])
    assert ours.spread_pct == pytest.approx(20.0, abs=0.1)
    assert report.ratio_spread_pct(ours, peer) == pytest.approx(0.0, abs=1e-9)
    # Rounds that disagree: the ratio's own range over its median.
    peer = ADD.record(2**20, "float32", "torch.add", [1.0, 1.212, 0.98])
    ratios = sorted([1.0 / 1.01, 1.212 / 1.212, 0.98 / 1.01])
    assert report.ratio_spread_pct(ours, peer) == pytest.approx(
        (ratios[-1] - ratios[0]) / ratios[1] * 100
    )
    # Without both records' rounds (a CSV read back): the larger of the two spreads.
    bare = report.Record(2**20, "float32", "torch.add", 1.0, 1.0, spread_pct=3.0)
    assert report.ratio_spread_pct(ours, bare) == pytest.approx(20.0, abs=0.1)


def test_a_miss_judged_against_the_ratio_spread_not_the_records(tmp_path):
    # torch.add is the best peer at 2^22; my_fast_add is 1% behind it in every round while
    # both swing 20% round to round: a steady 1% deficit, not noise.
    def cell(impl, scale):
        return ADD.record(2**22, "float32", impl,
                                         [scale * t for t in (1.0, 1.2, 1.0)])  # fmt: skip

    records = [cell("torch.add", 1.0), cell("triton", 1.05), cell("my_fast_add", 1.0101)]
    target = targets_of(records)[0]
    assert target.status == MISS
    assert "0 of those within the spread of the rounds" in target.measured
    # The rounds travel to the CSV, so that a ratio's spread can be redone from it.
    path = tmp_path / "cells.csv"
    report.write_csv(report.annotate(records, ROOFLINE, ADD), path)
    with path.open() as f:
        rounds = {r["impl"]: r["rounds_ms"] for r in csv.DictReader(f)}
    assert rounds["torch.add"] == "1;1.2;1"
    assert [float(x) for x in rounds["my_fast_add"].split(";")] == pytest.approx(
        [1.0101, 1.21212, 1.0101]
    )


def test_host_times_are_the_best_of_interleaved_rounds(monkeypatch):
    calls = []
    samples = {"x": iter([9.0, 4.0, 6.0]), "y": iter([3.0, 7.0, 2.0])}

    def fake_time_host_calls(fn, a, b, n):
        name = fn(a, b)
        if n == 50:  # the warm-up
            return 0.0
        calls.append(name)
        return next(samples[name])

    monkeypatch.setattr(add, "time_host_calls", fake_time_host_calls)
    impls = {"x": lambda a, b: "x", "y": lambda a, b: "y"}
    best = add.best_host_times(impls, None, None, calls=2000, repeats=3)
    assert calls == ["x", "y"] * 3
    assert best == {"x": 4.0, "y": 2.0}


def test_time_host_calls_on_cpu_tensors():
    torch = pytest.importorskip("torch")
    a = torch.ones(4)
    seen = []
    us = add.time_host_calls(lambda x, y: seen.append(1), a, a, 10)
    assert len(seen) == 10 and us > 0


# --------------------------------------------------------------------------- the square workload

SQUARE = square.WORKLOAD
SQUARE_GBPS = {"torch.square": 2300.0, "torch.compile": 2400.0, "triton": 2200.0,
               "my_square": 2500.0}  # fmt: skip


def square_rec(k: int, impl: str, gbps: float, spread: float = 0.0) -> report.Record:
    """A (4096, 2^k) float32 record whose median gives exactly `gbps` (2 tensors of traffic)."""
    ms = 2 * square.ROWS * 2**k * 4 / (gbps * 1e9) * 1e3
    return SQUARE.record(2**k, "float32", impl, [ms * (1 - spread / 100), ms, ms])


def square_records(overrides=None, spreads=None):
    """my_square at 2500 GB/s, 1.042x the best peer (torch.compile), at N = 2^7..2^15."""
    overrides, spreads = overrides or {}, spreads or {}
    return [
        square_rec(k, impl, overrides.get((k, impl), gbps), spreads.get((k, impl), 0.0))
        for k in range(7, 16)
        for impl, gbps in SQUARE_GBPS.items()
    ]


def test_square_counts_a_read_and_a_write_of_the_matrix():
    assert SQUARE.tensors == 2
    # (4096, 1024) float32 in 1 ms: 2 * 4 * 4096 * 1024 bytes.
    assert SQUARE.gbps(1024, "float32", 1.0) == pytest.approx(2 * 4 * 4096 * 1024 / 1e6)
    r = SQUARE.record(1024, "float32", "my_square", [2.0, 1.0, 3.0])
    assert (r.size, r.ms, r.spread_pct) == (1024, 2.0, pytest.approx(100.0))


def test_square_target_passes_at_exactly_the_best_peer():
    (target,) = SQUARE.targets(square_records(), ROOFLINE)
    assert target.status == PASS
    assert target.name.startswith("GB/s >= 1.00x best of torch.square, torch.compile, triton")
    assert "worst 1.042x" in target.measured
    equal = square_records({(k, "my_square"): 2400.0 for k in range(7, 16)})
    assert SQUARE.targets(equal, ROOFLINE)[0].status == PASS


def test_square_misses_within_and_outside_the_spread():
    # N=2^10: 0.990x the best peer with a 2% spread of torch.compile's rounds (noise could
    # explain it); N=2^12: 0.958x with a 1% spread of my_square's (it cannot).
    records = square_records(
        {(10, "my_square"): 2376.0, (12, "my_square"): 2300.0},
        {(10, "torch.compile"): 2.0, (12, "my_square"): 1.0},
    )
    (target,) = SQUARE.targets(records, ROOFLINE)
    assert target.status == MISS  # strict: a miss is a miss
    assert "2/9 below: float32 N=2^10 0.990x, float32 N=2^12 0.958x" in target.measured
    assert "1 of those within the spread of the rounds" in target.measured
    only_noise = square_records({(10, "my_square"): 2376.0}, {(10, "torch.compile"): 2.0})
    assert SQUARE.targets(only_noise, ROOFLINE)[0].status == NOISE


def test_square_sizes_not_measured_are_na_not_pass():
    records = [r for r in square_records() if (r.impl, r.size) != ("my_square", 2**9)]
    (target,) = SQUARE.targets(records, ROOFLINE)
    assert target.status == NA
    assert "1 not measured" in target.measured


def test_square_report(tmp_path):
    meta = {"GPU": "NVIDIA H100 80GB HBM3", "torch": "2.11.0"}
    records = square_records({(12, "my_square"): 2300.0})
    paths, targets, _ = report.write_reports(SQUARE, records, ROOFLINE, meta, tmp_path, "date")
    assert paths["md"].name == "square-nvidia-h100-80gb-hbm3-date.md"
    assert [t.status for t in targets] == [MISS]
    md = paths["md"].read_text()
    assert md.startswith("# cuda_ext_example square benchmark: NVIDIA H100 80GB HBM3")
    assert "A (4096, N) matrix squared" in md and "## Targets (my_square)" in md
    assert "| N | torch.square | torch.compile | triton | my_square | my_square % roofline |" in md
    assert "| 2^12 | 2300 (0.96x) | 2400 (1.00x) | 2200 (0.92x) | 2300 (0.96x) | 76.7% |" in md


@pytest.mark.parametrize(
    ("n_cols", "expected"),
    [
        (1, (1, 4)),
        (100, (128, 4)),
        (128, (128, 4)),
        (1000, (1024, 4)),
        (1025, (2048, 8)),
        (3000, (4096, 16)),
        (2**15, (2**15, 16)),
        (2**20, (2**20, 16)),
    ],
)
def test_triton_square_launch_params(n_cols, expected):
    pytest.importorskip("triton")
    from lab.bench import triton_square

    assert triton_square.launch_params(n_cols) == expected


def test_triton_square_refuses_what_one_block_cannot_hold():
    pytest.importorskip("triton")
    from lab.bench import triton_square

    for bad in (0, -3, 2**20 + 1):
        with pytest.raises(ValueError, match="triton_square"):
            triton_square.launch_params(bad)


# ------------------------------------------------------------- the GELU and AdamW workloads


def test_adamw_counts_seven_tensors_of_traffic():
    assert adamw.WORKLOAD.tensors == 7 and gelu.WORKLOAD.tensors == 2
    # 2^20 float32 elements in 1 ms: 4 tensors read, 3 written.
    assert adamw.WORKLOAD.gbps(2**20, "float32", 1.0) == pytest.approx(7 * 4 * 2**20 / 1e6)


@pytest.mark.parametrize("workload", [gelu.WORKLOAD, adamw.WORKLOAD], ids=lambda w: w.name)
def test_the_peers_and_ours_agree_within_the_tolerance_on_the_cpu(workload):
    # What the GPU run checks before it times: here on CPU tensors, torch's fused AdamW and
    # foreach AdamW against ours, torch's GELU against ours (torch.compile left out).
    torch = pytest.importorskip("torch")
    impls = workload.implementations(False, 4)
    impls.pop("torch.compile", None)
    for dtype in workload.dtypes:
        inputs = workload.make_inputs(4099, dtype, lambda shape, d: torch.randn(shape).to(
            getattr(torch, d)))  # fmt: skip
        timing.check_outputs(impls, inputs, workload.peers[0], dtype, workload.tolerance[dtype])
    if workload is adamw.WORKLOAD:
        assert (inputs[2] >= 0).all()  # exp_avg_sq prepared
        bad = [t.clone() for t in inputs]
        with pytest.raises(SystemExit, match="FAIL my_adamw_step"):
            timing.check_outputs(
                {**impls, "my_adamw_step": lambda p, m, v, g: (p + 1, m, v)},
                bad,
                workload.peers[0],
                dtype,
                workload.tolerance[dtype],
            )


@pytest.mark.parametrize("workload", [gelu.WORKLOAD, adamw.WORKLOAD], ids=lambda w: w.name)
def test_gelu_and_adamw_targets_judge_2_20_and_up_against_the_best_peer(workload):
    def rec(k, impl, gbps):
        ms = workload.tensors * 2**k * 4 / (gbps * 1e9) * 1e3
        return workload.record(2**k, "float32", impl, [ms, ms, ms])

    peers = workload.peers
    records = [rec(k, impl, 2000.0) for k in range(16, 29) for impl in peers]
    records += [rec(k, workload.judged, 2100.0 if k != 24 else 1900.0) for k in range(16, 29)]
    (target,) = workload.targets(records, ROOFLINE)
    assert target.status == MISS and "2^24" in target.measured
    records = [r for r in records if r.size != 2**24] + [rec(24, workload.judged, 2000.0)]
    records += [rec(24, p, 2000.0) for p in peers]
    (target,) = workload.targets(records, ROOFLINE)
    assert target.status == PASS


def test_host_time_goes_on_past_an_op_that_fails(monkeypatch, capsys):
    from lab.bench import host_time

    def fake_measure(op, device):
        if op == "my_square":
            raise host_time.ChildFailed("ValueError: no")
        return {op: 2.0, f"torch.ops.cuda_ext_example.{op}": 3.0, "torch: x": 2.0}

    monkeypatch.setattr(host_time, "measure", fake_measure)
    code = host_time.main(["--device", "cpu", "--processes", "1", "--ops", "my_square,my_gelu"])
    out = capsys.readouterr().out
    assert code == 1
    assert "| my_square | failed: ValueError: no |" in out
    assert "| my_gelu | 2.00 |" in out and "my_square: not measured (failed)" in out


@pytest.mark.gpu
def test_host_time_measures_every_op_on_the_gpu(capsys):
    from lab.bench import host_time

    assert host_time.main(["--processes", "1"]) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    for op in host_time.CASES:
        assert f"| {op} |" in out and f"{op}: Python function" in out
