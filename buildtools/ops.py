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

import ast
import os
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
class Scalar:
    """A scalar argument of an op: float, int or bool, with a default (schema) or an
    example value (what the tests, doctor and the harness pass when there is no default)."""

    name: str
    type: str  # "float", "int" or "bool"
    default: float | int | bool | None
    example: float | int | bool | None

    @property
    def sample(self) -> float | int | bool:
        return self.example if self.example is not None else self.default

    @property
    def schema(self) -> str:
        """`float alpha=1.0`, `int step`, `bool flag=False`: torch's schema syntax."""
        if self.default is None:
            return f"{self.type} {self.name}"
        return f"{self.type} {self.name}={self.default!r}"

    def record(self) -> dict:
        return {
            "name": self.name,
            "type": self.type,
            "default": self.default,
            "sample": self.sample,
        }


@dataclass(frozen=True)
class Op:
    name: str
    rule: str  # the struct in rule.h
    folder: str  # ops/<folder>/: the rule's C++ namespace is cee_rule_<folder>
    inputs: tuple[str, ...]  # every tensor argument, in order
    mutates: tuple[str, ...]  # the inputs the op updates in place
    numbers: tuple[str, ...]  # the inputs a Python number may stand for
    nonnegative: tuple[str, ...]  # inputs whose sample values are >= 0 (tests, doctor)
    outputs: tuple[str, ...]  # new tensors it returns (none for a purely in-place op)
    scalars: tuple[Scalar, ...]
    derived: dict[str, str]  # name -> C++ expression of the scalars, once per call
    kernel: str  # "simple" or "vectorized"
    doc: str
    reference: str  # a Python expression of the arguments: what the op equals
    derivatives: dict[str, str] | None  # input -> d(out)/d(input), a Python expression
    dtypes: tuple[str, ...]
    tolerance: dict[str, dict[str, float]] | None  # dtype -> {rtol, atol}; None: bitwise
    has_reference_module: bool = False  # ops/<folder>/reference.py

    @property
    def rule_header(self) -> str:
        return f"{self.folder}/rule.h"

    @property
    def signature(self) -> str:
        """The C++ adapter struct (buildtools/signatures.py) of the rule's folder."""
        return f"cee_rule_{self.folder}::Signature"

    def _schema_args(self) -> str:
        aliases = iter("abcdefghijklmnop")
        tensors = [
            f"Tensor({next(aliases)}!) {name}" if name in self.mutates else f"Tensor {name}"
            for name in self.inputs
        ]
        return ", ".join(tensors + [s.schema for s in self.scalars])

    @property
    def returns(self) -> str:
        if len(self.outputs) == 1:
            return "Tensor"
        return "(" + ", ".join("Tensor" for _ in self.outputs) + ")"

    @property
    def schema(self) -> str:
        return f"{self.name}({self._schema_args()}) -> {self.returns}"

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
            "folder": self.folder,
            "inputs": list(self.inputs),
            "mutates": list(self.mutates),
            "numbers": list(self.numbers),
            "nonnegative": list(self.nonnegative),
            "outputs": list(self.outputs),
            "scalars": [s.record() for s in self.scalars],
            "derived": dict(self.derived),
            "kernel": self.kernel,
            "doc": self.doc,
            "reference": self.reference,
            "derivatives": self.derivatives,
            "dtypes": list(self.dtypes),
            "tolerance": self.tolerance,
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
TOP_KEYS = {
    "rule", "inputs", "mutates", "numbers", "nonnegative", "outputs", "scalars", "derived",
    "reference", "derivatives", "dtypes", "tolerance", "op",
}  # fmt: skip
OP_KEYS = {"name", "kernel", "doc"}
SCALAR_TYPES = {"float": (int, float), "int": (int,), "bool": (bool,)}
MAX_INPUTS, MAX_OUTPUTS, MAX_SCALARS = 8, 4, 8
FLOATS = {"float16", "bfloat16", "float32", "float64"}


def _fail(path: Path, problem: str) -> None:
    """Names the declaration as ops/<rule>/ops.toml, wherever the ops folder is."""
    raise OpDeclarationError(f"{path.relative_to(path.parents[2])}: {problem}")


