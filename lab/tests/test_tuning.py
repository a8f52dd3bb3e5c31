"""lab/tune/derive.py on made-up measurements: the CSV of lab.tune measure -> the
launch-shape tables -> the text of tuning/launch_shapes.toml, which buildtools.launch_shapes
must load. No GPU, no torch."""

from __future__ import annotations

import csv
import os
from pathlib import Path

import pytest

from buildtools import launch_shapes
from buildtools.launch_shapes import DEFAULT, Rule, Shape
from lab.tune import derive, measure
from lab.tune.__main__ import main as tune_main

KiB, MiB = 2**10, 2**20
WIDE = Shape(16, 256, 4)  # "16B x4 /256"
NARROW = Shape(16, 128, 1)  # "16B x1 /128"
EIGHT = Shape(8, 256, 1)  # "8B x1 /256"
SHAPES = (WIDE, NARROW, EIGHT)
EVICT_FIRST = Shape(16, 128, 2, "evict-first")  # "16B x2 /128 evict-first"
MEASUREMENTS = derive.MEASUREMENTS
TABLE_FILE = launch_shapes.TABLE_FILE
LOG2_BYTES = range(16, 23)  # 64 KiB .. 4 MiB per tensor
PREAMBLE = "[candidates]\nshapes = []\n"


def m(shape: Shape, nbytes: int, ms: float, dtype="float32", inputs=1, gpu="G", spread=0.0):
    """One made-up measurement."""
    provenance = f"{gpu}, driver 1, torch 2, 2026-01-01: lab/tune/measurements/" + "g.csv"
    return derive.Measurement(gpu, provenance, inputs, dtype, nbytes, shape, ms, spread)


def cell(nbytes: int, factors: dict[Shape, float], **kw) -> list[derive.Measurement]:
    """One (size, dtype, inputs) cell: each shape's time is its factor over 1 ms."""
    return [m(shape, nbytes, factor, **kw) for shape, factor in factors.items()]


# Each fake GPU's slowdown of each shape: (inputs, small) -> shape -> factor, where small is a
# tensor under 1 MiB. GPU A: WIDE wins with one input; with two, EIGHT under 1 MiB and NARROW
# from it. GPU B: NARROW wins with one input (WIDE 1.2x), two inputs as on A.
TWO_INPUTS = {
    (2, True): {EIGHT: 1.0, WIDE: 1.2, NARROW: 1.2},
    (2, False): {NARROW: 1.0, WIDE: 1.1, EIGHT: 1.3},
}
FACTORS = {
    "Fake GPU A": {
        (1, True): {WIDE: 1.0, NARROW: 1.1, EIGHT: 1.3},
        (1, False): {WIDE: 1.0, NARROW: 1.1, EIGHT: 1.3},
        **TWO_INPUTS,
    },
    "Fake GPU B": {
        (1, True): {NARROW: 1.0, WIDE: 1.2, EIGHT: 1.3},
        (1, False): {NARROW: 1.0, WIDE: 1.2, EIGHT: 1.3},
        **TWO_INPUTS,
    },
}


def write_measurements(path: Path, gpu: str, date: str, factors=None, scale: float = 1.0) -> Path:
    """A CSV as lab.tune measure writes it, with its "reference" and "copy" rows (fastest
    of all, so that a derive that took them for shapes would pick them)."""
    factors = factors or FACTORS[gpu]
    ops = {1: "my_square", 2: "my_add"}
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(measure.COLUMNS)
        for inputs in (1, 2):
            for dtype in ("float32", "bfloat16"):
                for log2 in LOG2_BYTES:
                    nbytes = 2**log2
                    base = scale * 0.005 * (1 + nbytes / MiB)
                    times = {str(s): f * base for s, f in factors[inputs, nbytes < MiB].items()}
                    times |= {"reference": 0.5 * base, "copy": 0.4 * base}
                    for label, ms in times.items():
                        writer.writerow([gpu, "580.1", "2.11.0+cu130", date, inputs, ops[inputs],
                                         dtype, nbytes, label, f"{ms:.6f}", "1.00",
                                         f"{ms / (0.5 * base):.5f}", "0.10"])  # fmt: skip
    return path


