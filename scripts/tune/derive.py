"""Measurements (scripts.tune measure's CSVs) -> the launch-shape tables -> the text of
tuning/launch_shapes.toml. Pure: no GPU, no torch; tests/test_tuning.py runs it on made-up
numbers.

A shape's slowdown in a cell (GPU, inputs, dtype, size) is its time over the fastest shape's
there. First the few shapes the wheel will carry are picked (MAX_SHAPES, greedily: each the one
that most lowers the sum, over the cells of >= 1 MiB, of the log of the best slowdown left):
every shape costs kernels, wheel bytes and first-call time. Then, per GPU and number of inputs,
each measured size
takes the carried shape whose worst slowdown over the dtypes is least; a size keeps the shape of
the size below it when that one is within TOLERANCE of the best there, so the noise of a
few-microsecond kernel does not split the table into slivers. Neighbouring sizes with one shape
merge into one rule, up to the largest size measured. [default] is the same choice with the worst
slowdown taken over every measured GPU too.
"""

from __future__ import annotations

import csv
import math
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from buildtools.launch_shapes import DEFAULT, TABLE_FILE, LaunchShapeError, Rule, Shape, load

TOLERANCE = 1.02  # a shape within 2% of the best counts as the best (cells' spread: 1-5%)
MAX_SHAPES = 5
# The carried shapes are picked on the bandwidth-bound sizes (>= 1 MiB per tensor): below it a
# kernel takes a few microseconds and a cell's spread (5-15%) is larger than any shape's effect.
PICK_FROM_BYTES = 2**20
NOT_SHAPES = ("reference", "copy")


@dataclass(frozen=True)
class Measurement:
    gpu: str
    provenance: str  # "NVIDIA H200, driver 580.159.04, torch 2.11.0+cu130, 2026-11-23: <file>"
    inputs: int
    dtype: str
    nbytes: int
    shape: Shape
    ms: float


def parse_shape(label: str) -> Shape:
    """'16B x4 /256' (str(Shape)) -> Shape(16, 256, 4)."""
    access, per_thread, block = label.split()
    return Shape(int(access.rstrip("B")), int(block.lstrip("/")), int(per_thread.lstrip("x")))


def read_measurements(path: Path) -> list[Measurement]:
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    out = []
    for row in rows:
        if row["shape"] in NOT_SHAPES:
            continue
        provenance = (
            f"{row['gpu']}, driver {row['driver']}, torch {row['torch']}, {row['date']}: "
            f"tuning/measurements/{path.name}"
        )
        shape, ms = parse_shape(row["shape"]), float(row["ms"])
        out.append(Measurement(row["gpu"], provenance, int(row["inputs"]), row["dtype"],
                               int(row["bytes"]), shape, ms))  # fmt: skip
    return out


def slowdowns(
    measurements: list[Measurement], allowed: set[Shape] | None = None, per_gpu: bool = False
) -> dict[tuple, dict[Shape, float]]:
    """(inputs, bytes) (with per_gpu: (gpu, inputs, bytes)) -> shape -> its worst slowdown over
    the GPUs and dtypes measured there, against the fastest of every measured shape."""
    cells: dict[tuple, dict[Shape, float]] = defaultdict(dict)
    for m in measurements:
        cells[(m.gpu, m.inputs, m.dtype, m.nbytes)][m.shape] = m.ms
    worst: dict[tuple, dict[Shape, float]] = defaultdict(dict)
    for (gpu, inputs, _, nbytes), times in cells.items():
        best = min(times.values())
        key = (gpu, inputs, nbytes) if per_gpu else (inputs, nbytes)
        for shape, ms in times.items():
            if allowed is None or shape in allowed:
                worst[key][shape] = max(worst[key].get(shape, 0.0), ms / best)
    return worst


def carried_shapes(measurements: list[Measurement], count: int = MAX_SHAPES) -> set[Shape]:
    """The `count` shapes that together leave the least total log-slowdown over every cell."""
    cells = [
        w for key, w in slowdowns(measurements, per_gpu=True).items() if key[2] >= PICK_FROM_BYTES
    ]
    shapes = sorted({m.shape for m in measurements})
    chosen: set[Shape] = set()

    def cost(candidate: set[Shape]) -> float:
        return sum(min(math.log(w[s]) for s in candidate if s in w) for w in cells)

    while len(chosen) < min(count, len(shapes)):
        chosen.add(
            min((s for s in shapes if s not in chosen), key=lambda s: (cost(chosen | {s}), s))
        )
    return chosen


