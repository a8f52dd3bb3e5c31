"""The ops, as declared in ops/<folder>/ops.toml: read once into `Declarations`, which the
whole build passes down (device code, generated C, the build record).

Every op is one kind of declaration: its name, tensor inputs (some updated in place, some
that a Python number may stand for), scalars, outputs, dtypes, reference and tolerance,
samples, scalar checks, and how it differentiates. What differs is who writes its
host function and kernels:
- an op with a `rule` (an element rule, ops/<folder>/rule.h): the core's elementwise host
  function and kernels run it, and the backward comes from its [derivatives];
- an op with a `function` (ops/<folder>/host.h) and `kernels` (templates of
  ops/<folder>/kernels.cuh): its own host function and kernels; its backward is an
  expression that may call other ops.
A key written at the top of the file is every [[op]]'s, unless the [[op]] says otherwise.
"""

from __future__ import annotations

import ast
import itertools
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from . import config, launch_shapes

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 builds
    import tomli as tomllib

OPS_DIR = config.ROOT / "ops"
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
KERNELS = ("simple", "vectorized")  # the core's elementwise kernels
SCALAR_TYPES = {"float": (int, float), "int": (int,), "bool": (bool,)}
MAX_INPUTS, MAX_OUTPUTS, MAX_SCALARS, MAX_TEMPLATE_VALUES = 8, 4, 8, 4
FLOATS = ("float16", "bfloat16", "float32", "float64")

# The keys of a declaration: those of every op, then those of each way of writing one.
COMMON_KEYS = {
    "inputs", "mutates", "numbers", "outputs", "scalars", "dtypes", "reference",
    "tolerance", "samples", "checks", "doc", "name",
}  # fmt: skip
RULE_KEYS = {"rule", "kernel", "derived", "derivatives"}
FUNCTION_KEYS = {"function", "kernels", "backward"}
ALL_KEYS = COMMON_KEYS | RULE_KEYS | FUNCTION_KEYS | {"op"}


class OpDeclarationError(config.ConfigError):
    """A declaration the build cannot use; the message names the file and the fix."""


@dataclass(frozen=True)
class Dtype:
    name: str  # torch's Python name: torch.<name>
    device_type: str  # the type NVRTC's code uses
    size: int
    scalar_type: str  # torch's C++ ScalarType


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
class Argument:
    """A tensor input or a scalar of an op, in schema order (tensors first)."""

    name: str
    type: str  # "Tensor", "float", "int" or "bool"
    default: float | int | bool | None = None
    example: float | int | bool | None = None  # what checks pass where there is no default
    mutable: bool = False  # a tensor the op updates in place
    number: bool = False  # a tensor a Python number may stand for

    @property
    def sample(self):
        return self.example if self.example is not None else self.default

    def schema(self, alias: str) -> str:
        if self.type == "Tensor":
            return f"Tensor({alias}!) {self.name}" if self.mutable else f"Tensor {self.name}"
        default = "" if self.default is None else f"={self.default!r}"
        return f"{self.type} {self.name}{default}"

    def record(self) -> dict:
        return {
            "name": self.name,
            "type": self.type,
            "default": self.default,
            "sample": self.sample,
            "mutable": self.mutable,
            "number": self.number,
        }


@dataclass(frozen=True)
class KernelTemplate:
    """A template of kernels.cuh and the values of its parameters after the dtype: every
    combination is compiled for every dtype of the op, or those for which `when` (a Python
    expression of `dtype` and the parameters) holds."""

    name: str
    values: tuple[tuple[str, tuple[int | bool, ...]], ...]
    when: str | None = None

    def combinations(self, dtype: str) -> list[tuple[int | bool, ...]]:
        every = itertools.product(*(v for _, v in self.values))
        if self.when is None:
            return list(every)
        names = [name for name, _ in self.values]
        code = compile(self.when, f"kernels.{self.name}.when", "eval")
        return [
            values
            for values in every
            if eval(code, {"__builtins__": {}}, {"dtype": dtype, **dict(zip(names, values))})  # noqa: S307,B905
        ]


