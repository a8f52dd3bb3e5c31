"""Ops that are not elementwise, as declared in ops/<folder>/ops.toml with kind = "custom".

Such a folder holds the op's own code, written as a kernel author writes it:
- kernels.cuh: device code (templates, shared memory, warp shuffles), compiled by NVRTC like
  the elementwise kernels, inside the namespace cee_rule_<folder>, over the core's device
  helpers (csrc/device_reductions.cuh);
- host.h: one host function per op, against the core's host API (csrc/custom_op.h): it
  checks the inputs, allocates the outputs, and runs a plain C++ loop on the CPU or launches
  its kernels on the GPU;
- ops.toml: per [[op]], the torch schema, the host function, the kernel instances to
  compile, the fake kernel (each output as a Python expression of the arguments), the
  backward (an expression of the arguments, the outputs and the gradients), the reference
  it equals within a tolerance, and sample inputs for the tests, doctor and the smoke test.
The core turns that into the registration, the Python function, autograd, the fake kernel
and every check; buildtools/ops.py does the same for elementwise rules.
"""

from __future__ import annotations

import itertools
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from .ops import (
    DTYPES,
    FLOATS,
    IDENTIFIER,
    OPS_DIR,
    OpDeclarationError,
    _check_expression,
    _fail,
    _module_functions,
    _one_line,
    _tolerance,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 builds
    import tomli as tomllib

KIND = "custom"
TOP_KEYS = {"kind", "dtypes", "op"}
OP_KEYS = {
    "name", "schema", "function", "kernels", "fake", "backward", "reference", "tolerance",
    "samples", "doc",
}  # fmt: skip
ARGUMENT = re.compile(
    r"\s*(?P<type>Tensor|float|int|bool)\s+(?P<name>[A-Za-z_]\w*)\s*(=\s*(?P<default>\S+))?\s*\Z"
)
SCALAR_PYTHON = {"float": float, "int": int, "bool": lambda s: s == "True"}
MAX_TEMPLATE_VALUES = 4
WHEN = "when"  # a template's optional filter of its combinations
# What a sample expression sees: the dtype, the device, and a size n that the checkers vary
# (the tests, the sanitizer run and the smoke test pick sizes, doctor a small one).
SAMPLE_NAMES = ["dtype", "device", "n"]


@dataclass(frozen=True)
class Argument:
    name: str
    type: str  # "Tensor", "float", "int" or "bool"
    default: float | int | bool | None

    def record(self) -> dict:
        return {"name": self.name, "type": self.type, "default": self.default}


@dataclass(frozen=True)
class KernelTemplate:
    """A template of kernels.cuh and the values of its parameters after the dtype: every
    combination is compiled for every dtype of the op, or only those for which `when` (a
    Python expression of `dtype` and the parameters) is true."""

    name: str
    values: tuple[tuple[str, tuple[int | bool, ...]], ...]  # (parameter, its values)
    when: str | None = None

    def combinations(self, dtype: str) -> list[tuple[int | bool, ...]]:
        every = itertools.product(*(v for _, v in self.values))
        if self.when is None:
            return list(every)
        names = [name for name, _ in self.values]
        code = compile(self.when, f"kernels.{self.name}.when", "eval")

        def allowed(values: tuple) -> bool:
            scope = {"dtype": dtype, **dict(zip(names, values, strict=True))}
            return bool(eval(code, {"__builtins__": {}}, scope))  # noqa: S307 - ops.toml's own

        return [values for values in every if allowed(values)]


@dataclass(frozen=True)
class CustomOp:
    name: str
    folder: str
    arguments: tuple[Argument, ...]
    outputs: int
    function: str  # host.h's function
    kernels: tuple[KernelTemplate, ...]
    fake: tuple[str, ...]  # per output, a Python expression of the arguments
    backward: str | None  # Python expression: one gradient per tensor argument
    reference: str
    tolerance: dict[str, dict[str, float]]
    samples: dict[str, str]  # argument -> Python expression of dtype, device and n
    dtypes: tuple[str, ...]
    doc: str
    has_reference_module: bool

    @property
    def tensors(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.arguments if a.type == "Tensor")

    @property
    def schema(self) -> str:
        def one(a: Argument) -> str:
            default = "" if a.default is None else f"={a.default!r}"
            return f"{a.type} {a.name}{default}"

        returns = "Tensor" if self.outputs == 1 else f"({', '.join(['Tensor'] * self.outputs)})"
        return f"{self.name}({', '.join(one(a) for a in self.arguments)}) -> {returns}"

    def instances(self) -> list[tuple[KernelTemplate, str, tuple]]:
        """(template, dtype, values) of every kernel instance the op's library holds."""
        return [
            (t, dtype, values)
            for t in self.kernels
            for dtype in self.dtypes
            for values in t.combinations(dtype)
        ]

    def expression(self, template: KernelTemplate, dtype: str, values: tuple) -> str:
        """NVRTC's name expression of one instance."""
        args = [DTYPES[dtype].device_type] + [
            ("true" if v else "false") if isinstance(v, bool) else str(v) for v in values
        ]
        return f"cee_rule_{self.folder}::{template.name}<{', '.join(args)}>"

    def record(self) -> dict:
        return {
            "name": self.name,
            "folder": self.folder,
            "kind": KIND,
            "arguments": [a.record() for a in self.arguments],
            "outputs": self.outputs,
            "fake": list(self.fake),
            "backward": self.backward,
            "reference": self.reference,
            "tolerance": self.tolerance,
            "samples": dict(self.samples),
            "dtypes": list(self.dtypes),
            "doc": self.doc,
            "schema": self.schema,
        }


def is_custom(path: Path) -> bool:
    """Whether ops/<folder>/ops.toml declares custom ops (kind = "custom")."""
    try:
        return tomllib.loads(path.read_text()).get("kind") == KIND
    except tomllib.TOMLDecodeError:
        return False  # the elementwise parser names the error


def _arguments(path: Path, name: str, schema) -> tuple[tuple[Argument, ...], int]:
    """`(Tensor x, Tensor weight, float eps=1e-06) -> Tensor` -> arguments, outputs."""
    where = f"[[op]] {name}: schema = {schema!r}"
    match = isinstance(schema, str) and re.fullmatch(
        r"\s*\((?P<args>[^()]*)\)\s*->\s*(?P<ret>Tensor|\((\s*Tensor\s*,?)+\))\s*", schema
    )
    if not match:
        _fail(path, f"{where}: write it as torch does, e.g. (Tensor x, float eps=1e-06) -> Tensor")
    arguments = []
    for part in filter(str.strip, match["args"].split(",")):
        arg = ARGUMENT.match(part)
        if not arg:
            _fail(path, f"{where}: {part.strip()!r} is not `Tensor|float|int|bool name[=default]`")
        default = arg["default"]
        if default is not None:
            if arg["type"] == "Tensor":
                _fail(path, f"{where}: a Tensor argument has no default")
            try:
                default = SCALAR_PYTHON[arg["type"]](default)
            except ValueError:
                _fail(path, f"{where}: {default!r} is not a {arg['type']}")
        elif arguments and arguments[-1].default is not None:
            _fail(path, f"{where}: {arg['name']} has no default but follows one that has")
        arguments.append(Argument(arg["name"], arg["type"], default))
    names = [a.name for a in arguments]
    if len(set(names)) != len(names) or not any(a.type == "Tensor" for a in arguments):
        _fail(path, f"{where}: distinct argument names, at least one Tensor")
    return tuple(arguments), match["ret"].count("Tensor")


def _kernels(path: Path, name: str, table, dtypes) -> tuple[KernelTemplate, ...]:
    example = "kernels = { my_kernel = { per_thread = [1, 2, 4] } }"
    if not isinstance(table, dict) or not table:
        _fail(path, f"[[op]] {name}: kernels: each template of kernels.cuh, e.g. {example}")
    templates = []
    for template, values in table.items():
        values = dict(values) if isinstance(values, dict) else values
        when = values.pop(WHEN, None) if isinstance(values, dict) else None
        ok = IDENTIFIER.match(template) and isinstance(values, dict)
        ok = ok and len(values) <= MAX_TEMPLATE_VALUES
        ok = ok and all(
            IDENTIFIER.match(k) and isinstance(v, list) and v and all(isinstance(x, int) for x in v)
            for k, v in values.items()
        )
        if not ok:
            _fail(
                path,
                f"[[op]] {name}: kernels.{template} = {values!r}: the values of its template "
                f"parameters after the dtype, at most {MAX_TEMPLATE_VALUES} lists of ints or "
                f"bools, e.g. {example}",
            )
        if f"{template}(" not in (path.parent / "kernels.cuh").read_text().replace(" (", "("):
            _fail(path, f"[[op]] {name}: kernels.cuh defines no kernel {template}")
        kernel = KernelTemplate(template, tuple((k, tuple(v)) for k, v in values.items()), when)
        if when is not None:
            _check_when(path, f"[[op]] {name}: kernels.{template}.{WHEN}", kernel, dtypes)
        templates.append(kernel)
    return tuple(templates)


def _check_when(path: Path, key: str, kernel: KernelTemplate, dtypes) -> None:
    """`when` names only dtype and the parameters, and leaves some instance for every dtype
    (an op whose dtype has no kernel could only fail at its first call)."""
    _check_expression(path, key, kernel.when, ["dtype", *(k for k, _ in kernel.values)], (), set())
    for dtype in dtypes:
        try:
            left = kernel.combinations(dtype)
        except Exception as exc:  # noqa: BLE001 - any error of the expression is the author's
            _fail(path, f"{key} = {kernel.when!r}: {type(exc).__name__}: {exc} (dtype {dtype})")
        if not left:
            _fail(path, f"{key} = {kernel.when!r}: compiles no {kernel.name} for {dtype}")


def _ops_of(path: Path, all_dtypes: tuple[str, ...]) -> list[CustomOp]:
    data = tomllib.loads(path.read_text())
    folder = path.parent.name
    for file in ("kernels.cuh", "host.h"):
        if not (path.parent / file).is_file():
            _fail(path, f'kind = "custom" needs {file} next to it (see docs/ADDING_A_KERNEL.md)')
    if set(data) - TOP_KEYS:
        _fail(path, f"unknown keys {sorted(set(data) - TOP_KEYS)}; known: {sorted(TOP_KEYS)}")
    dtypes = data.get("dtypes", [])
    if not isinstance(dtypes, list) or not dtypes or not set(dtypes) <= set(all_dtypes):
        _fail(path, f"dtypes {dtypes!r}: a non-empty list of the core's {list(all_dtypes)}")
    dtypes = tuple(d for d in all_dtypes if d in dtypes)
    module = path.parent / "reference.py"
    helpers = _module_functions(path, module) if module.is_file() else set()
    entries = data.get("op")
    if not isinstance(entries, list) or not entries:
        _fail(path, "no [[op]] entry: each op is an [[op]] with a name and a schema")
    names = [e.get("name") for e in entries]
    host = (path.parent / "host.h").read_text()
    ops = []
    for entry in entries:
        name = entry.get("name", "")
        if not isinstance(name, str) or not IDENTIFIER.match(name):
            _fail(path, f"op name {name!r} is not an identifier")
        if set(entry) - OP_KEYS:
            _fail(path, f"[[op]] {name}: unknown keys {sorted(set(entry) - OP_KEYS)}")
        for key in ("schema", "function", "kernels", "fake", "reference", "samples"):
            if key not in entry:
                _fail(path, f"[[op]] {name}: missing `{key}` (see docs/ADDING_A_KERNEL.md)")
        arguments, outputs = _arguments(path, name, entry["schema"])
        function = entry["function"]
        if not isinstance(function, str) or not re.search(rf"\b{function}\s*\(", host):
            _fail(path, f"[[op]] {name}: function = {function!r}: host.h defines no such function")
        scalars = [a for a in arguments if a.type != "Tensor"]
        tensors = tuple(a.name for a in arguments if a.type == "Tensor")
        scope = [a.name for a in arguments]
        fake = entry["fake"]
        if not isinstance(fake, list) or len(fake) != outputs:
            _fail(path, f"[[op]] {name}: fake: one Python expression per output ({outputs})")
        fake = tuple(_one_line(f) for f in fake)
        for expression in fake:
            _check(path, f"[[op]] {name} fake", expression, scope, set())
        reference = _one_line(entry["reference"])
        _check(path, f"[[op]] {name} reference", reference, scope, helpers)
        backward = entry.get("backward")
        if backward is not None:
            backward = _one_line(backward)
            grads = ["grad"] if outputs == 1 else [f"grad{j}" for j in range(outputs)]
            results = ["out"] if outputs == 1 else [f"out{j}" for j in range(outputs)]
            known = scope + grads + results + [n for n in names if n != name]
            _check(path, f"[[op]] {name} backward", backward, known, helpers)
        samples = entry["samples"]
        needed = set(tensors) | {a.name for a in scalars if a.default is None}
        if not isinstance(samples, dict) or not needed <= set(samples) <= set(scope):
            _fail(
                path,
                f"[[op]] {name}: samples: a Python expression of dtype, device and n for each of "
                f"{sorted(needed)} (and any scalar with a default)",
            )
        for key, expression in samples.items():
            _check(path, f"[[op]] {name} samples.{key}", expression, SAMPLE_NAMES, set())
        if any(s.type == "float" for s in scalars) and not set(dtypes) <= FLOATS:
            _fail(path, f"[[op]] {name}: a float scalar needs float dtypes only")
        ops.append(
            CustomOp(
                name=name,
                folder=folder,
                arguments=arguments,
                outputs=outputs,
                function=function,
                kernels=_kernels(path, name, entry["kernels"], dtypes),
                fake=fake,
                backward=backward,
                reference=reference,
                tolerance=_tolerance(path, entry.get("tolerance"), dtypes) or {},
                samples={k: _one_line(v) for k, v in samples.items()},
                dtypes=dtypes,
                doc=entry.get("doc", "").strip(),
                has_reference_module=module.is_file(),
            )
        )
    return ops


def _check(path, key, expression, names, helpers) -> None:
    """A Python expression that may use torch, `names` and reference.py's `helpers`."""
    _check_expression(path, key, expression, tuple(names), (), helpers)


def declared(ops_dir: Path = OPS_DIR, dtypes: tuple[str, ...] | None = None) -> list[CustomOp]:
    """Every custom op of ops/*/ops.toml, sorted by name."""
    if dtypes is None:
        from .ops import elementwise

        dtypes = tuple(d.name for d in elementwise().dtypes)
    found = [
        op
        for path in sorted(ops_dir.glob("*/ops.toml"))
        if is_custom(path)
        for op in _ops_of(path, dtypes)
    ]
    return sorted(found, key=lambda op: op.name)


def check_unique(elementwise_names: list[str], custom: list[CustomOp]) -> None:
    names = elementwise_names + [op.name for op in custom]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise OpDeclarationError(f"ops/*/ops.toml: {duplicated} declared more than once")