def choose(worst: dict[Shape, float], previous: Shape | None) -> Shape:
    best = min(worst, key=lambda s: (worst[s], s))
    if previous in worst and worst[previous] <= worst[best] * TOLERANCE:
        return previous
    return best


def rules(measurements: list[Measurement], inputs: int, carried: set[Shape]) -> tuple[Rule, ...]:
    by_size = {nb: w for (n, nb), w in slowdowns(measurements, carried).items() if n == inputs}
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


def _rule_rows(rules_: tuple[Rule, ...]) -> str:
    rows = []
    for r in rules_:
        limit = "" if r.up_to_bytes is None else f"up-to-bytes = {r.up_to_bytes}, "
        s = r.shape
        rows.append(f"    {{ {limit}access = {s.access}, block = {s.block}, "
                    f"per-thread = {s.per_thread} }},")  # fmt: skip
    return "\n".join(rows)


def _table_text(header: str, measured: str, tables: dict[int, tuple[Rule, ...]]) -> str:
    lines = [header, f"measured = {_toml_string(measured)}"]
    for inputs, rules_ in sorted(tables.items()):
        lines += [f"inputs-{inputs} = [", _rule_rows(rules_), "]"]
    return "\n".join(lines) + "\n"


def _toml_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _preamble(path: Path) -> str:
    """The file's comments and [candidates], which the tables never change: everything before
    the [default] table's header (a line of its own; the comments may name it too)."""
    text = path.read_text()
    header = re.search(rf"^[ \t]*\[{DEFAULT}\]", text, re.MULTILINE)
    if header is None:
        raise LaunchShapeError(f"{path}: no [{DEFAULT}] table to write the tables after")
    return text[: header.start()].rstrip() + "\n"


def table_text(measurements: list[Measurement], preamble: str) -> str:
    gpus = sorted({m.gpu for m in measurements})
    inputs = sorted({m.inputs for m in measurements})
    sources = sorted({m.provenance.split(": ")[1] for m in measurements})
    parts = [preamble]
    carried = carried_shapes(measurements)
    default = {n: rules(measurements, n, carried) for n in inputs}
    parts.append(_table_text(f"\n[{DEFAULT}]", "least worst slowdown over " + ", ".join(gpus)
                             + " (" + ", ".join(sources) + ")", default))  # fmt: skip
    for gpu in gpus:
        mine = [m for m in measurements if m.gpu == gpu]
        provenance = "; ".join(sorted({m.provenance for m in mine}))
        tables = {n: rules(mine, n, carried) for n in inputs}
        parts.append(_table_text(f"\n[gpu.{_toml_string(gpu)}]", provenance, tables))
    return "".join(parts)


def latest_per_gpu(paths: list[Path]) -> list[Measurement]:
    """Every measurement of the newest file per GPU (files are named <gpu>-<date>.csv)."""
    newest: dict[str, tuple[str, list[Measurement]]] = {}
    for path in paths:
        rows = read_measurements(path)
        for gpu in {m.gpu for m in rows}:
            date = max(m.provenance.split(", ")[-1] for m in rows if m.gpu == gpu)
            if gpu not in newest or date > newest[gpu][0]:
                newest[gpu] = (date, [m for m in rows if m.gpu == gpu])
    return [m for _, rows in newest.values() for m in rows]


def write_table(paths: list[Path], path: Path = TABLE_FILE, check: bool = False) -> int:
    measurements = latest_per_gpu(paths)
    if not measurements:
        print("no measurements: run `python -m scripts.tune measure` on a GPU first")
        return 2
    text = table_text(measurements, _preamble(path))
    if check:
        same = text == path.read_text()
        print(f"{path.name} {'matches' if same else 'differs from'} the measurements")
        return 0 if same else 1
    path.write_text(text)
    tables = load(path)  # what the build will read: refuse to leave a table it cannot use
    shapes = tables.compiled(with_candidates=False)
    print(f"wrote {path}: {len(tables.tables)} tables, {len(shapes)} shapes compiled: "
          + ", ".join(map(str, shapes)))  # fmt: skip
    return 0
