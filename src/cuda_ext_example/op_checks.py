"""Every declared op against what its ops.toml says it equals (`reference`, a Python
expression of its arguments; bit for bit, or within the declared `tolerance`): what doctor,
the smoke test, the sanitizer run, the JIT check and the tests run, so a new op is checked
by all of them without being named anywhere.

An op's results are its outputs, then the inputs it updates in place (called on copies,
so the caller's tensors are never changed)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from .custom_ops import CUSTOM, expression_scope
from .ops import DECLARATIONS, python_scope

# Every op's declaration by name: the elementwise ones, then the custom ones.
EVERY_OP: dict[str, dict] = {**DECLARATIONS, **CUSTOM}


def reference(op: dict) -> Callable:
    """The op's reference as a function of its arguments (tensors, then scalars): its
    ops.toml expression, with torch and its folder's reference.py functions in scope."""
    scope = python_scope(op)
    code = compile(op["reference"], f"ops/{op['folder']}/ops.toml reference", "eval")
    names = list(op["inputs"]) + [s["name"] for s in op["scalars"]]

    def call(*args):
        return eval(code, {**scope, **dict(zip(names, args, strict=True))})  # noqa: S307

    call.__name__ = f"reference of {op['name']}"
    return call


def scalar_samples(op: dict) -> list:
    """Each scalar's default or declared example value."""
    return [s["sample"] for s in op["scalars"]]


def results(function: Callable, op: dict, tensors: list, scalars: list) -> tuple:
    """function(*tensors, *scalars)'s results: its outputs, then the inputs it updates in
    place (on clones of those)."""
    tensors = [
        t.clone() if name in op["mutates"] else t
        for name, t in zip(op["inputs"], tensors, strict=True)
    ]
    out = function(*tensors, *scalars)
    outs = () if not op["outputs"] else (out,) if len(op["outputs"]) == 1 else tuple(out)
    updated = tuple(
        t for name, t in zip(op["inputs"], tensors, strict=True) if name in op["mutates"]
    )
    return outs + updated


def tolerance(op: dict, dtype: torch.dtype) -> dict | None:
    """{rtol, atol} the op declares for dtype, or None: bit for bit."""
    declared = op.get("tolerance") or {}
    return declared.get(str(dtype).removeprefix("torch."))


def difference(op: dict, ours: tuple, theirs: tuple) -> str | None:
    """None if each result equals the reference's as the declaration says (bit for bit,
    or within its tolerance, NaN equal to NaN); else what differs."""
    if len(ours) != len(theirs):
        return f"{len(ours)} results, the reference gave {len(theirs)}"
    for got, want in zip(ours, theirs, strict=True):
        if got.shape != want.shape or got.dtype != want.dtype or got.device != want.device:
            return f"got {_describe(got)}, the reference {_describe(want)}"
        tol = tolerance(op, got.dtype)
        if tol is None:
            same = torch.equal(_bytes(got), _bytes(want))
            if not same:
                count = int((got != want).sum()) if got.numel() else 0
                return f"not bit for bit equal ({count} elements differ)"
            continue
        try:
            torch.testing.assert_close(got, want, equal_nan=True, **tol)
        except AssertionError as error:
            return str(error).splitlines()[0] + f" (declared {tol})"
    return None


def _describe(t: torch.Tensor) -> str:
    return f"{t.dtype}{list(t.shape)} on {t.device}"


def _bytes(t: torch.Tensor) -> torch.Tensor:
    return t.detach().contiguous().reshape(-1).view(torch.uint8)


def sample_inputs(op: dict, n: int, device, dtype=torch.float32, generator=None) -> list:
    """One tensor per input, values spread over the dtype (integers wrap past their range;
    the inputs declared nonnegative hold |x|)."""
    tensors = []
    for name in op["inputs"]:
        t = torch.randn(n, generator=generator) * 100
        if name in op.get("nonnegative", ()):
            t = t.abs()
        tensors.append(t.to(dtype).to(device))
    return tensors