def write_op_measurements(path: Path, gpu: str, op: str, factors: dict[Shape, float]) -> Path:
    """A CSV of lab.tune measure --ops OP: that op's own list, every size alike."""
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(measure.COLUMNS)
        for dtype in ("float32", "bfloat16"):
            for log2 in LOG2_BYTES:
                for shape, factor in factors.items():
                    writer.writerow([gpu, "580.1", "2.11.0+cu130", "2026-01-05", 1, op, dtype,
                                     2**log2, str(shape), "0.01", "1.00", f"{factor:.5f}",
                                     "0.10", f"op-{op}"])  # fmt: skip
    return path


@pytest.fixture
def two_gpus(tmp_path) -> list[Path]:
    return [
        write_measurements(tmp_path / "fake-gpu-a-2026-01-02.csv", "Fake GPU A", "2026-01-02"),
        write_measurements(tmp_path / "fake-gpu-b-2026-01-03.csv", "Fake GPU B", "2026-01-03"),
    ]


# --------------------------------------------------------------------------- parsing


def test_parse_shape_round_trips_the_labels():
    assert str(WIDE) == "16B x4 /256"
    assert derive.parse_shape("16B x4 /256") == Shape(16, 256, 4)
    assert derive.parse_shape("8B x2 /512") == Shape(8, 512, 2)
    assert str(EVICT_FIRST) == "16B x2 /128 evict-first"
    assert derive.parse_shape("16B x2 /128 evict-first") == Shape(16, 128, 2, "evict-first")
    for access in launch_shapes.ACCESS_BYTES:
        for block in (32, 64, 128, 256, 512, 1024):
            for per_thread in (1, 2, 4, 8):
                for load in launch_shapes.LOADS:
                    shape = Shape(access, block, per_thread, load)
                    assert derive.parse_shape(str(shape)) == shape


@pytest.mark.parametrize("label", ["16B x2 /128 evict-last", "16B x2 /128 evict-first x"])
def test_parse_shape_refuses_an_unknown_load_flavour(label):
    with pytest.raises(launch_shapes.LaunchShapeError, match="load flavour"):
        derive.parse_shape(label)


def test_the_committed_tables_are_what_the_measurements_derive():
    paths = sorted(MEASUREMENTS.glob("*.csv"))
    assert paths, "no measurements in lab/tune/measurements"
    text = derive.table_text(derive.latest_per_gpu(paths), derive._preamble(TABLE_FILE))
    assert text == TABLE_FILE.read_text()


def test_read_measurements_skips_reference_and_copy(two_gpus):
    rows = derive.read_measurements(two_gpus[0])
    # 2 numbers of inputs x 2 dtypes x 7 sizes x 3 shapes, none of the 2 context rows.
    assert len(rows) == 2 * 2 * len(LOG2_BYTES) * len(SHAPES)
    assert {r.shape for r in rows} == set(SHAPES)
    first = rows[0]
    assert (first.gpu, first.inputs, first.dtype, first.nbytes) == ("Fake GPU A", 1, "float32",
                                                                    64 * KiB)  # fmt: skip
    assert first.provenance == (
        "Fake GPU A, driver 580.1, torch 2.11.0+cu130, 2026-01-02: "
        "lab/tune/measurements/" + "fake-gpu-a-2026-01-02.csv"
    )


def _one_cell_csv(path: Path, columns, rows) -> Path:
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(columns)
        for label, *numbers in rows:
            writer.writerow(["G", "580.1", "2.11.0+cu130", "2026-01-02", 2, "my_add", "float32",
                             32 * MiB, label, *numbers])  # fmt: skip
    return path


