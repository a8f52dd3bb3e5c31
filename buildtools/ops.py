"""The ops, as declared in ops/<rule>/ops.toml, and the kernel instances they need.

A kernel author writes, per element rule, a folder under ops/:
- rule.h: the rule, a struct with `template <typename C> static C apply(C a, ...)`, run on
  the host (CPU kernel) and on the GPU (NVRTC) alike, in cee::Compute<T> arithmetic;
- ops.toml: the ops that use it (name, inputs, kernel, doc), the torch function they equal
  bit for bit, and the partial derivatives (autograd, torch.func) as Python expressions.
Everything else (device code, launcher table, registration, Meta kernels, Python wrappers,
autograd, vmap, jvp, doctor's and the smoke test's checks, the harness, the tests'
parametrization) is generated from these declarations by the core.

The dtypes are the core's, declared in pyproject.toml [tool.cuda_ext_example.elementwise];
the launch shapes are measured per GPU (tuning/launch_shapes.toml, buildtools/launch_shapes.py).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

from . import config, launch_shapes

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 builds
    import tomli as tomllib

OPS_DIR = config.ROOT / "ops"
KERNELS = ("simple", "vectorized")
# A launch shape's load flavour (launch_shapes.LOADS) as the vectorized kernel's template
# argument names it (csrc/elementwise_kernels.cuh).
LOAD_CONSTANTS = {"default": "cee::kLoadReadOnly", "evict-first": "cee::kLoadEvictFirst"}
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class OpDeclarationError(config.ConfigError):
    """A declaration the build cannot use; the message names the file and the fix."""


@dataclass(frozen=True)
class Dtype:
    name: str  # torch's Python name: torch.<name>
    device_type: str  # the type NVRTC's code uses
    size: int
    scalar_type: str  # torch's C++ ScalarType


# Every dtype an elementwise op can take, as torch, NVRTC and the host code name it.
DTYPES = {
    d.name: d
    for d in (
        Dtype("float16", "__half", 2, "Half"),
        Dtype("bfloat16", "__nv_bfloat16", 2, "BFloat16"),
        Dtype("float32", "float", 4, "Float"),
        Dtype("float64", "double", 8, "Double"),
        Dtype("int8", "signed char", 1, "Char"),
        Dtype("int16", "short", 2, "Short"),
        Dtype("int32", "int", 4, "Int"),
        Dtype("int64", "long long", 8, "Long"),
        Dtype("uint8", "unsigned char", 1, "Byte"),
    )
}


@dataclass(frozen=True)
class Elementwise:
    """The core's dtypes and simple-kernel block (pyproject.toml [tool.cuda_ext_example.
    elementwise]), and every vectorized shape the build compiles (tuning/launch_shapes.toml)."""

    dtypes: tuple[Dtype, ...]
    simple_block: int
    launch_shapes: launch_shapes.LaunchShapes  # read once, with the dtypes

    @property
    def vector_shapes(self) -> tuple[launch_shapes.Shape, ...]:
        return self.launch_shapes.compiled()


@dataclass(frozen=True)
class Op:
    name: str
    rule: str  # the struct in rule.h, in namespace cee_ops
    rule_header: str  # "add/rule.h", relative to ops/
    inputs: tuple[str, ...]
    kernel: str  # "simple" or "vectorized"
    doc: str
    reference: str  # "torch.add": the function the op equals bit for bit
    derivatives: dict[str, str] | None  # input -> d(out)/d(input), a Python expression
    dtypes: tuple[str, ...]

    @property
    def schema(self) -> str:
        args = ", ".join(f"Tensor {name}" for name in self.inputs)
        return f"{self.name}({args}) -> Tensor"

    @property
    def no_grad_twin(self) -> str:
        """The op's twin: the same kernels under a second name with no autograd kernel,
        which the Python wrapper calls when no graph is built (one dispatcher pass with no
        Python autograd kernel and no dispatch-key exclusion around it: the cheapest call).
        Private: called with inputs that need grad it builds no graph."""
        return f"_{self.name}_no_grad"

    @property
    def no_grad_twin_schema(self) -> str:
        return self.no_grad_twin + self.schema[len(self.name) :]

    def record(self) -> dict:
        """What the build record says of the op (the Python side is built from it)."""
        return {
            "name": self.name,
            "inputs": list(self.inputs),
            "kernel": self.kernel,
            "doc": self.doc,
            "reference": self.reference,
            "derivatives": self.derivatives,
            "dtypes": list(self.dtypes),
            "no_grad_twin": self.no_grad_twin,
        }


def elementwise(pyproject: Path = config.ROOT / "pyproject.toml") -> Elementwise:
    table = tomllib.loads(pyproject.read_text())["tool"]["cuda_ext_example"]["elementwise"]
    unknown = [d for d in table["dtypes"] if d not in DTYPES]
    if unknown:
        raise OpDeclarationError(
            f"pyproject.toml elementwise dtypes: {unknown} unknown; known: {sorted(DTYPES)}"
        )
    dtypes = tuple(DTYPES[d] for d in table["dtypes"])
    return Elementwise(dtypes, table["simple-block"], launch_shapes.load())


# What a declaration may say (a misspelt or misplaced key is refused, not ignored).
TOP_KEYS = {"rule", "inputs", "reference", "derivatives", "dtypes", "op"}
OP_KEYS = {"name", "kernel", "doc"}


def _fail(path: Path, problem: str) -> None:
    """Names the declaration as ops/<rule>/ops.toml, wherever the ops folder is."""
    raise OpDeclarationError(f"{path.relative_to(path.parents[2])}: {problem}")


def _ops_of(path: Path, all_dtypes: tuple[str, ...]) -> list[Op]:
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        _fail(path, f"not valid TOML: {exc}")
    rule_header = path.parent / "rule.h"
    if not rule_header.is_file():
        _fail(path, "no rule.h next to it (the element rule the ops use)")
    for key in ("rule", "inputs", "reference", "op"):
        if key not in data:
            _fail(path, f"missing `{key}` (see docs/ADDING_AN_OP.md)")
    if set(data) - TOP_KEYS:
        _fail(path, f"unknown keys {sorted(set(data) - TOP_KEYS)}; known: {sorted(TOP_KEYS)}")
    rule, inputs = data["rule"], tuple(data["inputs"])
    if not IDENTIFIER.match(rule) or f"struct {rule}" not in rule_header.read_text():
        _fail(path, f"rule = {rule!r}: rule.h has no `struct {rule}`")
    if not 1 <= len(inputs) <= 3 or not all(IDENTIFIER.match(i) for i in inputs):
        _fail(path, f"inputs = {list(inputs)}: one to three identifiers")
    derivatives = data.get("derivatives")
    if derivatives is not None and set(derivatives) != set(inputs):
        _fail(path, f"[derivatives] must name every input {list(inputs)}, got {list(derivatives)}")
    dtypes = tuple(data.get("dtypes", all_dtypes))
    if not set(dtypes) <= set(all_dtypes):
        _fail(path, f"dtypes {sorted(set(dtypes) - set(all_dtypes))} are not the core's")
    ops = []
    for entry in data["op"]:
        name, kernel = entry.get("name", ""), entry.get("kernel", "")
        if set(entry) - OP_KEYS:
            unknown = sorted(set(entry) - OP_KEYS)
            _fail(path, f"unknown keys {unknown} in [[op]] {name}; known: {sorted(OP_KEYS)}")
        if not IDENTIFIER.match(name):
            _fail(path, f"op name {name!r} is not an identifier")
        if kernel not in KERNELS:
            _fail(path, f"{name}: kernel = {kernel!r}; one of {list(KERNELS)}")
        ops.append(
            Op(
                name=name,
                rule=rule,
                rule_header=f"{path.parent.name}/rule.h",
                inputs=inputs,
                kernel=kernel,
                doc=entry.get("doc", "").strip(),
                reference=data["reference"],
                derivatives=dict(derivatives) if derivatives is not None else None,
                dtypes=dtypes,
            )
        )
    return ops


def declared_ops(ops_dir: Path = OPS_DIR, dtypes: tuple[str, ...] | None = None) -> list[Op]:
    """Every op of ops/*/ops.toml, sorted by name; names unique."""
    if dtypes is None:
        dtypes = tuple(d.name for d in elementwise().dtypes)
    ops = [op for path in sorted(ops_dir.glob("*/ops.toml")) for op in _ops_of(path, dtypes)]
    names = [op.name for op in ops]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise OpDeclarationError(f"ops/*/ops.toml: {duplicated} declared more than once")
    if not ops:
        raise OpDeclarationError(f"no op declared in {ops_dir}/*/ops.toml")
    return sorted(ops, key=lambda op: op.name)