@dataclass(frozen=True)
class Op:
    name: str
    folder: str
    doc: str
    arguments: tuple[Argument, ...]
    outputs: tuple[str, ...]
    dtypes: tuple[str, ...]
    reference: str  # a Python expression of the arguments: what the op equals
    tolerance: dict[str, dict[str, float]] | None  # dtype -> {rtol, atol}; None: bitwise
    samples: dict[str, str]  # tensor input -> Python expression of dtype and n
    checks: tuple[str, ...]  # C++ conditions on the scalars, checked on every call
    backward: str | None  # a Python expression: one gradient per tensor input
    jvp: str | None  # a Python expression: the output's tangent (from [derivatives])
    # How its host function and kernels come about: a rule the core runs...
    rule: str | None = None
    kernel: str | None = None  # "simple" or "vectorized"
    derived: dict[str, str] = field(default_factory=dict)
    # ... or its own host function and kernel templates.
    function: str | None = None
    kernels: tuple[KernelTemplate, ...] = ()
    has_reference_module: bool = False

    @property
    def elementwise(self) -> bool:
        return self.rule is not None

    @property
    def tensors(self) -> tuple[Argument, ...]:
        return tuple(a for a in self.arguments if a.type == "Tensor")

    @property
    def scalars(self) -> tuple[Argument, ...]:
        return tuple(a for a in self.arguments if a.type != "Tensor")

    @property
    def inputs(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.tensors)

    @property
    def mutates(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.tensors if a.mutable)

    @property
    def schema(self) -> str:
        aliases = iter("abcdefghijklmnop")
        args = ", ".join(a.schema(next(aliases)) for a in self.arguments)
        returns = (
            "Tensor" if len(self.outputs) == 1 else f"({', '.join(['Tensor'] * len(self.outputs))})"
        )
        return f"{self.name}({args}) -> {returns}"

    @property
    def no_grad_twin(self) -> str:
        """The op's twin: its kernels under a second name with no autograd kernel, which the
        Python function calls when no graph is built and no trace or mode watches: a
        dispatcher pass with no Python autograd kernel and no dispatch-key exclusion around
        it, the cheapest call (a microsecond less than the exclusion, measured on the CPU)."""
        return f"_{self.name}_no_grad"

    @property
    def signature(self) -> str:
        """The C++ adapter of an elementwise op's rule (buildtools/signatures.py)."""
        return f"cee_rule_{self.folder}::Signature"

    def instances(self) -> list[tuple[KernelTemplate, str, tuple]]:
        """(template, dtype, values) of each of its own kernel instances."""
        return [
            (t, dtype, values)
            for t in self.kernels
            for dtype in self.dtypes
            for values in t.combinations(dtype)
        ]

    def expression(self, template: KernelTemplate, dtype: str, values: tuple) -> str:
        """NVRTC's name expression of one of its own kernel instances."""
        args = [DTYPES[dtype].device_type] + [
            ("true" if v else "false") if isinstance(v, bool) else str(v) for v in values
        ]
        return f"cee_rule_{self.folder}::{template.name}<{', '.join(args)}>"

    def record(self) -> dict:
        """What the build record says of the op: the Python side is made from it."""
        return {
            "name": self.name,
            "folder": self.folder,
            "schema": self.schema,
            "arguments": [a.record() for a in self.arguments],
            "outputs": list(self.outputs),
            "dtypes": list(self.dtypes),
            "reference": self.reference,
            "tolerance": self.tolerance,
            "samples": dict(self.samples),
            "backward": self.backward,
            "jvp": self.jvp,
            "broadcasts": self.elementwise,
            "no_grad_twin": self.no_grad_twin,
            # The core's elementwise kernel ("simple", "vectorized"), or None: its own.
            "kernel": self.kernel,
            "checks": list(self.checks),
            "doc": self.doc,
        }


@dataclass(frozen=True)
class Declarations:
    """Every op of ops/*/ops.toml (sorted by name), the core's dtypes and the launch shapes."""

    ops: tuple[Op, ...]
    dtypes: tuple[Dtype, ...]
    simple_block: int
    launch_shapes: launch_shapes.LaunchShapes
    ops_dir: Path = OPS_DIR  # where the ops' files are: the NVRTC and host include folder

    @property
    def vector_shapes(self) -> tuple[launch_shapes.Shape, ...]:
        return self.launch_shapes.compiled()

    def dtype_index(self, name: str) -> int:
        return [d.name for d in self.dtypes].index(name)

    def dtype_mask(self, op: Op) -> int:
        return sum(1 << i for i, d in enumerate(self.dtypes) if d.name in op.dtypes)

    @property
    def libraries(self) -> list[str]:
        """The device-code libraries in the launcher's order: one per op and dtype."""
        return [library_name(op.name, d) for op in self.ops for d in op.dtypes]