def test_shapes_are_compared_by_their_time_against_the_reference_in_the_same_round(tmp_path):
    # NARROW's own median time is the lower, but against the reference of its own rounds it
    # is the slower: the rounds moved together, and the medians fell in different rounds.
    path = _one_cell_csv(tmp_path / "g.csv", measure.COLUMNS, [
        (str(NARROW), "0.0500", "3.00", "1.0040", "0.10"),
        (str(WIDE), "0.0510", "3.00", "1.0010", "0.10"),
        ("reference", "0.0505", "3.00", "1.0000", "0.00"),
    ])  # fmt: skip
    rows = {r.shape: r for r in derive.read_measurements(path)}
    assert rows[NARROW].time == pytest.approx(1.004) and rows[NARROW].spread == pytest.approx(0.001)
    assert derive.rules(list(rows.values()), 2, 4, {NARROW, WIDE}) == (Rule(None, WIDE),)


def test_an_older_csv_without_the_reference_ratio_is_compared_by_median_time(tmp_path):
    older_columns = measure.COLUMNS[: measure.COLUMNS.index("spread_pct") + 1]
    path = _one_cell_csv(tmp_path / "g.csv", older_columns, [
        (str(NARROW), "0.0500", "3.00"), (str(WIDE), "0.0510", "3.00"),
    ])  # fmt: skip
    rows = {r.shape: r for r in derive.read_measurements(path)}
    assert rows[NARROW].time == pytest.approx(0.05) and rows[NARROW].spread == pytest.approx(0.03)
    assert derive.rules(list(rows.values()), 2, 4, {NARROW, WIDE}) == (Rule(None, NARROW),)


def test_vs_reference_is_the_median_of_each_rounds_ratio_and_its_spread():
    times = {
        "reference": [1.0, 2.0, 3.0],
        "A": [1.1, 2.2, 2.4],  # 10% slower in two rounds of three; its median time is 2.2
        "B": [0.5, 1.0, 1.5],
    }
    got = measure.vs_reference(times)
    assert got["reference"] == (1.0, 0.0)
    assert got["A"][0] == pytest.approx(1.1)
    assert got["A"][1] == pytest.approx((1.1 - 0.8) / 1.1)
    assert got["B"] == pytest.approx((0.5, 0.0))
    with pytest.raises(ValueError):  # a label with a round missing is a bug, not a shorter zip
        measure.vs_reference({"reference": [1.0, 2.0], "A": [1.0]})


# --------------------------------------------------------------------------- rules


def test_rules_take_the_fastest_shape_per_size_and_merge_neighbours():
    measurements = [
        *cell(64 * KiB, {WIDE: 1.0, NARROW: 1.2, EIGHT: 1.5}),
        *cell(128 * KiB, {WIDE: 1.0, NARROW: 1.3, EIGHT: 1.5}),
        *cell(256 * KiB, {WIDE: 1.5, NARROW: 1.0, EIGHT: 1.5}),
        *cell(512 * KiB, {WIDE: 1.4, NARROW: 1.0, EIGHT: 1.1}),
        *cell(1 * MiB, {WIDE: 1.0, NARROW: 1.2, EIGHT: 1.5}),
        *cell(2 * MiB, {WIDE: 1.0, NARROW: 1.2, EIGHT: 1.5}),
        # Another number of inputs: not in the list for one input.
        *cell(64 * KiB, {EIGHT: 1.0, WIDE: 2.0}, inputs=2),
    ]
    assert derive.rules(measurements, 1, 4, set(SHAPES)) == (
        Rule(128 * KiB, WIDE),
        Rule(512 * KiB, NARROW),
        Rule(None, WIDE),  # the last rule takes every larger size
    )
    assert derive.rules(measurements, 2, 4, set(SHAPES)) == (Rule(None, EIGHT),)
    # Only carried shapes are chosen: without NARROW, EIGHT is best at 512 KiB (1.1x).
    assert derive.rules(measurements, 1, 4, {WIDE, EIGHT}) == (
        Rule(256 * KiB, WIDE),
        Rule(512 * KiB, EIGHT),
        Rule(None, WIDE),
    )
    assert derive.rules(measurements, 1, 4, {NARROW}) == (Rule(None, NARROW),)