# ------------------------------------------------------------------ instances


@dataclass(frozen=True)
class Instance:
    """One template instance of a kernel: what NVRTC compiles and the launcher loads."""

    op: str
    slot: int  # 0: the simple kernel; 1 + i: vector shape i
    dtype: Dtype
    expression: str  # NVRTC's name expression


def instances(ops: list[Op], ew: Elementwise) -> list[Instance]:
    """Every instance, in a fixed order (the launcher's table index): per op, the simple
    kernel (which vectorized ops also take for misaligned pointers), then each vector
    shape, for each of the op's dtypes."""
    out = []
    for op in ops:
        n = len(op.inputs)
        for dtype in ew.dtypes:
            if dtype.name not in op.dtypes:
                continue
            t = dtype.device_type
            out.append(
                Instance(
                    op.name, 0, dtype, f"cee::elementwise_simple<cee_ops::{op.rule}, {t}, {n}>"
                )
            )
            if op.kernel != "vectorized":
                continue
            for i, s in enumerate(ew.vector_shapes):
                expression = (
                    f"cee::elementwise_vectorized<cee_ops::{op.rule}, {t}, {n}, "
                    f"{s.access}, {s.block}, {s.per_thread}, {LOAD_CONSTANTS[s.load]}>"
                )
                out.append(Instance(op.name, 1 + i, dtype, expression))
    return out