def library_name(op: str, dtype: str) -> str:
    """A device-code library's name, also its fatbin's symbol cee_fatbin_<name>."""
    return f"{op}_{dtype}"


# --------------------------------------------------------------------------- reading


def load(ops_dir: Path = OPS_DIR, pyproject: Path = config.ROOT / "pyproject.toml") -> Declarations:
    """Every declaration, checked: a bad one raises OpDeclarationError naming its file."""
    table = tomllib.loads(pyproject.read_text())["tool"]["cuda_ext_example"]["elementwise"]
    unknown = [d for d in table["dtypes"] if d not in DTYPES]
    if unknown:
        raise OpDeclarationError(
            f"pyproject.toml elementwise dtypes: {unknown} unknown; known: {sorted(DTYPES)}"
        )
    dtypes = tuple(DTYPES[d] for d in table["dtypes"])
    core = tuple(d.name for d in dtypes)
    ops = [op for path in sorted(ops_dir.glob("*/ops.toml")) for op in _ops_of(path, core)]
    names = [op.name for op in ops]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise OpDeclarationError(f"ops/*/ops.toml: {duplicated} declared more than once")
    if not ops:
        raise OpDeclarationError(f"no op declared in {ops_dir}/*/ops.toml")
    ops.sort(key=lambda op: op.name)
    _check_backward_calls(ops, ops_dir)
    return Declarations(
        tuple(ops), dtypes, table["simple-block"], launch_shapes.load(), Path(ops_dir)
    )


def _fail(path: Path, problem: str):
    """Names the declaration as ops/<folder>/ops.toml, wherever the ops folder is."""
    raise OpDeclarationError(f"{path.relative_to(path.parents[2])}: {problem}")


def _ops_of(path: Path, core_dtypes: tuple[str, ...]) -> list[Op]:
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        _fail(path, f"not valid TOML: {exc}")
    folder = path.parent.name
    if not IDENTIFIER.match(folder):
        _fail(path, f"the folder name {folder!r} must be an identifier (its C++ namespace)")
    if set(data) - ALL_KEYS:
        _fail(path, f"unknown keys {sorted(set(data) - ALL_KEYS)}; known: {sorted(ALL_KEYS)}")
    entries = data.get("op")
    if not isinstance(entries, list) or not entries:
        _fail(path, "no [[op]] entry: each op is an [[op]] with a name")
    shared = {k: v for k, v in data.items() if k != "op"}
    module = path.parent / "reference.py"
    helpers = _module_functions(path, module) if module.is_file() else set()
    ops = []
    for entry in entries:
        unknown = set(entry) - (ALL_KEYS - {"op"})
        if unknown:
            _fail(path, f"[[op]] {entry.get('name')}: unknown keys {sorted(unknown)}")
        merged = {**shared, **entry}
        ops.append(_op(path, folder, merged, core_dtypes, helpers, module.is_file()))
    return ops