def test_rules_keep_the_previous_shape_within_the_cells_spread():
    def table(slowdown_of_narrow: float, spread: float) -> tuple[Rule, ...]:
        # NARROW wins at 256 KiB; at 512 KiB WIDE is best and NARROW `slowdown_of_narrow`.
        measurements = [
            *cell(128 * KiB, {WIDE: 1.0, NARROW: 1.5}),
            *cell(256 * KiB, {WIDE: 1.5, NARROW: 1.0}),
            *cell(512 * KiB, {WIDE: 1.0, NARROW: slowdown_of_narrow}, spread=spread),
            *cell(1 * MiB, {WIDE: 1.0, NARROW: 1.5}),
        ]
        return derive.rules(measurements, 1, 4, {WIDE, NARROW})

    kept = (Rule(128 * KiB, WIDE), Rule(512 * KiB, NARROW), Rule(None, WIDE))
    switched = (Rule(128 * KiB, WIDE), Rule(256 * KiB, NARROW), Rule(None, WIDE))
    tolerance = derive.MAX_TOLERANCE
    slower = 1.0 + tolerance * 0.8  # slower, but by less than the most a size may lose
    # Slower by less than the cell's rounds spread: noise, NARROW stays on for 512 KiB.
    assert table(slower, spread=tolerance * 3) == kept
    # Slower where the rounds agree more closely than that: real, WIDE takes 512 KiB.
    assert table(slower, spread=tolerance * 0.4) == switched
    # A noisy cell keeps the previous shape only up to MAX_TOLERANCE, well under the 1-5%
    # that separates the shapes at large sizes.
    assert derive.MAX_TOLERANCE <= 0.01
    assert table(1.0 + tolerance * 2, spread=0.10) == switched
    assert table(1.0 + tolerance / 2, spread=0.10) == kept


def test_rules_are_per_element_size():
    # float32 (4 bytes) prefers WIDE, bfloat16 and float16 (2 bytes) NARROW: each its own.
    measurements = [
        *cell(1 * MiB, {WIDE: 1.10, NARROW: 1.0}, dtype="bfloat16"),
        *cell(1 * MiB, {WIDE: 1.20, NARROW: 1.0}, dtype="float16"),
        *cell(1 * MiB, {WIDE: 1.0, NARROW: 1.04}, dtype="float32"),
    ]
    assert derive.rules(measurements, 1, 2, {WIDE, NARROW}) == (Rule(None, NARROW),)
    assert derive.rules(measurements, 1, 4, {WIDE, NARROW}) == (Rule(None, WIDE),)
    assert derive.tables(measurements, {WIDE, NARROW}) == {
        1: {2: (Rule(None, NARROW),), 4: (Rule(None, WIDE),)}
    }
    # Where every element size agrees, one list for all (inputs-N = [...]).
    same = [x for x in measurements if x.dtype != "float32"]
    assert derive.tables(same, {WIDE, NARROW}) == {
        1: {launch_shapes.ANY_ELEMENT: (Rule(None, NARROW),)}
    }


def test_rules_take_the_least_worst_slowdown_over_the_dtypes_of_a_size_and_the_gpus():
    # bfloat16 prefers NARROW (WIDE 1.10x); float16, the same size, prefers WIDE (NARROW 1.04x):
    # NARROW's worst case, 1.04x, is the lesser. (float16 comes last, so the last cell read is
    # not the answer.)
    measurements = [
        *cell(1 * MiB, {WIDE: 1.10, NARROW: 1.0}, dtype="bfloat16"),
        *cell(1 * MiB, {WIDE: 1.0, NARROW: 1.04}, dtype="float16"),
    ]
    assert derive.rules(measurements, 1, 2, {WIDE, NARROW}) == (Rule(None, NARROW),)
    assert derive.rules(measurements[2:], 1, 2, {WIDE, NARROW}) == (Rule(None, WIDE),)
    # The same over two GPUs.
    measurements = [
        *cell(1 * MiB, {WIDE: 1.10, NARROW: 1.0}, gpu="B"),
        *cell(1 * MiB, {WIDE: 1.0, NARROW: 1.04}, gpu="A"),
    ]
    assert derive.rules(measurements, 1, 4, {WIDE, NARROW}) == (Rule(None, NARROW),)


