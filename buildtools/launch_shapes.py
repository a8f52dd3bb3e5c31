"""The launch-shape tables of the vectorized elementwise kernel (tuning/launch_shapes.toml):
read, checked, and turned into what the build compiles (the distinct shapes) and what the
launcher looks up (one table per measured GPU, then the default).

The tables are data that `python -m lab.tune table` writes from measurements; this
module only reads them. `$CEE_TUNING_CANDIDATES=1` (make tune-wheel) also compiles every
candidate shape, so the tuning command can time each one on a GPU.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from . import config
from .c_source import c_string

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 builds
    import tomli as tomllib

TABLE_FILE = config.ROOT / "tuning" / "launch_shapes.toml"
ACCESS_BYTES = (8, 16)  # the widths csrc/elementwise_kernels.cuh has an AccessOf for
# How the vectorized kernel loads its inputs (a shape's `load = ...`; the kernel's template
# argument kLoad, buildtools/device_code.py LOAD_CONSTANTS): the read-only load (__ldg,
# ld.global.nc), or loads marked evict-first in L2, faster at mid sizes and slower at large
# ones: a flavour per shape, so that each GPU's table picks it per size from measurements.
LOADS = ("default", "evict-first")
DEFAULT_LOAD = LOADS[0]
MAX_INPUTS = 3
DEFAULT = "default"


class LaunchShapeError(config.ConfigError):
    """A table the build cannot use; the message names the file, the entry and the fix."""


@dataclass(frozen=True, order=True)
class Shape:
    """One instance of the vectorized kernel: `access` bytes per global access, `block`
    threads per block, `per_thread` accesses per thread, `load` the inputs' load flavour
    (one of LOADS)."""

    access: int
    block: int
    per_thread: int
    load: str = DEFAULT_LOAD

    def __str__(self) -> str:
        """'16B x2 /128', and '16B x2 /128 evict-first' for another load flavour (the labels
        of lab.tune's CSVs, which lab/tune/derive.py parses back)."""
        label = f"{self.access}B x{self.per_thread} /{self.block}"
        return label if self.load == DEFAULT_LOAD else f"{label} {self.load}"


@dataclass(frozen=True)
class Rule:
    up_to_bytes: int | None  # bytes of one tensor; None: any larger size
    shape: Shape


ANY_ELEMENT = 0  # a list for every element size (`inputs-N = [...]`)
ELEMENT_BYTES = (1, 2, 4, 8)  # the element sizes of the core's dtypes


def _nearest_listed(listed, wanted: int) -> int:
    """The largest key listed up to `wanted`, else the smallest listed."""
    below = sorted(k for k in listed if k <= wanted)
    return below[-1] if below else min(listed)


@dataclass(frozen=True)
class GpuTable:
    gpu: str  # the driver's device name, or "default"
    measured: str  # provenance: which GPU, driver, torch, date, measurement file
    # number of inputs -> element bytes (ANY_ELEMENT: any) -> rules, first fitting wins
    rules: dict[int, dict[int, tuple[Rule, ...]]]
    # An op measured on its own (heavier math than the op its number of inputs was measured
    # with): op name -> element bytes -> rules, taken before the inputs-N lists.
    op_rules: dict[str, dict[int, tuple[Rule, ...]]] = field(default_factory=dict)

    def rules_for(self, inputs: int, element_bytes: int, op: str | None = None) -> tuple[Rule, ...]:
        """The list for `op` (its own, if this table has one), else for `inputs` inputs of
        `element_bytes`-byte elements: for the number of inputs and then the element size,
        the largest listed up to it, else the smallest (a 1-byte dtype takes the 2-byte list,
        an 8-byte one the 4-byte list)."""
        by_element = self.op_rules.get(op) or self.rules[_nearest_listed(self.rules, inputs)]
        return by_element[_nearest_listed(by_element, element_bytes)]

    def shape_for(
        self, inputs: int, element_bytes: int, nbytes: int, op: str | None = None
    ) -> Shape:
        for rule in self.rules_for(inputs, element_bytes, op):
            if rule.up_to_bytes is None or nbytes <= rule.up_to_bytes:
                return rule.shape
        raise AssertionError("the last rule takes any size")  # checked on load

    def every_rule(self) -> list[Rule]:
        lists = [*self.rules.values(), *self.op_rules.values()]
        return [rule for by_element in lists for rules in by_element.values() for rule in rules]


@dataclass(frozen=True)
class LaunchShapes:
    candidates: tuple[Shape, ...]
    tables: tuple[GpuTable, ...]  # the default first

    def used_for(self, inputs: int, element_bytes: int, op: str | None = None) -> set[Shape]:
        """The shapes any table can give `op`, of `inputs` inputs and `element_bytes`-byte
        elements: the instances it needs (the rest would never run)."""
        inputs = min(inputs, MAX_INPUTS)
        return {
            r.shape for table in self.tables for r in table.rules_for(inputs, element_bytes, op)
        }

    def own_ops(self) -> list[str]:
        """The ops some table has lists of their own for, sorted (their index in the
        generated header's per-op lists)."""
        return sorted({op for table in self.tables for op in table.op_rules})

    def compiled(self, with_candidates: bool | None = None) -> tuple[Shape, ...]:
        """Every shape the build compiles, sorted: all the tables name (and, in a tuning
        build, every candidate)."""
        if with_candidates is None:
            with_candidates = os.environ.get("CEE_TUNING_CANDIDATES", "") == "1"
        named = {rule.shape for table in self.tables for rule in table.every_rule()}
        return tuple(sorted(named | (set(self.candidates) if with_candidates else set())))


# What a shape's row may say (a misspelt optional key, `laod`, is refused, not ignored).
ROW_KEYS = {"up-to-bytes", "access", "block", "per-thread", "load"}


def _shape(where: str, row: dict) -> Shape:
    if set(row) - ROW_KEYS:
        raise LaunchShapeError(f"{where}: unknown keys {sorted(set(row) - ROW_KEYS)} in {row}; "
                               f"known: {sorted(ROW_KEYS)}")  # fmt: skip
    try:
        access, block, per_thread = int(row["access"]), int(row["block"]), int(row["per-thread"])
    except (KeyError, TypeError, ValueError):
        raise LaunchShapeError(
            f"{where}: {row} needs access, block and per-thread (integers)"
        ) from None
    load = row.get("load", DEFAULT_LOAD)  # absent: the read-only load, as before the flavours
    if load not in LOADS:
        raise LaunchShapeError(f"{where}: load = {load!r}; one of {list(LOADS)}, or no load "
                               f"(= {DEFAULT_LOAD!r})")  # fmt: skip
    shape = Shape(access, block, per_thread, load)
    if shape.access not in ACCESS_BYTES:
        raise LaunchShapeError(f"{where}: access = {shape.access}; one of {ACCESS_BYTES}")
    # Whole warps, up to CUDA's 1024 threads. Not only powers of two: the block size also sets
    # how many threads an SM keeps resident (two 768-thread blocks: 75%), and a streaming
    # kernel can be faster with fewer.
    whole_warps = 32 <= shape.block <= 1024 and shape.block % 32 == 0
    if not whole_warps or shape.per_thread not in (1, 2, 4, 8):
        raise LaunchShapeError(
            f"{where}: block {shape.block} / per-thread {shape.per_thread}: blocks of 32..1024 "
            "threads (a multiple of 32), 1, 2, 4 or 8 accesses per thread"
        )
    return shape


def _rules(where: str, rows: list) -> tuple[Rule, ...]:
    rules, last = [], 0
    for i, row in enumerate(rows):
        limit = row.get("up-to-bytes")
        if limit is None and i != len(rows) - 1:
            raise LaunchShapeError(f"{where}: only the last shape may omit up-to-bytes")
        if limit is not None and (not isinstance(limit, int) or limit <= last):
            raise LaunchShapeError(f"{where}: up-to-bytes must increase, got {limit} after {last}")
        rules.append(Rule(limit, _shape(where, row)))
        last = limit or last
    if not rules or rules[-1].up_to_bytes is not None:
        raise LaunchShapeError(f"{where}: the last shape must have no up-to-bytes (it takes "
                               "every larger tensor)")  # fmt: skip
    return tuple(rules)


OP_PREFIX = "op-"  # an op's own lists: op-my_gelu.element-2 = [...]


def _by_element(where: str, key: str, value) -> dict[int, tuple[Rule, ...]]:
    """KEY = [...] (any element size) or KEY.element-E = [...] per element size."""
    if isinstance(value, list):
        return {ANY_ELEMENT: _rules(f"{where} {key}", value)}
    lists = {}
    for element, rows in value.items():
        e = element.removeprefix("element-")
        if not element.startswith("element-") or not e.isdigit() or int(e) not in ELEMENT_BYTES:
            raise LaunchShapeError(f"{where}: unknown key {key}.{element}; {key}.element-E "
                                   f"with E one of {ELEMENT_BYTES} (bytes)")  # fmt: skip
        lists[int(e)] = _rules(f"{where} {key}.{element}", rows)
    if not lists:
        raise LaunchShapeError(f"{where}: {key} lists nothing")
    return lists


def _table(name: str, data: dict, where: str) -> GpuTable:
    rules: dict[int, dict[int, tuple[Rule, ...]]] = {}
    op_rules: dict[str, dict[int, tuple[Rule, ...]]] = {}
    for key, value in data.items():
        if key == "measured":
            continue
        op = key.removeprefix(OP_PREFIX)
        if key.startswith(OP_PREFIX) and op.isidentifier():
            op_rules[op] = _by_element(where, key, value)
            continue
        n = key.removeprefix("inputs-")
        if not key.startswith("inputs-") or not n.isdigit() or not 1 <= int(n) <= MAX_INPUTS:
            raise LaunchShapeError(f"{where}: unknown key {key!r}; inputs-1 .. inputs-{MAX_INPUTS}"
                                   f", {OP_PREFIX}<op name> or measured")  # fmt: skip
        rules[int(n)] = _by_element(where, key, value)
    if not rules:
        raise LaunchShapeError(f"{where}: no inputs-N list")
    return GpuTable(name, str(data.get("measured", "")), rules, op_rules)


def load(path: Path = TABLE_FILE) -> LaunchShapes:
    where = "tuning/launch_shapes.toml" if path == TABLE_FILE else str(path)
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise LaunchShapeError(f"{where}: {exc}") from None
    unknown = set(data) - {"candidates", DEFAULT, "gpu"}
    if unknown or DEFAULT not in data:
        raise LaunchShapeError(
            f'{where}: needs [default] (and may have [candidates], [gpu."<name>"]); '
            f"unknown: {sorted(unknown)}"
        )
    candidates = tuple(
        _shape(f"{where} [candidates]", row) for row in data.get("candidates", {}).get("shapes", [])
    )
    tables = [_table(DEFAULT, data[DEFAULT], f"{where} [default]")]
    for gpu, table in data.get("gpu", {}).items():
        tables.append(_table(gpu, table, f'{where} [gpu."{gpu}"]'))
    return LaunchShapes(candidates, tuple(tables))


def c_tables(shapes: LaunchShapes, compiled: tuple[Shape, ...]) -> list[str]:
    """The generated header's lines: the compiled shapes and the per-GPU rule lists, each
    rule naming its shape by index into cee_vector_shapes, one list per number of inputs
    and element size, and per op with lists of its own (resolved here, so the launcher only
    indexes)."""
    index = {shape: i for i, shape in enumerate(compiled)}
    lines = [
        f"#define CEE_NUM_VECTOR_SHAPES {len(compiled)}",
        "static const cee::VectorShape cee_vector_shapes[CEE_NUM_VECTOR_SHAPES] = {",
        *(
            f"    {{.access_bytes = {s.access}, .block = {s.block}, "
            f".per_thread = {s.per_thread}, .load = {LOADS.index(s.load)}}},"
            for s in compiled
        ),
        "};",
        # VectorShape::load indexes these names (for cee_vector_shape, launch_shape_hooks.cpp).
        f"static const char* const cee_load_names[{len(LOADS)}] = {{"
        + ", ".join(map(c_string, LOADS))
        + "};",
        f"#define CEE_MAX_INPUTS {MAX_INPUTS}",
    ]
    lines += [
        f"#define CEE_NUM_ELEMENT_SIZES {len(ELEMENT_BYTES)}",
        "static const int cee_element_bytes[CEE_NUM_ELEMENT_SIZES] = {"
        + ", ".join(map(str, ELEMENT_BYTES))
        + "};",
    ]

    def rule_array(name: str, rules: tuple[Rule, ...]) -> str:
        rows = ", ".join(
            f"{{.up_to_bytes = {-1 if r.up_to_bytes is None else r.up_to_bytes}, "
            f".shape = {index[r.shape]}}}"
            for r in rules
        )
        lines.append(f"static const cee::ShapeRule {name}[] = {{{rows}}};")
        return name

    own_ops = shapes.own_ops()
    lines += [
        "// The ops with lists of their own in some table (OpInfo.own_shapes indexes these).",
        f"#define CEE_NUM_OWN_SHAPE_OPS {len(own_ops)}",
        "static const char* const cee_own_shape_ops[CEE_NUM_OWN_SHAPE_OPS + 1] = {"
        + "".join(f"{c_string(op)}, " for op in own_ops)
        + "nullptr};",
    ]
    entries = []
    for t, table in enumerate(shapes.tables):
        lists = []
        for inputs in range(1, MAX_INPUTS + 1):
            names = [
                rule_array(f"cee_shape_rules_{t}_{inputs}_{element}",
                           table.rules_for(inputs, element))
                for element in ELEMENT_BYTES
            ]  # fmt: skip
            lists.append("{" + ", ".join(names) + "}")
        # [own op * element sizes]: the op's own list in this table, or nullptr (inputs-N's).
        own = [
            rule_array(f"cee_shape_rules_{t}_op{j}_{element}", table.rules_for(1, element, op))
            if op in table.op_rules else "nullptr"
            for j, op in enumerate(own_ops)
            for element in ELEMENT_BYTES
        ]  # fmt: skip
        own_name = "nullptr"
        if own:
            own_name = f"cee_op_shape_rules_{t}"
            lines.append(f"static const cee::ShapeRule* const {own_name}[] = {{{', '.join(own)}}};")
        entries.append(
            f"    {{.gpu = {c_string(table.gpu)}, .rules = {{{', '.join(lists)}}}, "
            f".op_rules = {own_name}}},"
        )
    lines += [
        "// The first table is the default (any GPU not listed by name).",
        f"#define CEE_NUM_LAUNCH_TABLES {len(shapes.tables)}",
        "static const cee::LaunchTable cee_launch_tables[CEE_NUM_LAUNCH_TABLES] = {",
        *entries,
        "};",
    ]
    return lines