def _op(path, folder, data, core_dtypes, helpers, has_module) -> Op:
    name = data.get("name", "")
    if not isinstance(name, str) or not IDENTIFIER.match(name):
        _fail(path, f"op name {name!r} is not an identifier")
    where = f"[[op]] {name}"
    own = bool(set(data) & FUNCTION_KEYS)
    if own == ("rule" in data):
        _fail(
            path,
            f"{where}: give either `rule` (an element rule in rule.h, docs/ADDING_AN_OP.md) or "
            "`function` and `kernels` (its own host.h and kernels.cuh, docs/ADDING_A_KERNEL.md)",
        )
    if own and set(data) & RULE_KEYS - {"derivatives"}:
        _fail(path, f"{where}: {sorted(set(data) & RULE_KEYS)} are for ops with a `rule`")
    for key in ("inputs", "reference"):
        if key not in data:
            _fail(path, f"{where}: missing `{key}`")
    dtypes = data.get("dtypes", list(core_dtypes))
    if not isinstance(dtypes, list) or not dtypes or not set(dtypes) <= set(core_dtypes):
        _fail(
            path, f"{where}: dtypes {dtypes!r}: a non-empty list of the core's {list(core_dtypes)}"
        )
    dtypes = tuple(d for d in core_dtypes if d in dtypes)  # the core's order
    arguments = _arguments(path, where, data, dtypes)
    outputs = _names(path, where, data, "outputs", ["out"], 0, MAX_OUTPUTS)
    mutates = [a.name for a in arguments if a.mutable]
    if not outputs and not mutates:
        _fail(path, f"{where}: outputs = []: an op with no output must update an input (mutates)")
    if set(outputs) & {a.name for a in arguments}:
        _fail(
            path,
            f"{where}: outputs {sorted(set(outputs) & {a.name for a in arguments})} "
            "are also arguments",
        )
    names = [a.name for a in arguments]
    reference = _one_line(data["reference"])
    _check_expression(path, f"{where} reference", reference, names, helpers)
    samples = _samples(path, where, data.get("samples", {}), arguments, own)
    checks = _checks(path, where, data.get("checks", []), arguments)
    backward, jvp = _differentiation(path, where, data, arguments, outputs, helpers)
    op = Op(
        name=name,
        folder=folder,
        doc=str(data.get("doc", "")).strip(),
        arguments=arguments,
        outputs=outputs,
        dtypes=dtypes,
        reference=reference,
        tolerance=_tolerance(path, where, data.get("tolerance"), dtypes),
        samples=samples,
        checks=checks,
        backward=backward,
        jvp=jvp,
        has_reference_module=has_module,
    )
    if own:
        return _with_own_code(path, where, op, data)
    return _with_rule(path, where, op, data)


def _names(path, where, data, key, default, low, high) -> tuple[str, ...]:
    """A list of identifiers under `key`, `low` to `high` of them."""
    value = data.get(key, default)
    if not isinstance(value, list) or not all(
        isinstance(v, str) and IDENTIFIER.match(v) for v in value
    ):
        _fail(path, f'{where}: {key} = {value!r}: a list of identifiers, like {key} = ["x"]')
    if not low <= len(value) <= high or len(set(value)) != len(value):
        _fail(path, f"{where}: {key} = {value}: {low} to {high} distinct names")
    return tuple(value)


def _arguments(path, where, data, dtypes) -> tuple[Argument, ...]:
    inputs = _names(path, where, data, "inputs", [], 1, MAX_INPUTS)
    mutates = _names(path, where, data, "mutates", [], 0, MAX_INPUTS)
    numbers = _names(path, where, data, "numbers", [], 0, MAX_INPUTS)
    for key, names in (("mutates", mutates), ("numbers", numbers)):
        if set(names) - set(inputs):
            _fail(
                path,
                f"{where}: {key} names {sorted(set(names) - set(inputs))}, "
                f"not inputs {list(inputs)}",
            )
    if set(mutates) & set(numbers):
        _fail(
            path,
            f"{where}: {sorted(set(mutates) & set(numbers))}: a number cannot be updated in place",
        )
    tensors = [Argument(n, "Tensor", mutable=n in mutates, number=n in numbers) for n in inputs]
    return tuple(tensors) + _scalars(path, where, data.get("scalars", {}), dtypes, set(inputs))


def _scalars(path, where, table, dtypes, taken) -> tuple[Argument, ...]:
    if not isinstance(table, dict) or len(table) > MAX_SCALARS:
        _fail(path, f"{where}: [scalars]: a table of at most {MAX_SCALARS} name = {{ type = ... }}")
    scalars: list[Argument] = []
    for name, spec in table.items():
        at = f"{where}: [scalars] {name}"
        if not IDENTIFIER.match(name) or name in taken:
            _fail(path, f"{at}: not an identifier, or the name of a tensor input")
        if not isinstance(spec, dict) or spec.get("type") not in SCALAR_TYPES:
            _fail(path, f'{at}: {{ type = "float" | "int" | "bool", default = ... }}')
        if set(spec) - {"type", "default", "example"}:
            _fail(path, f"{at}: unknown keys {sorted(set(spec) - {'type', 'default', 'example'})}")
        kind = spec["type"]
        values = {k: spec.get(k) for k in ("default", "example")}
        for key, value in values.items():
            ok = isinstance(value, SCALAR_TYPES[kind]) and (
                kind == "bool" or not isinstance(value, bool)
            )
            if value is not None and not ok:
                _fail(path, f"{at}: {key} = {value!r} is not a {kind}")
        if values["default"] is None and values["example"] is None:
            _fail(path, f"{at}: give a default, or an example value the checks can pass")
        if kind == "float" and not set(dtypes) <= set(FLOATS):
            _fail(
                path,
                f"{at}: a float scalar needs float dtypes only (torch refuses a float for "
                f"integer tensors); declare dtypes = {list(FLOATS)}",
            )
        if scalars and scalars[-1].default is not None and values["default"] is None:
            _fail(path, f"{at}: has no default but follows one that has (Python's rule)")
        default = (
            float(values["default"])
            if kind == "float" and values["default"] is not None
            else values["default"]
        )
        scalars.append(Argument(name, kind, default, values["example"]))
    return tuple(scalars)


