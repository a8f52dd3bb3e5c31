"""Every declared op against what its ops.toml says it equals (`reference`, a Python
expression of its arguments; bit for bit, or within the declared `tolerance`), on its
declared samples: what doctor, the smoke test, the sanitizer run, the JIT check and the
tests run, so a new op is checked by all of them without being named anywhere.

An op's results are its outputs, then the inputs it updates in place (called on copies, so
the caller's tensors are never changed). Samples are made on the CPU from a seed, then
moved: the same values on every device and every run.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from .ops import DECLARATIONS, argument_names, python_scope

# The sizes the smoke test and the release check every op at; each op's tests too.
SMOKE_SIZE = 1_000_003


def reference(op: dict, functions: dict | None = None) -> Callable:
    """The op's reference as a function of its arguments: its ops.toml expression, with
    torch, its folder's reference.py functions and the ops' Python functions in scope."""
    scope = {**python_scope(op), **(functions or {})}
    code = compile(op["reference"], f"ops/{op['folder']}/ops.toml reference", "eval")
    names = argument_names(op)

    def call(*args):
        return eval(code, {**scope, **dict(zip(names, args, strict=True))})  # noqa: S307

    call.__name__ = f"reference of {op['name']}"
    return call


def default_sample(n: int, dtype: torch.dtype) -> torch.Tensor:
    """The core's sample of an input with none declared: floats normal, spread over about
    +-300; integers over their whole range (so that wrap-around is reached)."""
    if dtype.is_floating_point:
        return (torch.randn(n) * 100).to(dtype)
    info = torch.iinfo(dtype)
    high = info.max + 1 if dtype != torch.int64 else info.max  # randint's high is exclusive
    return torch.randint(info.min, high, (n,), dtype=torch.int64).to(dtype)


def sample_arguments(op: dict, n: int, dtype: torch.dtype, device="cpu", seed: int = 0) -> list:
    """The op's arguments for a check at size n: each tensor from its declared sample (an
    expression of dtype and n) or the core's default, each scalar its default or example."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        args = []
        for a in op["arguments"]:
            if a["type"] != "Tensor":
                args.append(a["sample"])
            elif a["name"] in op["samples"]:
                scope = {"torch": torch, "dtype": dtype, "n": n}
                args.append(eval(op["samples"][a["name"]], scope))  # noqa: S307 - ours
            else:
                args.append(default_sample(n, dtype))
    return [a.to(device) if isinstance(a, torch.Tensor) else a for a in args]


def results(function: Callable, op: dict, args: list) -> tuple:
    """function(*args)'s results: its outputs, then the inputs it updates in place (on
    clones of those)."""
    args = [
        a.clone() if spec["mutable"] else a for spec, a in zip(op["arguments"], args, strict=True)
    ]
    out = function(*args)
    n = len(op["outputs"])
    outs = () if n == 0 else (out,) if n == 1 else tuple(out)
    return outs + tuple(a for spec, a in zip(op["arguments"], args, strict=True) if spec["mutable"])


def tolerance(op: dict, dtype: torch.dtype) -> dict | None:
    """{rtol, atol} the op declares for dtype, or None: bit for bit."""
    return (op.get("tolerance") or {}).get(str(dtype).removeprefix("torch."))


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
            if not torch.equal(_bytes(got), _bytes(want)):
                count = int((got != want).sum()) if got.numel() else 0
                return f"not bit for bit equal ({count} elements differ)"
            continue
        try:
            torch.testing.assert_close(got, want, equal_nan=True, **tol)
        except AssertionError as error:
            return (
                str(error).splitlines()[0] + f" (declared {tol}: widen the op's [tolerance] in "
                "its ops.toml only if the reference itself is that far from float64)"
            )
    return None


def _describe(t: torch.Tensor) -> str:
    return f"{t.dtype}{list(t.shape)} on {t.device}"


def _bytes(t: torch.Tensor) -> torch.Tensor:
    return t.detach().contiguous().reshape(-1).view(torch.uint8)


def dtype_to_check(op: dict, dtype: torch.dtype | None) -> torch.dtype | None:
    """The dtype to check op in: `dtype` if the op declares it (else None: skip the op); for
    None, float32 or the op's first dtype."""
    if dtype is None:
        return getattr(torch, "float32" if "float32" in op["dtypes"] else op["dtypes"][0])
    return dtype if str(dtype).removeprefix("torch.") in op["dtypes"] else None


def check_one(ops_module, name: str, device, dtype: torch.dtype, n: int,
              reference_device=None) -> str | None:  # fmt: skip
    """Op `name` of `ops_module` (cuda_ext_example, or the JIT's torch.ops namespace) on its
    samples of size n on `device`, against its reference on the same values on
    `reference_device` (default: the same device; torch's CPU and CUDA kernels differ in
    the last bit here and there): None, or what differs."""
    op = DECLARATIONS[name]
    args = sample_arguments(op, n, dtype)
    ours = results(getattr(ops_module, name), op, _moved(args, device))
    theirs = results(reference(op, _functions(ops_module)), op,
                     _moved(args, reference_device or device))  # fmt: skip
    return difference(op, tuple(t.cpu() for t in ours), tuple(t.cpu() for t in theirs))


def _moved(args: list, device) -> list:
    return [a.to(device) if isinstance(a, torch.Tensor) else a for a in args]


def _functions(ops_module) -> dict:
    return {name: getattr(ops_module, name) for name in DECLARATIONS if hasattr(ops_module, name)}


def mismatches(ops_module, device, dtype=None, n: int = 1000) -> list[str]:
    """'<op> <dtype>: what differs' for each op that differs from its reference on `device`,
    in `dtype` (the ops that declare it), or None: each op in float32, or its first dtype."""
    wrong = []
    for name, op in DECLARATIONS.items():
        op_dtype = dtype_to_check(op, dtype)
        if op_dtype is None:
            continue
        problem = check_one(ops_module, name, device, op_dtype, n)
        if problem:
            wrong.append(f"{name} {op_dtype}: {problem}")
    return wrong


def classic_arange(add: Callable, device) -> bool:
    """The classic smoke test: two torch.arange(5) (int64) added."""
    a = torch.arange(5, device=device)
    out = add(a, a + 10)
    return torch.equal(out, torch.add(a, a + 10)) and out.tolist() == [10, 12, 14, 16, 18]