# --------------------------------------------------------------------------- carried shapes


def test_carried_shapes_are_at_most_max_shapes():
    shapes = [Shape(a, b, p) for a in (8, 16) for b in (128, 256) for p in (1, 2, 4)]
    assert len(shapes) > derive.MAX_SHAPES
    # Each shape wins at one size and is 1.5x elsewhere.
    measurements = [
        m(shape, MiB * 2**i, 1.0 if shape == winner else 1.5)
        for i, winner in enumerate(shapes)
        for shape in shapes
    ]
    carried = derive.carried_shapes(measurements)
    assert len(carried) == derive.MAX_SHAPES
    assert carried < set(shapes)
    assert len(derive.carried_shapes(measurements, count=2)) == 2
    # Fewer shapes measured than allowed: all of them.
    assert derive.carried_shapes(measurements[:3]) == set(shapes[:3])


def test_carried_shapes_are_picked_on_the_large_sizes():
    assert 512 * KiB < derive.PICK_FROM_BYTES <= MiB  # the cells below are on either side
    small = Shape(8, 512, 2)  # wins by far under 1 MiB, is slow from it
    measurements = [
        *cell(256 * KiB, {small: 1.0, WIDE: 3.0, NARROW: 3.0, EIGHT: 3.0}),
        *cell(512 * KiB, {small: 1.0, WIDE: 3.0, NARROW: 3.0, EIGHT: 3.0}),
        *cell(1 * MiB, {small: 1.5, WIDE: 1.0, NARROW: 1.2, EIGHT: 1.3}),
        *cell(4 * MiB, {small: 1.5, WIDE: 1.1, NARROW: 1.0, EIGHT: 1.3}),
    ]
    # One shape: the least total log-slowdown from 1 MiB, WIDE (1.0 * 1.1 < 1.2 * 1.0).
    assert derive.carried_shapes(measurements, count=1) == {WIDE}
    # Two: WIDE and NARROW leave no slowdown at all from 1 MiB; `small` is not picked.
    assert derive.carried_shapes(measurements, count=2) == {WIDE, NARROW}
    assert small in derive.carried_shapes(measurements, count=4)  # only when all are
    # Without the small sizes' cells, nothing changes: they do not count.
    large = [x for x in measurements if x.nbytes >= MiB]
    assert derive.carried_shapes(large, count=2) == {WIDE, NARROW}


def test_an_evict_first_twin_is_carried_as_a_shape_of_its_own():
    twin = Shape(NARROW.access, NARROW.block, NARROW.per_thread, "evict-first")
    measurements = [
        *cell(1 * MiB, {twin: 1.0, NARROW: 1.02, WIDE: 1.1}),
        *cell(4 * MiB, {twin: 1.0, NARROW: 1.02, WIDE: 1.1}),
        *cell(64 * MiB, {twin: 1.01, NARROW: 1.0, WIDE: 1.02}),
    ]
    # One shape: the twin's 1% at 64 MiB costs less than the read-only load's 2% twice.
    assert derive.carried_shapes(measurements, count=1) == {twin}
    assert derive.carried_shapes(measurements, count=2) == {twin, NARROW}
    assert derive.rules(measurements, 1, 4, {twin, NARROW}) == (
        Rule(4 * MiB, twin),
        Rule(None, NARROW),
    )


# --------------------------------------------------------------------------- the table file