def _samples(path, where, table, arguments, own) -> dict[str, str]:
    """Tensor input -> a Python expression of `dtype` and the size `n`; an op with its own
    kernels gives one per tensor, an elementwise op where the core's default (normal, spread
    over +-100) would miss a branch of its rule."""
    tensors = [a.name for a in arguments if a.type == "Tensor"]
    if not isinstance(table, dict) or set(table) - set(tensors):
        _fail(
            path,
            f'{where}: samples: {{ <tensor input> = "Python expression of dtype and n" }} '
            f"for {tensors}",
        )
    if own and set(tensors) - set(table):
        _fail(
            path,
            f"{where}: samples: give one for each of {sorted(set(tensors) - set(table))} "
            "(the checks run the op on them)",
        )
    out = {}
    for key, expression in table.items():
        expression = _one_line(expression)
        _check_expression(path, f"{where} samples.{key}", expression, ["dtype", "n"], set())
        out[key] = expression
    return out


def _checks(path, where, checks, arguments) -> tuple[str, ...]:
    """Conditions on the scalars, in C++ (comparisons, arithmetic, &&, ||, !), checked on
    every call, fake and empty ones too; read here as the Python they also are."""
    scalars = [a.name for a in arguments if a.type != "Tensor"]
    if not isinstance(checks, list) or not all(isinstance(c, str) for c in checks):
        _fail(path, f'{where}: checks = ["min_val <= max_val"]: a list of conditions')
    for check in checks:
        if re.search(r"\b(and|or|not)\b", check):
            _fail(path, f"{where}: checks {check!r}: write &&, ||, ! (C++)")
        python = re.sub(r"!(?!=)", " not ", check.replace("&&", " and ").replace("||", " or "))
        python = python.strip()
        _check_expression(path, f"{where} checks {check!r}", python, scalars, set(),
                          torch_allowed=False)  # fmt: skip
    return tuple(checks)


def _differentiation(path, where, data, arguments, outputs, helpers):
    """(backward, jvp) expressions: an op's own `backward`, or both from its [derivatives]
    (d(out)/d(input) per tensor input, each a Python expression of the arguments)."""
    derivatives, backward = data.get("derivatives"), data.get("backward")
    tensors = [a.name for a in arguments if a.type == "Tensor"]
    names = [a.name for a in arguments]
    if derivatives is not None and backward is not None:
        _fail(path, f"{where}: give [derivatives] or backward, not both")
    if backward is not None:
        backward = _one_line(backward)
        grads = ["grad"] if len(outputs) == 1 else [f"grad{j}" for j in range(len(outputs))]
        results = ["out"] if len(outputs) == 1 else [f"out{j}" for j in range(len(outputs))]
        # Other ops are checked once every declaration is read (_check_backward_calls).
        _check_expression(path, f"{where} backward", backward, names + grads + results, helpers,
                          other_names=True)  # fmt: skip
        return backward, None
    if derivatives is None:
        return None, None
    if any(a.mutable for a in arguments) or len(outputs) != 1:
        _fail(
            path, f"{where}: [derivatives] are for ops with one output that update nothing in place"
        )
    if not isinstance(derivatives, dict) or set(derivatives) != set(tensors):
        got = list(derivatives) if isinstance(derivatives, dict) else derivatives
        _fail(path, f"{where}: [derivatives] must name every tensor input {tensors}, got {got}")
    partials = {k: _one_line(v) for k, v in derivatives.items()}
    for key, expression in partials.items():
        _check_expression(path, f"{where} [derivatives] {key}", expression, names, helpers)
    # grad * d(out)/d(input), summed back to the input's shape where it was broadcast.
    grads = [
        f"(unbroadcast({_times('grad', partials[t])}, {t}) if needs_grad[{k}] else None)"
        for k, t in enumerate(tensors)
    ]
    tangents = [_times(f"tangent_{t}", partials[t]) for t in tensors]
    backward = f"({', '.join(grads)},)"
    jvp = "tangent_sum(" + ", ".join(
        f"None if tangent_{t} is None else {term}"
        for t, term in zip(tensors, tangents, strict=True)
    ) + ")"  # fmt: skip
    return backward, jvp


