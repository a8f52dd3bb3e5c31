"""Measurements (lab.tune measure's CSVs) -> the launch-shape tables -> the text of
tuning/launch_shapes.toml. Pure: no GPU, no torch; lab/tests/test_tuning.py runs it on made-up
numbers.

A shape's slowdown in a cell (GPU, inputs, dtype, size) is its time over the fastest shape's
there. First the few shapes the wheel will carry are picked (MAX_SHAPES, greedily: each the one
that most lowers the sum, over the cells of >= 1 MiB, of the log of the best slowdown left):
every shape costs kernels, wheel bytes and first-call time. Then, per GPU, number of inputs and
element size (the best shape differs between float32 and bfloat16), each measured size takes
the carried shape whose worst slowdown over the dtypes of that size is least; a size keeps the
shape of the size below it when that one is within the cell's own round-to-round spread of the
best there (at most MAX_TOLERANCE), so noise does not split the table into slivers while a
steady 1% is not given away where the cells are steady. Neighbouring sizes with one shape
merge into one rule, up to the largest size measured; an inputs-N whose element sizes all got
the same rules is written once.
[default] is the same choice with the worst slowdown taken over every measured GPU too.
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from buildtools.declarations import DTYPES
from buildtools.launch_shapes import (
    ANY_ELEMENT,
    DEFAULT,
    DEFAULT_LOAD,
    LOADS,
    OP_PREFIX,
    TABLE_FILE,
    LaunchShapeError,
    Rule,
    Shape,
    load,
)

# What `python -m lab.tune measure` writes and `table` reads: one CSV per GPU, list and date.
MEASUREMENTS = Path(__file__).resolve().parent / "measurements"

# Every carried shape (an evict-first twin counts as one) costs about 20 kernels of the wheel.
MAX_SHAPES = 8
# A size keeps the shape below it within the cell's spread, but a small cell's spread would
# keep anything: never one more than 0.2% slower (docs/PERFORMANCE.md, launch-shape tuning).
MAX_TOLERANCE = 0.002
# Picked on the bandwidth-bound sizes (>= 1 MiB per tensor), where a shape's effect is above
# the noise.
PICK_FROM_BYTES = 2**20
NOT_SHAPES = ("reference", "copy")
# Evict-first loads only where a following op keeps their gain; the tuner, timing each shape
# alone after an L2 flush, cannot see that, so their measurements elsewhere are not used.
EVICT_FIRST_BYTES = (4 * 2**20, 16 * 2**20)


@dataclass(frozen=True)
class Measurement:
    gpu: str
    provenance: str  # "NVIDIA H200, driver 580.159.04, torch 2.11.0+cu130, 2026-11-23: <file>"
    inputs: int
    dtype: str
    nbytes: int
    shape: Shape
    # What the shapes of a cell are compared by: the shape's time over the reference's in the
    # same round, the median over rounds (measure's vs_reference); in CSVs without that column
    # the shape's own median ms. Either way one cell's are all of one kind.
    time: float
    spread: float = 0.0  # (largest - smallest round) / median, as a fraction
    # Which list it measures: "" for its number of inputs' (inputs-N), or an op's own
    # ("op-my_gelu": an op with heavier math, measured on its own).
    table: str = ""

    @property
    def element_bytes(self) -> int:
        return DTYPES[self.dtype].size

    @property
    def group(self) -> int | str:
        """The table's list it decides: its number of inputs, or "op-<name>"."""
        return self.table if self.table.startswith(OP_PREFIX) else self.inputs


def parse_shape(label: str) -> Shape:
    """'16B x4 /256' (str(Shape)) -> Shape(16, 256, 4); '16B x2 /128 evict-first' -> Shape(16,
    128, 2, 'evict-first'). The CSVs of before the load flavours have the first kind only."""
    access, per_thread, block, *flavour = label.split()
    load = flavour[0] if flavour else DEFAULT_LOAD
    if len(flavour) > 1 or load not in LOADS:
        raise LaunchShapeError(f"shape label {label!r}: the load flavour is one of {LOADS}")
    return Shape(int(access.rstrip("B")), int(block.lstrip("/")), int(per_thread.lstrip("x")), load)


def read_measurements(path: Path) -> list[Measurement]:
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    out = []
    for row in rows:
        if row["shape"] in NOT_SHAPES:
            continue
        provenance = (
            f"{row['gpu']}, driver {row['driver']}, torch {row['torch']}, {row['date']}: "
            f"lab/tune/measurements/{path.name}"
        )
        if row.get("vs_reference"):
            time, spread = float(row["vs_reference"]), float(row["vs_reference_spread_pct"])
        else:  # a CSV without the reference ratio
            time, spread = float(row["ms"]), float(row["spread_pct"])
        table = row.get("table") or ""  # absent in the CSVs of before the ops' own lists
        out.append(Measurement(row["gpu"], provenance, int(row["inputs"]), row["dtype"],
                               int(row["bytes"]), parse_shape(row["shape"]), time,
                               spread / 100, table))  # fmt: skip
    return out