def test_a_table_takes_an_evict_first_shape_where_it_is_fastest(tmp_path):
    # Fake GPU A as in FACTORS, with the evict-first twin of WIDE measured in every cell too
    # (as measure times every compiled shape) and the fastest with two inputs from 1 MiB.
    twin = Shape(WIDE.access, WIDE.block, WIDE.per_thread, "evict-first")
    slower = {(1, True): 1.05, (1, False): 1.05, (2, True): 1.3, (2, False): 0.98}
    factors = {key: {**f, twin: slower[key]} for key, f in FACTORS["Fake GPU A"].items()}
    path = write_measurements(tmp_path / "fake-gpu-a.csv", "Fake GPU A", "2026-01-02", factors)
    assert "16B x4 /256 evict-first" in path.read_text()  # the label measure writes
    measurements = derive.read_measurements(path)
    assert twin in {x.shape for x in measurements}
    text = derive.table_text(measurements, PREAMBLE)
    assert '    { access = 16, block = 256, per-thread = 4, load = "evict-first" },' in text
    table_file = tmp_path / "launch_shapes.toml"
    table_file.write_text(text)
    tables = launch_shapes.load(table_file)
    for table in tables.tables:  # [default] (one GPU: the same) and Fake GPU A's
        assert table.shape_for(2, 4, 512 * KiB) == EIGHT
        # the twin's measurements count at 4-16 MiB only (derive.EVICT_FIRST_BYTES)
        assert table.shape_for(2, 4, 2 * MiB) == NARROW
        assert table.shape_for(2, 4, 4 * MiB) == twin
        assert table.shape_for(1, 4, 4 * MiB) == WIDE  # one input: the twin 5% slower
    assert twin in tables.compiled(False) and WIDE in tables.compiled(False)


def test_evict_first_is_taken_only_where_a_pipeline_keeps_its_gain():
    # The tuner times shapes alone, where evict-first also wins at 32 MiB; followed by an
    # unrelated op it loses there: 4-16 MiB only.
    twin = Shape(NARROW.access, NARROW.block, NARROW.per_thread, "evict-first")
    sizes = (2 * MiB, 4 * MiB, 16 * MiB, 32 * MiB)
    measurements = [x for nb in sizes for x in cell(nb, {twin: 0.98, NARROW: 1.0, WIDE: 1.1})]
    kept = derive.usable(measurements)
    assert {x.nbytes for x in kept if x.shape == twin} == {4 * MiB, 16 * MiB}
    assert len([x for x in kept if x.shape != twin]) == 2 * len(sizes)  # the others all kept
    text = derive.table_text(measurements, PREAMBLE)
    path_rules = [line.strip() for line in text.splitlines() if "up-to-bytes" in line]
    evict_first = 'load = "evict-first"'
    assert path_rules[:2] == [
        f"{{ up-to-bytes = {2 * MiB}, access = 16, block = 128, per-thread = 1 }},",
        f"{{ up-to-bytes = {16 * MiB}, access = 16, block = 128, per-thread = 1, {evict_first} }},",
    ]


def test_table_text_loads_and_has_default_and_each_gpu(two_gpus, tmp_path):
    measurements = derive.latest_per_gpu(two_gpus)
    text = derive.table_text(measurements, PREAMBLE)
    assert text.startswith(PREAMBLE)
    path = tmp_path / "launch_shapes.toml"
    path.write_text(text)
    tables = launch_shapes.load(path)
    assert [t.gpu for t in tables.tables] == [DEFAULT, "Fake GPU A", "Fake GPU B"]
    assert text.count(f"[{DEFAULT}]") == 1
    assert '[gpu."Fake GPU A"]' in text and '[gpu."Fake GPU B"]' in text
    default, a, b = tables.tables
    assert a.measured == (
        "Fake GPU A, driver 580.1, torch 2.11.0+cu130, 2026-01-02: "
        "lab/tune/measurements/" + "fake-gpu-a-2026-01-02.csv"
    )
    assert b.measured.endswith("2026-01-03: lab/tune/measurements/" + "fake-gpu-b-2026-01-03.csv")
    assert default.measured == (
        "least worst slowdown over Fake GPU A, Fake GPU B (lab/tune/measurements/"
        "fake-gpu-a-2026-01-02.csv, lab/tune/measurements/" + "fake-gpu-b-2026-01-03.csv)"
    )
    # What FACTORS says wins: per GPU for one input, under and from 1 MiB for two; the same
    # for float32 and bfloat16, so one list for every element size.
    any_size = launch_shapes.ANY_ELEMENT
    assert a.rules[1] == {any_size: (Rule(None, WIDE),)}
    assert b.rules[1] == {any_size: (Rule(None, NARROW),)}
    two = {any_size: (Rule(512 * KiB, EIGHT), Rule(None, NARROW))}
    assert a.rules[2] == b.rules[2] == default.rules[2] == two
    # [default], one input: WIDE is 1.2x on B, NARROW 1.1x on A; the least worst is NARROW.
    assert default.rules[1] == {any_size: (Rule(None, NARROW),)}
    assert a.shape_for(1, 4, 4 * MiB) == WIDE and b.shape_for(1, 2, 4 * MiB) == NARROW
    assert set(tables.compiled(False)) == set(SHAPES)
    assert tables.candidates == ()