def _times(value: str, partial: str) -> str:
    return value if partial.strip() == "1" else f"{value} * ({partial})"


def _tolerance(path, where, table, dtypes) -> dict | None:
    if table is None:
        return None
    if not isinstance(table, dict) or set(table) - set(dtypes):
        _fail(
            path,
            f"{where}: [tolerance]: keys are the op's dtypes {list(dtypes)}, "
            "each { rtol = ..., atol = ... }",
        )
    out = {}
    for dtype in dtypes:
        spec = table.get(dtype, {"rtol": 0.0, "atol": 0.0})
        if (
            not isinstance(spec, dict)
            or set(spec) != {"rtol", "atol"}
            or not all(isinstance(v, (int, float)) and v >= 0 for v in spec.values())
        ):
            _fail(
                path, f"{where}: [tolerance] {dtype} = {spec!r}: {{ rtol = ..., atol = ... }}, >= 0"
            )
        out[dtype] = {"rtol": float(spec["rtol"]), "atol": float(spec["atol"])}
    return out


def _with_rule(path, where, op: Op, data) -> Op:
    """An elementwise op: its rule in rule.h, its kernel, its derived scalars."""
    rule_header = path.parent / "rule.h"
    if not rule_header.is_file():
        _fail(path, f"{where}: no rule.h next to it (the element rule the op runs)")
    rule = data["rule"]
    if (
        not isinstance(rule, str)
        or not IDENTIFIER.match(rule)
        or f"struct {rule}" not in rule_header.read_text()
    ):
        _fail(path, f"{where}: rule = {rule!r}: rule.h has no `struct {rule}`")
    kernel = data.get("kernel", "")
    if kernel not in KERNELS:
        _fail(path, f"{where}: kernel = {kernel!r}; one of {list(KERNELS)}")
    derived = data.get("derived", {})
    if not isinstance(derived, dict) or not all(
        IDENTIFIER.match(k) and isinstance(v, str) and v.strip() for k, v in derived.items()
    ):
        _fail(
            path,
            f'{where}: [derived]: name = "C++ expression of the scalars", '
            'e.g. scale = "1 / sqrt(1 - pow(beta, step))"',
        )
    if set(derived) & {a.name for a in op.arguments} | set(derived) & set(op.outputs):
        _fail(path, f"{where}: [derived]: a derived scalar has the name of another argument")
    if not op.scalars and derived:
        _fail(path, f"{where}: [derived] scalars are computed from [scalars]; this op has none")
    return _replace(
        op, rule=rule, kernel=kernel, derived={k: _one_line(v) for k, v in derived.items()}
    )


def _with_own_code(path, where, op: Op, data) -> Op:
    """An op with its own host function (host.h) and kernel templates (kernels.cuh)."""
    for file in ("kernels.cuh", "host.h"):
        if not (path.parent / file).is_file():
            _fail(path, f"{where}: `function` needs {file} next to it (docs/ADDING_A_KERNEL.md)")
    for key in ("function", "kernels"):
        if key not in data:
            _fail(path, f"{where}: missing `{key}` (docs/ADDING_A_KERNEL.md)")
    function = data["function"]
    host = (path.parent / "host.h").read_text()
    if not isinstance(function, str) or not re.search(rf"\b{function}\s*\(", host):
        _fail(path, f"{where}: function = {function!r}: host.h defines no such function")
    return _replace(
        op, function=function, kernels=_kernels(path, where, data["kernels"], op.dtypes)
    )


def _replace(op: Op, **changes) -> Op:
    from dataclasses import replace

    return replace(op, **changes)