@dataclass
class Cell:
    """One size's choice: shape -> its worst slowdown against the fastest measured shape,
    and the largest round-to-round spread of the measurements behind it."""

    worst: dict[Shape, float]
    spread: float


def slowdowns(
    measurements: list[Measurement], allowed: set[Shape] | None = None, per_gpu: bool = False
) -> dict[tuple, Cell]:
    """(group, element bytes, bytes) (with per_gpu: (gpu, group, element bytes, bytes)) ->
    each shape's worst slowdown over the GPUs and dtypes measured there; the group is the
    number of inputs or an op's own list (Measurement.group)."""
    cells: dict[tuple, dict[Shape, Measurement]] = defaultdict(dict)
    for m in measurements:
        cells[(m.gpu, m.group, m.dtype, m.nbytes)][m.shape] = m
    out: dict[tuple, Cell] = {}
    for (gpu, group, dtype, nbytes), times in cells.items():
        best = min(m.time for m in times.values())
        key = (group, DTYPES[dtype].size, nbytes)
        cell = out.setdefault((gpu, *key) if per_gpu else key, Cell({}, 0.0))
        for shape, m in times.items():
            cell.spread = max(cell.spread, m.spread)
            if allowed is None or shape in allowed:
                cell.worst[shape] = max(cell.worst.get(shape, 0.0), m.time / best)
    return out


def carried_shapes(measurements: list[Measurement], count: int = MAX_SHAPES) -> set[Shape]:
    """The `count` shapes that together leave the least total log-slowdown over every cell."""
    cells = [
        c.worst for key, c in slowdowns(measurements, per_gpu=True).items()
        if key[-1] >= PICK_FROM_BYTES
    ]  # fmt: skip
    shapes = sorted({m.shape for m in measurements})
    chosen: set[Shape] = set()

    def cost(candidate: set[Shape]) -> float:
        # A cell no candidate was measured in (evict-first shapes only have some sizes,
        # EVICT_FIRST_BYTES) counts as its slowest shape.
        return sum(
            min((math.log(w[s]) for s in candidate if s in w), default=math.log(max(w.values())))
            for w in cells
        )

    while len(chosen) < min(count, len(shapes)):
        chosen.add(
            min((s for s in shapes if s not in chosen), key=lambda s: (cost(chosen | {s}), s))
        )
    return chosen


def choose(cell: Cell, previous: Shape | None) -> Shape:
    worst = cell.worst
    best = min(worst, key=lambda s: (worst[s], s))
    if previous in worst and worst[previous] <= worst[best] * (1 + min(cell.spread, MAX_TOLERANCE)):
        return previous
    return best


def rules(
    measurements: list[Measurement], group: int | str, element_bytes: int, carried: set[Shape]
) -> tuple[Rule, ...]:
    """The list of `group` (a number of inputs, or "op-<name>") for one element size."""
    by_size = {
        nb: cell for (g, e, nb), cell in slowdowns(measurements, carried).items()
        if (g, e) == (group, element_bytes)
    }  # fmt: skip
    chosen: list[tuple[int, Shape]] = []
    previous = None
    for nbytes in sorted(by_size):
        previous = choose(by_size[nbytes], previous)
        chosen.append((nbytes, previous))
    merged: list[Rule] = []
    for i, (nbytes, shape) in enumerate(chosen):
        last = i == len(chosen) - 1
        if not last and chosen[i + 1][1] == shape:
            continue
        merged.append(Rule(None if last else nbytes, shape))
    return tuple(merged)


def tables(
    measurements: list[Measurement], carried: set[Shape] | dict
) -> dict[int | str, dict[int, tuple[Rule, ...]]]:
    """group (inputs, or "op-<name>") -> element bytes -> rules; one list (ANY_ELEMENT)
    where every size agrees. `carried`: the shapes to choose from, or one set per group
    family (carried_per_family)."""
    out: dict[int | str, dict[int, tuple[Rule, ...]]] = {}
    groups = sorted({m.group for m in measurements}, key=lambda g: (isinstance(g, str), str(g)))
    for group in groups:
        shapes = carried[_family(group)] if isinstance(carried, dict) else carried
        elements = sorted({m.element_bytes for m in measurements if m.group == group})
        by_element = {e: rules(measurements, group, e, shapes) for e in elements}
        same = len(set(by_element.values())) == 1
        out[group] = {ANY_ELEMENT: by_element[elements[0]]} if same else by_element
    return out


def _family(group: int | str) -> str:
    """The inputs-N lists share their carried shapes (every op compiles them); an op's own
    list carries its own (only that op compiles them)."""
    return group if isinstance(group, str) else "inputs"


def carried_per_family(measurements: list[Measurement]) -> dict[str, set[Shape]]:
    """Each family's carried shapes, picked over its own cells."""
    families = sorted({_family(m.group) for m in measurements})
    return {f: carried_shapes([m for m in measurements if _family(m.group) == f]) for f in families}