def test_table_text_writes_lists_per_element_size_that_load_reads(tmp_path):
    measurements = [
        *cell(1 * MiB, {WIDE: 1.10, NARROW: 1.0}, dtype="bfloat16", gpu="Fake GPU A"),
        *cell(1 * MiB, {WIDE: 1.0, NARROW: 1.04}, dtype="float32", gpu="Fake GPU A"),
    ]
    text = derive.table_text(measurements, PREAMBLE)
    assert "inputs-1.element-2 = [" in text and "inputs-1.element-4 = [" in text
    path = tmp_path / "launch_shapes.toml"
    path.write_text(text)
    for table in launch_shapes.load(path).tables:  # [default] and the GPU's
        assert table.shape_for(1, 2, MiB) == NARROW  # bfloat16, float16
        assert table.shape_for(1, 4, MiB) == WIDE  # float32, int32
        assert table.shape_for(1, 8, MiB) == WIDE  # float64: the 4-byte list
        assert table.shape_for(1, 1, MiB) == NARROW  # int8: the smallest listed


def test_gpus_measured_with_different_candidates_are_refused(two_gpus, tmp_path):
    # GPU A re-measured with a tuning wheel that has an evict-first twin, GPU B's CSV older.
    twin = Shape(WIDE.access, WIDE.block, WIDE.per_thread, "evict-first")
    factors = {key: {**f, twin: 1.0} for key, f in FACTORS["Fake GPU A"].items()}
    newer = write_measurements(tmp_path / "a-new.csv", "Fake GPU A", "2026-02-01", factors)
    measurements = derive.latest_per_gpu([*two_gpus, newer])
    with pytest.raises(launch_shapes.LaunchShapeError,
                       match="Fake GPU B lack 16B x4 /256 evict-first"):  # fmt: skip
        derive.table_text(measurements, PREAMBLE)


def test_write_table_checks_then_writes(two_gpus, tmp_path, capsys):
    path = tmp_path / "launch_shapes.toml"
    # The comments name [default] too: the preamble ends at the table's header, not there.
    preamble = (
        "# Per-GPU launch shapes: the GPU's table, else [default].\n"
        "# A second comment line.\n\n"
        "[candidates]\nshapes = [{ access = 8, block = 512, per-thread = 2 }]\n"
    )
    stale = preamble + "\n[default]\ninputs-1 = [{ access = 16, block = 256, per-thread = 1 }]\n"
    path.write_text(stale)
    assert derive.write_table(two_gpus, path, check=True) == 1
    assert "differs" in capsys.readouterr().out
    assert path.read_text() == stale  # a check writes nothing
    assert derive.write_table(two_gpus, path) == 0
    text = path.read_text()
    assert text != stale
    assert text.startswith(preamble)  # comments and [candidates] kept whole
    assert text == derive.table_text(derive.latest_per_gpu(two_gpus), preamble)
    assert launch_shapes.load(path).candidates == (Shape(8, 512, 2),)
    capsys.readouterr()
    assert derive.write_table(two_gpus, path, check=True) == 0
    assert "matches" in capsys.readouterr().out
    # Writing again changes nothing, not even the file's time (make rebuilds the wheel on it).
    os.utime(path, ns=(1, 1))
    assert derive.write_table(two_gpus, path) == 0
    assert path.read_text() == text
    assert path.stat().st_mtime_ns == 1
    # No measurements: nothing to derive, the file untouched.
    assert derive.write_table([], path) == 2
    assert path.read_text() == text