def _kernels(path, where, table, dtypes) -> tuple[KernelTemplate, ...]:
    example = "kernels = { my_kernel = { per_thread = [1, 2, 4] } }"
    if not isinstance(table, dict) or not table:
        _fail(path, f"{where}: kernels: each template of kernels.cuh, e.g. {example}")
    source = (path.parent / "kernels.cuh").read_text().replace(" (", "(")
    templates = []
    for template, values in table.items():
        values = dict(values) if isinstance(values, dict) else values
        when = values.pop("when", None) if isinstance(values, dict) else None
        ok = IDENTIFIER.match(template) and isinstance(values, dict)
        ok = (
            ok
            and len(values) <= MAX_TEMPLATE_VALUES
            and all(
                IDENTIFIER.match(k)
                and isinstance(v, list)
                and v
                and all(isinstance(x, int) for x in v)
                for k, v in values.items()
            )
        )
        if not ok:
            _fail(
                path,
                f"{where}: kernels.{template} = {values!r}: the values of its template "
                f"parameters after the dtype, at most {MAX_TEMPLATE_VALUES} lists of ints or "
                f"bools, e.g. {example}",
            )
        if f"{template}(" not in source:
            _fail(path, f"{where}: kernels.cuh defines no kernel {template}")
        kernel = KernelTemplate(template, tuple((k, tuple(v)) for k, v in values.items()), when)
        if when is not None:
            _check_when(path, f"{where}: kernels.{template}.when", kernel, dtypes)
        templates.append(kernel)
    return tuple(templates)


def _check_when(path, key, kernel: KernelTemplate, dtypes) -> None:
    """`when` names only dtype and the parameters, and leaves an instance for every dtype."""
    _check_expression(path, key, kernel.when, ["dtype", *(k for k, _ in kernel.values)], set(),
                      torch_allowed=False)  # fmt: skip
    for dtype in dtypes:
        try:
            left = kernel.combinations(dtype)
        except Exception as exc:  # noqa: BLE001 - any error of the expression is the author's
            _fail(path, f"{key} = {kernel.when!r}: {type(exc).__name__}: {exc} (dtype {dtype})")
        if not left:
            _fail(path, f"{key} = {kernel.when!r}: compiles no {kernel.name} for {dtype}")


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


# What the core puts in scope of an op's backward and jvp (cuda_ext_example/ops.py).
CORE_NAMES = {"unbroadcast", "tangent_sum", "needs_grad"}


def _check_expression(path, key, expression, names, helpers, torch_allowed=True,
                      other_names=False) -> None:  # fmt: skip
    """A Python expression of `names`, `torch` and reference.py's functions: it must parse,
    name nothing else, and every torch.x.y it names must exist in this torch."""
    if not isinstance(expression, str):
        _fail(path, f"{key} = {expression!r}: a Python expression in a string")
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as exc:
        _fail(path, f"{key} = {expression!r}: not a Python expression ({exc.msg})")
    known = {*names, *helpers, *CORE_NAMES} | ({"torch"} if torch_allowed else set())
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id not in known and not other_names:
            _fail(
                path,
                f"{key} = {expression!r}: unknown name {node.id!r}; it may use "
                + ", ".join(sorted(known - CORE_NAMES)),
            )
        if torch_allowed and isinstance(node, ast.Attribute) and _dotted(node, "torch"):
            _resolve_torch(path, key, _dotted(node, "torch"))


def _check_backward_calls(ops: list[Op], ops_dir: Path) -> None:
    """A backward may call other ops by name: every name it uses must be an argument, a
    result, a gradient, torch, reference.py's, the core's, or a declared op."""
    declared = {op.name for op in ops}
    for op in ops:
        if op.backward is None or op.jvp is not None:
            continue
        n = len(op.outputs)
        known = {a.name for a in op.arguments} | declared | CORE_NAMES | {"torch"}
        known |= (
            {"grad", "out"} if n == 1 else {f"{p}{j}" for p in ("grad", "out") for j in range(n)}
        )
        if op.has_reference_module:
            module = Path(ops_dir) / op.folder / "reference.py"
            if module.is_file():
                known |= _module_functions(module.parent / "ops.toml", module)
        for node in ast.walk(ast.parse(op.backward, mode="eval")):
            if isinstance(node, ast.Name) and node.id not in known:
                raise OpDeclarationError(
                    f"ops/{op.folder}/ops.toml: [[op]] {op.name} backward: unknown name "
                    f"{node.id!r}; it may use torch, its arguments and "
                    f"{sorted(known - {'torch'} - {a.name for a in op.arguments})}"
                )


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
                f"{key}: {dotted} does not exist ({where} has no {part!r}) "
                f"in torch {torch.__version__}",
            )
        found = getattr(found, part)