def dtype_to_check(op: dict, dtype: torch.dtype | None) -> torch.dtype | None:
    """The dtype to check op in: `dtype` if the op declares it (else None: skip the op); for
    None, float32 or the op's first dtype."""
    if dtype is None:
        return getattr(torch, "float32" if "float32" in op["dtypes"] else op["dtypes"][0])
    return dtype if str(dtype).removeprefix("torch.") in op["dtypes"] else None


def mismatches(ops_module, device, dtype=torch.float32, n: int = 1000) -> list[str]:
    """'<op> <dtype>: what differs' for each op of `ops_module` (cuda_ext_example, or the
    JIT's torch.ops namespace) that differs from its reference on `device`, in `dtype`
    (the ops that declare it), or None: each op in float32, or its first dtype."""
    wrong = []
    for name, op in DECLARATIONS.items():
        op_dtype = dtype_to_check(op, dtype)
        if op_dtype is None:
            continue
        tensors, scalars = sample_inputs(op, n, device, op_dtype), scalar_samples(op)
        ours = results(getattr(ops_module, name), op, tensors, scalars)
        theirs = results(reference(op), op, tensors, scalars)
        problem = difference(op, ours, theirs)
        if problem:
            wrong.append(f"{name} {op_dtype}: {problem}")
    return wrong + custom_mismatches(ops_module, device, dtype, n)


def custom_arguments(op: dict, device, dtype: torch.dtype, n: int = 300) -> list:
    """A custom op's arguments: its declared samples (expressions of dtype, device and the
    size n), the other scalars at their defaults."""
    scope = {"torch": torch, "dtype": dtype, "device": torch.device(device), "n": n}
    return [
        eval(op["samples"][a["name"]], scope)  # noqa: S307 - ours
        if a["name"] in op["samples"]
        else a["default"]
        for a in op["arguments"]
    ]


def custom_reference(op: dict, namespace: str = "cuda_ext_example") -> Callable:
    """A custom op's reference as a function of its arguments."""
    code = compile(op["reference"], f"ops/{op['folder']}/ops.toml reference", "eval")
    names = [a["name"] for a in op["arguments"]]

    def call(*args):
        scope = {**expression_scope(op, namespace), **dict(zip(names, args, strict=True))}
        return eval(code, scope)  # noqa: S307 - ours

    call.__name__ = f"reference of {op['name']}"
    return call


def custom_results(function: Callable, args: list) -> tuple:
    out = function(*args)
    return (out,) if isinstance(out, torch.Tensor) else tuple(out)


def custom_mismatches(ops_module, device, dtype=torch.float32, n: int = 300) -> list[str]:
    """mismatches() of the custom ops: each on its declared samples of size n."""
    wrong = []
    for name, op in CUSTOM.items():
        op_dtype = dtype_to_check(op, dtype)
        if op_dtype is None:
            continue
        args = custom_arguments(op, device, op_dtype, n)
        ours = custom_results(getattr(ops_module, name), args)
        theirs = custom_results(custom_reference(op), args)
        problem = difference(op, ours, theirs)
        if problem:
            wrong.append(f"{name} {op_dtype}: {problem}")
    return wrong


def check_one(ops_module, name: str, device, dtype: torch.dtype, n: int) -> str | None:
    """Op `name` of either kind on its samples of size n against its reference, computed
    from the same values on the CPU: None, or what differs."""
    op = EVERY_OP[name]
    if name in CUSTOM:
        args = custom_arguments(op, "cpu", dtype, n)
        moved = [a.to(device) if isinstance(a, torch.Tensor) else a for a in args]
        ours = custom_results(getattr(ops_module, name), moved)
        theirs = custom_results(custom_reference(op), args)
    else:
        tensors, scalars = sample_inputs(op, n, "cpu", dtype), scalar_samples(op)
        ours = results(getattr(ops_module, name), op, [t.to(device) for t in tensors], scalars)
        theirs = results(reference(op), op, tensors, scalars)
    return difference(op, tuple(t.cpu() for t in ours), theirs)


def classic_arange(add: Callable, device) -> bool:
    """The classic smoke test: two torch.arange(5) (int64) added."""
    a = torch.arange(5, device=device)
    out = add(a, a + 10)
    return torch.equal(out, torch.add(a, a + 10)) and out.tolist() == [10, 12, 14, 16, 18]