def _names(path: Path, data: dict, key: str, default: list, low: int, high: int) -> tuple:
    """A list of identifiers under `key`, `low` to `high` of them."""
    value = data.get(key, default)
    if not isinstance(value, list) or not all(
        isinstance(v, str) and IDENTIFIER.match(v) for v in value
    ):
        _fail(path, f'{key} = {value!r}: a list of identifiers, like {key} = ["x"]')
    if not low <= len(value) <= high or len(set(value)) != len(value):
        _fail(path, f"{key} = {value}: {low} to {high} distinct names")
    return tuple(value)


def _scalars(path: Path, table: dict, dtypes: tuple[str, ...]) -> tuple[Scalar, ...]:
    if not isinstance(table, dict) or len(table) > MAX_SCALARS:
        _fail(path, f"[scalars]: a table of at most {MAX_SCALARS} name = {{ type = ... }}")
    scalars = []
    for name, spec in table.items():
        where = f"[scalars] {name}"
        if not IDENTIFIER.match(name):
            _fail(path, f"{where}: not an identifier")
        if not isinstance(spec, dict) or spec.get("type") not in SCALAR_TYPES:
            _fail(path, f'{where}: {{ type = "float" | "int" | "bool", default = ... }}')
        if set(spec) - {"type", "default", "example"}:
            _fail(
                path, f"{where}: unknown keys {sorted(set(spec) - {'type', 'default', 'example'})}"
            )
        kind = spec["type"]
        values = {k: spec.get(k) for k in ("default", "example")}
        for key, value in values.items():
            ok = isinstance(value, SCALAR_TYPES[kind]) and (
                kind == "bool" or not isinstance(value, bool)
            )
            if value is not None and not ok:
                _fail(path, f"{where}: {key} = {value!r} is not a {kind}")
        if values["default"] is None and values["example"] is None:
            _fail(path, f"{where}: give a default, or an example value the tests can pass")
        if kind == "float" and not set(dtypes) <= FLOATS:
            _fail(
                path,
                f"{where}: a float scalar needs float dtypes only (torch refuses a "
                f"float for integer tensors); declare dtypes = {sorted(FLOATS)}",
            )
        if scalars and scalars[-1].default is not None and values["default"] is None:
            _fail(path, f"{where}: has no default but follows one that has (Python's rule)")
        scalars.append(Scalar(name, kind, values["default"], values["example"]))
    return tuple(scalars)


def _tolerance(path: Path, table, dtypes: tuple[str, ...]) -> dict | None:
    if table is None:
        return None
    if not isinstance(table, dict) or set(table) - set(dtypes):
        _fail(
            path,
            f"[tolerance]: keys are the op's dtypes {list(dtypes)}, each "
            "{ rtol = ..., atol = ... } (torch.testing.assert_close's)",
        )
    out = {}
    for dtype in dtypes:
        spec = table.get(dtype, {"rtol": 0.0, "atol": 0.0})
        if (
            not isinstance(spec, dict)
            or set(spec) != {"rtol", "atol"}
            or not all(isinstance(v, (int, float)) and v >= 0 for v in spec.values())
        ):
            _fail(path, f"[tolerance] {dtype} = {spec!r}: {{ rtol = ..., atol = ... }}, >= 0")
        out[dtype] = {"rtol": float(spec["rtol"]), "atol": float(spec["atol"])}
    return out