def test_latest_per_gpu_keeps_the_newest_date_of_each_gpu(tmp_path):
    old_a = write_measurements(tmp_path / "a-old.csv", "Fake GPU A", "2026-01-01", scale=3.0)
    new_a = write_measurements(tmp_path / "a-new.csv", "Fake GPU A", "2026-02-01")
    only_b = write_measurements(tmp_path / "b.csv", "Fake GPU B", "2026-01-15", scale=2.0)
    for paths in ([old_a, new_a, only_b], [only_b, new_a, old_a]):
        kept = derive.latest_per_gpu(paths)
        dates = {(x.gpu, x.provenance.split(", ")[-1].split(":")[0]) for x in kept}
        assert dates == {("Fake GPU A", "2026-02-01"), ("Fake GPU B", "2026-01-15")}
        assert len(kept) == len(derive.read_measurements(new_a)) + len(
            derive.read_measurements(only_b)
        )
        assert {x.time for x in kept if x.gpu == "Fake GPU A"} == {
            x.time for x in derive.read_measurements(new_a)
        }


@pytest.mark.parametrize("bad", ["0", "-2", "five"])
def test_measure_refuses_a_round_count_it_cannot_use(bad, capsys):
    # Before: 0 fell back to 5 silently and -2 ended in a traceback from median([]).
    with pytest.raises(SystemExit) as exc:
        tune_main(["measure", "--rounds", bad])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--rounds" in err and ("at least 1 round" in err or "not a whole number" in err)


def test_an_ops_own_measurements_give_its_own_list_and_leave_the_others(tmp_path, two_gpus):
    # GELU measured on its own on GPU A (lab.tune measure --ops my_gelu, a newer file):
    # op-my_gelu lists from its own cells and its own carried shapes (EIGHT, which no
    # one-input list takes); the inputs-N lists and GPU B's table are what they were.
    own = write_op_measurements(tmp_path / "fake-gpu-a-my_gelu-2026-01-05.csv", "Fake GPU A",
                                "my_gelu", {EIGHT: 1.0, NARROW: 1.2, WIDE: 1.4})  # fmt: skip
    measurements = derive.latest_per_gpu([*two_gpus, own])
    assert len(measurements) == len(derive.latest_per_gpu(two_gpus)) + 2 * len(LOG2_BYTES) * 3
    (tmp_path / "before.toml").write_text(
        derive.table_text(derive.latest_per_gpu(two_gpus), PREAMBLE)
    )
    (tmp_path / "after.toml").write_text(derive.table_text(measurements, PREAMBLE))
    before, after = (launch_shapes.load(tmp_path / f) for f in ("before.toml", "after.toml"))
    assert [t.rules for t in after.tables] == [t.rules for t in before.tables]
    assert after.own_ops() == ["my_gelu"]
    by_gpu = {t.gpu: t for t in after.tables}
    for gpu in (DEFAULT, "Fake GPU A"):
        assert by_gpu[gpu].rules_for(1, 4, "my_gelu") == (Rule(None, EIGHT),), gpu
    assert "my_gelu" not in by_gpu["Fake GPU B"].op_rules  # B takes its inputs-1 list
    assert EIGHT in after.used_for(1, 4, "my_gelu")
    assert EIGHT not in after.used_for(1, 4, "my_square")
    assert "op-my_gelu = [" in (tmp_path / "after.toml").read_text()