def _rule_rows(rules_: tuple[Rule, ...]) -> str:
    rows = []
    for r in rules_:
        limit = "" if r.up_to_bytes is None else f"up-to-bytes = {r.up_to_bytes}, "
        s = r.shape
        load = "" if s.load == DEFAULT_LOAD else f", load = {_toml_string(s.load)}"
        rows.append(f"    {{ {limit}access = {s.access}, block = {s.block}, "
                    f"per-thread = {s.per_thread}{load} }},")  # fmt: skip
    return "\n".join(rows)


def _table_text(header: str, measured: str, lists: dict) -> str:
    lines = [header, f"measured = {_toml_string(measured)}"]
    for group, by_element in lists.items():
        for element, rules_ in sorted(by_element.items()):
            name = group if isinstance(group, str) else f"inputs-{group}"
            key = name + ("" if element == ANY_ELEMENT else f".element-{element}")
            lines += [f"{key} = [", _rule_rows(rules_), "]"]
    return "\n".join(lines) + "\n"


def _toml_string(text: str) -> str:
    return json.dumps(text)  # a JSON string is a TOML basic string (same escapes)


def _preamble(path: Path) -> str:
    """The file's comments and [candidates], which the tables never change: everything before
    the [default] table's header (a line of its own; the comments may name it too)."""
    text = path.read_text()
    header = re.search(rf"^[ \t]*\[{DEFAULT}\]", text, re.MULTILINE)
    if header is None:
        raise LaunchShapeError(f"{path}: no [{DEFAULT}] table to write the tables after")
    return text[: header.start()].rstrip() + "\n"


def _check_same_shapes(measurements: list[Measurement]) -> None:
    """Every GPU must have timed the same shapes: [default] weighs each shape over all of
    them, and the carried shapes are picked over every cell. A GPU measured with a tuning
    wheel that has other candidates than another's CSV is refused here, not left to fail
    inside the choice."""
    by_gpu: dict[str, set[Shape]] = defaultdict(set)
    for m in measurements:
        by_gpu[m.gpu].add(m.shape)
    every = set().union(*by_gpu.values())
    for gpu, shapes in sorted(by_gpu.items()):
        if shapes != every:
            missing = ", ".join(map(str, sorted(every - shapes)))
            raise LaunchShapeError(
                f"the measurements of {gpu} lack {missing}, which another GPU's have: measure "
                "every GPU with one tuning wheel (make tune-wheel), or derive from fewer CSVs"
            )


def usable(measurements: list[Measurement]) -> list[Measurement]:
    """The measurements a table may follow: evict-first shapes only at EVICT_FIRST_BYTES."""
    low, high = EVICT_FIRST_BYTES
    return [m for m in measurements if m.shape.load == DEFAULT_LOAD or low <= m.nbytes <= high]


def table_text(measurements: list[Measurement], preamble: str) -> str:
    _check_same_shapes(measurements)
    measurements = usable(measurements)
    gpus = sorted({m.gpu for m in measurements})
    sources = sorted({m.provenance.split(": ")[1] for m in measurements})
    parts = [preamble]
    carried = carried_per_family(measurements)
    parts.append(_table_text(f"\n[{DEFAULT}]", "least worst slowdown over " + ", ".join(gpus)
                             + " (" + ", ".join(sources) + ")",
                             tables(measurements, carried)))  # fmt: skip
    for gpu in gpus:
        mine = [m for m in measurements if m.gpu == gpu]
        provenance = "; ".join(sorted({m.provenance for m in mine}))
        parts.append(_table_text(f"\n[gpu.{_toml_string(gpu)}]", provenance, tables(mine, carried)))
    return "".join(parts)


def latest_per_gpu(paths: list[Path]) -> list[Measurement]:
    """Every measurement of the newest file per GPU and list (files are named
    <gpu>-<date>.csv; an op measured on its own later keeps the inputs-N measurements)."""
    newest: dict[tuple, tuple[str, list[Measurement]]] = {}
    for path in paths:
        rows = read_measurements(path)
        for key in {(m.gpu, m.group) for m in rows}:
            mine = [m for m in rows if (m.gpu, m.group) == key]
            date = max(m.provenance.split(", ")[-1] for m in mine)
            if key not in newest or date > newest[key][0]:
                newest[key] = (date, mine)
    return [m for _, rows in newest.values() for m in rows]


def write_table(paths: list[Path], path: Path = TABLE_FILE, check: bool = False) -> int:
    measurements = latest_per_gpu(paths)
    if not measurements:
        print("no measurements: run `python -m lab.tune measure` on a GPU first")
        return 2
    text = table_text(measurements, _preamble(path))
    if check:
        same = text == path.read_text()
        print(f"{path.name} {'matches' if same else 'differs from'} the measurements")
        return 0 if same else 1
    if text != path.read_text():  # unchanged, untouched: a newer mtime rebuilds the wheel
        path.write_text(text)
    written = load(path)  # what the build will read: refuse to leave a table it cannot use
    shapes = written.compiled(with_candidates=False)
    print(f"wrote {path}: {len(written.tables)} tables, {len(shapes)} shapes compiled: "
          + ", ".join(map(str, shapes)))  # fmt: skip
    return 0