def _ops_of(path: Path, all_dtypes: tuple[str, ...]) -> list[Op]:
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        _fail(path, f"not valid TOML: {exc}")
    rule_header = path.parent / "rule.h"
    if not rule_header.is_file():
        _fail(path, "no rule.h next to it (the element rule the ops use)")
    if not IDENTIFIER.match(path.parent.name):
        _fail(
            path,
            f"the folder name {path.parent.name!r} must be an identifier (the rule's "
            "C++ namespace is made from it)",
        )
    for key in ("rule", "inputs", "reference", "op"):
        if key not in data:
            _fail(path, f"missing `{key}` (see docs/ADDING_AN_OP.md)")
    if set(data) - TOP_KEYS:
        _fail(path, f"unknown keys {sorted(set(data) - TOP_KEYS)}; known: {sorted(TOP_KEYS)}")
    rule = data["rule"]
    if (
        not isinstance(rule, str)
        or not IDENTIFIER.match(rule)
        or (f"struct {rule}" not in rule_header.read_text())
    ):
        _fail(path, f"rule = {rule!r}: rule.h has no `struct {rule}`")
    inputs = _names(path, data, "inputs", [], 1, MAX_INPUTS)
    mutates = _names(path, data, "mutates", [], 0, MAX_INPUTS)
    numbers = _names(path, data, "numbers", [], 0, MAX_INPUTS)
    nonnegative = _names(path, data, "nonnegative", [], 0, MAX_INPUTS)
    outputs = _names(path, data, "outputs", ["out"], 0, MAX_OUTPUTS)
    for key, names in (("mutates", mutates), ("numbers", numbers), ("nonnegative", nonnegative)):
        if set(names) - set(inputs):
            _fail(
                path, f"{key} names {sorted(set(names) - set(inputs))}, not inputs {list(inputs)}"
            )
    if set(mutates) & set(numbers):
        _fail(path, f"{sorted(set(mutates) & set(numbers))}: a number cannot be updated in place")
    if not outputs and not mutates:
        _fail(path, "outputs = []: an op with no output must update an input (mutates = [...])")
    if set(outputs) & set(inputs):
        _fail(path, f"outputs {sorted(set(outputs) & set(inputs))} are also inputs")
    dtypes = data.get("dtypes", list(all_dtypes))
    if not isinstance(dtypes, list) or not dtypes or not set(dtypes) <= set(all_dtypes):
        _fail(path, f"dtypes {dtypes!r}: a non-empty list of the core's {list(all_dtypes)}")
    dtypes = tuple(d for d in all_dtypes if d in dtypes)  # the core's order
    scalars = _scalars(path, data.get("scalars", {}), dtypes)
    if {s.name for s in scalars} & set(inputs + outputs):
        _fail(path, "a scalar has the name of a tensor argument")
    module = path.parent / "reference.py"
    helpers = _module_functions(path, module) if module.is_file() else set()
    derived = data.get("derived", {})
    if not isinstance(derived, dict) or not all(
        IDENTIFIER.match(k) and isinstance(v, str) and v.strip() for k, v in derived.items()
    ):
        _fail(
            path,
            '[derived]: name = "C++ expression of the scalars", e.g. '
            'scale = "1 / sqrt(1 - pow(beta, step))"',
        )
    if set(derived) & ({s.name for s in scalars} | set(inputs) | set(outputs)):
        _fail(path, "[derived]: a derived scalar has the name of another argument")
    if not scalars and derived:
        _fail(path, "[derived] scalars are computed from [scalars]; this op has none")
    derivatives = data.get("derivatives")
    if derivatives is not None:
        if mutates or len(outputs) != 1:
            _fail(path, "[derivatives] are for ops with one output that update nothing in place")
        if not isinstance(derivatives, dict) or set(derivatives) != set(inputs):
            got = list(derivatives) if isinstance(derivatives, dict) else derivatives
            _fail(path, f"[derivatives] must name every input {list(inputs)}, got {got}")
        derivatives = {name: _one_line(e) for name, e in derivatives.items()}
        for name, expression in derivatives.items():
            _check_expression(path, f"[derivatives] {name}", expression, inputs, scalars, helpers)
    reference = _one_line(data["reference"])
    _check_expression(path, "reference", reference, inputs, scalars, helpers)
    tolerance = _tolerance(path, data.get("tolerance"), dtypes)
    if not isinstance(data["op"], list) or not data["op"]:
        _fail(path, "no [[op]] entry: each op the rule gives is an [[op]] with a name")
    ops = []
    for entry in data["op"]:
        name, kernel = entry.get("name", ""), entry.get("kernel", "")
        if set(entry) - OP_KEYS:
            unknown = sorted(set(entry) - OP_KEYS)
            _fail(path, f"unknown keys {unknown} in [[op]] {name}; known: {sorted(OP_KEYS)}")
        if not isinstance(name, str) or not IDENTIFIER.match(name):
            _fail(path, f"op name {name!r} is not an identifier")
        if kernel not in KERNELS:
            _fail(path, f"{name}: kernel = {kernel!r}; one of {list(KERNELS)}")
        ops.append(
            Op(
                name=name,
                rule=rule,
                folder=path.parent.name,
                inputs=inputs,
                mutates=mutates,
                numbers=numbers,
                nonnegative=nonnegative,
                outputs=outputs,
                scalars=scalars,
                derived={k: _one_line(v) for k, v in derived.items()},
                kernel=kernel,
                doc=entry.get("doc", "").strip(),
                reference=reference,
                derivatives=dict(derivatives) if derivatives is not None else None,
                dtypes=dtypes,
                tolerance=tolerance,
                has_reference_module=module.is_file(),
            )
        )
    return ops


def _one_line(expression):
    """A multi-line TOML string as one line of Python (left alone if not a string)."""
    return " ".join(expression.split("\n")).strip() if isinstance(expression, str) else expression


def _module_functions(path: Path, module: Path) -> set[str]:
    """The functions a folder's reference.py defines (read, not run)."""
    try:
        tree = ast.parse(module.read_text(), str(module))
    except SyntaxError as exc:
        _fail(path, f"reference.py does not parse: line {exc.lineno}: {exc.msg}")
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}


def _check_expression(path, key, expression, inputs, scalars, helpers) -> None:
    """A Python expression of the op's arguments, `torch` and reference.py's functions: it
    must parse, name nothing else, and every torch.x.y it names must exist in this torch
    (a misspelt torch function is refused here, not when doctor runs it)."""
    if not isinstance(expression, str):
        _fail(path, f"{key} = {expression!r}: a Python expression in a string")
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as exc:
        _fail(path, f"{key} = {expression!r}: not a Python expression ({exc.msg})")
    known = {"torch", *inputs, *(s.name for s in scalars), *helpers}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id not in known:
            _fail(
                path,
                f"{key} = {expression!r}: unknown name {node.id!r}; it may use "
                f"torch, the arguments {sorted(known - {'torch'} - helpers)}"
                + (f" and reference.py's {sorted(helpers)}" if helpers else ""),
            )
        if isinstance(node, ast.Attribute) and _dotted(node, "torch"):
            _resolve_torch(path, key, _dotted(node, "torch"))


def _dotted(node: ast.AST, root: str) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name) and node.id == root:
        return ".".join([root, *reversed(parts)])
    return None


def _resolve_torch(path: Path, key: str, dotted: str) -> None:
    import importlib

    torch = importlib.import_module("torch")
    found = torch
    for i, part in enumerate(dotted.split(".")[1:], 1):
        if not hasattr(found, part):
            where = ".".join(dotted.split(".")[:i])
            _fail(
                path,
                f"{key}: {dotted} does not exist ({where} has no {part!r}) in torch "
                f"{torch.__version__}",
            )
        found = getattr(found, part)


def declared_ops(ops_dir: Path = OPS_DIR, dtypes: tuple[str, ...] | None = None) -> list[Op]:
    """Every elementwise op of ops/*/ops.toml, sorted by name; names unique (the custom
    ops, kind = "custom", are buildtools/custom_ops.py's)."""
    if dtypes is None:
        dtypes = tuple(d.name for d in elementwise().dtypes)
    from .custom_ops import is_custom  # the other kind of declaration: not elementwise

    paths = [path for path in sorted(ops_dir.glob("*/ops.toml")) if not is_custom(path)]
    ops = [op for path in paths for op in _ops_of(path, dtypes)]
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
    slot: int  # SIMPLE, STRIDED, or FIRST_VECTOR + i: vector shape i
    dtype: Dtype
    expression: str  # NVRTC's name expression


# The kernel slots of an op and dtype (csrc/elementwise_launch.h picks one per call): the
# simple kernel (contiguous, same shapes; also the vectorized ops' misaligned case), the
# strided one (broadcasting, views, Python numbers), then each vector shape.
SIMPLE, STRIDED, FIRST_VECTOR = 0, 1, 2


def instances(ops: list[Op], ew: Elementwise) -> list[Instance]:
    """Every instance, in a fixed order (the launcher's table index): per op and each of
    its dtypes, the simple and strided kernels, then each vector shape if vectorized."""
    out = []
    for op in ops:
        for dtype in ew.dtypes:
            if dtype.name not in op.dtypes:
                continue
            head = f"{op.signature}, {dtype.device_type}"
            out.append(Instance(op.name, SIMPLE, dtype, f"cee::elementwise_simple<{head}>"))
            out.append(Instance(op.name, STRIDED, dtype, f"cee::elementwise_strided<{head}>"))
            if op.kernel != "vectorized":
                continue
            # Only the shapes a table can pick for this op (a tuning build: every one).
            tuning = os.environ.get("CEE_TUNING_CANDIDATES", "") == "1"
            used = ew.launch_shapes.used_for(len(op.inputs), dtype.size, op.name)
            for i, s in enumerate(ew.vector_shapes):
                if s not in used and not tuning:
                    continue
                expression = (
                    f"cee::elementwise_vectorized<{head}, {s.access}, {s.block}, "
                    f"{s.per_thread}, {LOAD_CONSTANTS[s.load]}>"
                )
                out.append(Instance(op.name, FIRST_VECTOR + i, dtype, expression))
    return out
