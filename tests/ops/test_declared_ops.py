"""Each declared op against torch, from its declaration alone: one small set of checks that
every op gets, elementwise or not, at the sizes the release's smoke test uses too (so a
tolerance that fails at 10^6 fails here first). A failure names the op and the fix."""

from __future__ import annotations

import re
import warnings

import pytest
import torch
from conftest import DECLARED, DIFFERENTIABLE

import cuda_ext_example
from cuda_ext_example import op_checks
from cuda_ext_example.op_checks import SMOKE_SIZE

SIZES = [1, 33, 4099, SMOKE_SIZE]


def _tensors(args):
    return [a for a in args if isinstance(a, torch.Tensor)]


def _first_line(call) -> str:
    with pytest.raises((RuntimeError, TypeError)) as caught:
        call()
    return str(caught.value).splitlines()[0]


def _leaves(args):
    """The arguments with each floating tensor a fresh leaf that requires grad."""
    return [
        a.detach().clone().requires_grad_()
        if isinstance(a, torch.Tensor) and a.is_floating_point()
        else a
        for a in args
    ]


def _as_tuple(out):
    return out if isinstance(out, tuple) else (out,)


@pytest.mark.parametrize("size", SIZES)
def test_matches_its_reference_in_every_dtype(any_op, device, size):
    for dtype in any_op.dtypes:
        any_op.check(any_op.arguments(size, dtype, device, seed=size))


def test_empty_inputs(any_op, device):
    # Torch's answer for no elements: an empty result, or a reduction's identity.
    for dtype in any_op.dtypes:
        arguments = any_op.arguments(0, dtype, device)
        assert any(isinstance(a, torch.Tensor) and a.numel() == 0 for a in arguments)
        any_op.check(arguments)


def _strided(t: torch.Tensor) -> torch.Tensor:
    """The same values in a layout of another kind: every element 2 apart."""
    if t.dim() == 0:
        return t
    holder = torch.zeros((*t.shape, 2), dtype=t.dtype, device=t.device)
    view = holder[..., 0]
    view.copy_(t)
    return view


def _offset(t: torch.Tensor) -> torch.Tensor:
    """The same values one element into their storage (no 16-byte alignment)."""
    flat = torch.zeros(t.numel() + 1, dtype=t.dtype, device=t.device)
    view = flat[1:].view(t.shape)
    view.copy_(t)
    return view


@pytest.mark.parametrize("layout", [_strided, _offset], ids=["strided", "offset"])
def test_any_layout_of_its_inputs(any_op, device, layout):
    for dtype in any_op.dtypes:
        args = any_op.arguments(4099, dtype, device, seed=1)
        views = [layout(a) if isinstance(a, torch.Tensor) else a for a in args]
        assert any(not v.is_contiguous() or v.storage_offset() for v in _tensors(views))
        ours = any_op.check(views)
        assert all(o.is_contiguous() for o in ours[: any_op.outputs])


def test_inputs_are_left_alone_unless_updated_in_place(any_op, device):
    args = any_op.arguments(64, any_op.dtypes[-1], device)
    before = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    out = any_op(*args)
    outs = () if out is None else _as_tuple(out)
    for o in outs:
        assert o.data_ptr() not in [t.data_ptr() for t in _tensors(args)]
    for spec, a, was in zip(any_op.declaration["arguments"], args, before, strict=True):
        if spec["type"] != "Tensor":
            continue
        if spec["mutable"]:
            assert not torch.equal(a, was), f"{spec['name']} is declared mutated and was not"
        else:
            assert torch.equal(a, was), f"{spec['name']} changed; declare it in `mutates`"


UNDECLARED = [torch.int32, torch.bool, torch.complex64, torch.uint16]


def _everywhere(op, args) -> dict[str, str]:
    """The first line of the error a call with `args` gives on real, empty, meta and fake
    tensors (the same input, each way)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    def on(device):
        return [a.to(device) if isinstance(a, torch.Tensor) else a for a in args]

    def empty(a):
        return a[..., :0] if isinstance(a, torch.Tensor) and a.dim() else a

    lines = {
        "real": _first_line(lambda: op(*args)),
        "empty": _first_line(lambda: op(*[empty(a) for a in args])),
        "meta": _first_line(lambda: op(*on("meta"))),
    }
    with FakeTensorMode() as mode:
        fakes = [mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args]
        lines["fake"] = _first_line(lambda: op(*fakes))
    return lines


def test_an_undeclared_dtype_is_refused_alike_on_real_empty_meta_and_fake(any_op):
    dtype = next(d for d in UNDECLARED if d not in any_op.dtypes)
    args = any_op.arguments(8, any_op.dtypes[0], "cpu")
    wrong = [a.to(dtype) if isinstance(a, torch.Tensor) else a for a in args]
    lines = _everywhere(any_op, wrong)
    assert len(set(lines.values())) == 1, lines
    assert lines["real"].startswith(f"cuda_ext_example.{any_op.__name__}: "), lines
    assert str(dtype) in lines["real"] and "supported: " in lines["real"], lines


def _violations(op: dict, check: str) -> dict:
    """Scalar values (from a few candidates) that break the C++ condition `check`."""
    python = check.replace("&&", " and ").replace("||", " or ")
    python = re.sub(r"!(?!=)", " not ", python)
    scalars = {a["name"]: a for a in op["arguments"] if a["type"] != "Tensor"}
    names = [n for n in scalars if re.search(rf"\b{n}\b", check)]
    base = {n: scalars[n]["sample"] for n in scalars}
    candidates = {"float": [-1.0, 2.0, -1e30, 1e30], "int": [-1, 0, 2**40], "bool": [True, False]}
    for name in names:
        for value in candidates[scalars[name]["type"]]:
            values = {**base, name: value}
            if not eval(python, {}, values):  # noqa: S307 - ops.toml's own condition
                return values
    raise AssertionError(f"no candidate value breaks {check!r}")


def test_declared_checks_refuse_alike_on_real_empty_meta_and_fake(any_op):
    op = any_op.declaration
    checks = op["checks"]
    if not checks:
        pytest.skip(f"{any_op.__name__} declares no checks")
    for check in checks:
        values = _violations(op, check)
        args = any_op.arguments(8, any_op.dtypes[0], "cpu")
        args = [values.get(a["name"], v) for a, v in zip(op["arguments"], args, strict=True)]
        lines = _everywhere(any_op, args)
        assert len(set(lines.values())) == 1, lines
        assert f"{check} must hold, got " in lines["real"], lines


def test_its_python_function_has_the_schemas_signature_and_doc(any_op):
    op = any_op.declaration
    function = any_op.function
    assert any_op.__name__ in cuda_ext_example.__all__
    assert function.__doc__.startswith(f"{any_op.__name__}(") and op["doc"] in function.__doc__
    import inspect

    parameters = inspect.signature(function).parameters
    assert list(parameters) == [a["name"] for a in op["arguments"]]
    for a in op["arguments"]:
        default = parameters[a["name"]].default
        assert default == (inspect.Parameter.empty if a["default"] is None else a["default"])
    schema = getattr(torch.ops.cuda_ext_example, any_op.__name__).default._schema
    declared = [(a["name"], a["type"], a["default"]) for a in op["arguments"]]
    assert [(a.name, str(a.type), a.default_value) for a in schema.arguments] == declared
    assert len(schema.returns) == len(op["outputs"])
    assert [a.alias_info is not None and a.alias_info.is_write for a in schema.arguments] == [
        a["mutable"] for a in op["arguments"]
    ]


def test_opcheck(any_op, device):
    dtype = torch.float32 if torch.float32 in any_op.dtypes else any_op.dtypes[-1]
    args = any_op.arguments(33, dtype, device)
    overload = getattr(torch.ops.cuda_ext_example, any_op.__name__).default
    torch.library.opcheck(overload, args)
    if any_op.differentiable:
        torch.library.opcheck(overload, _leaves(args))


@pytest.fixture(params=list(DIFFERENTIABLE), ids=list(DIFFERENTIABLE))
def diff_op(request):
    return DIFFERENTIABLE[request.param]


def _loss(function):
    """A scalar of every output, each weighted differently (sin: no linear shortcut)."""

    def loss(*args):
        return sum(o.sin().sum() * (k + 1) for k, o in enumerate(_as_tuple(function(*args))))

    return loss


def test_gradients_are_the_references(diff_op, device):
    args = diff_op.arguments(17, torch.float64, device, seed=2)
    ours, theirs = _leaves(args), _leaves(args)
    _loss(diff_op.function)(*ours).backward()
    _loss(diff_op.reference)(*theirs).backward()
    for spec, got, want in zip(diff_op.declaration["arguments"], ours, theirs, strict=True):
        if isinstance(got, torch.Tensor) and got.requires_grad:
            torch.testing.assert_close(got.grad, want.grad, msg=f"d/d{spec['name']}")
    assert torch.autograd.gradcheck(diff_op.function, tuple(_leaves(args)))
    if diff_op.declaration["jvp"]:  # a backward made of torch functions differentiates again
        assert torch.autograd.gradgradcheck(diff_op.function, tuple(_leaves(args)))


def test_forward_mode_ad_is_the_references_or_refused(diff_op, device):
    args = diff_op.arguments(17, torch.float64, device, seed=3)
    first = next(i for i, a in enumerate(args) if isinstance(a, torch.Tensor))
    rest = args[:first], args[first + 1 :]

    def of_first(function):
        return lambda x: function(*rest[0], x, *rest[1])

    tangent = torch.randn_like(args[first])
    if not diff_op.declaration["jvp"]:
        with pytest.raises(RuntimeError, match="forward-mode AD .* is not supported"):
            torch.func.jvp(of_first(diff_op.function), (args[first],), (tangent,))
        return
    out, got = torch.func.jvp(of_first(diff_op.function), (args[first],), (tangent,))
    want_out, want = torch.func.jvp(of_first(diff_op.reference), (args[first],), (tangent,))
    torch.testing.assert_close(got, want)
    assert got.abs().sum() > 0, (
        f"{diff_op.__name__}: every tangent is zero on its samples: declare samples that reach "
        "each branch of its rule ([op.samples] in its ops.toml), or its [derivatives] are wrong"
    )


@pytest.mark.slow  # a compile per op: seconds each on a CPU
def test_torch_compile_fullgraph(any_op, device):
    torch._dynamo.reset()
    dtype = torch.float32 if torch.float32 in any_op.dtypes else any_op.dtypes[-1]
    args = any_op.arguments(1000, dtype, device, seed=4)
    compiled = torch.compile(lambda *a: any_op.function(*a), fullgraph=True)
    # A recompile at another size (dynamic shapes) runs the meta kernel on symbolic sizes.
    for n in (1000, 37):
        args = any_op.arguments(n, dtype, device, seed=4)
        ours = op_checks.results(compiled, any_op.declaration, args)
        problem = op_checks.difference(any_op.declaration, ours, any_op.expected(args))
        assert problem is None, problem
    if any_op.differentiable:
        args = any_op.arguments(64, torch.float32, device, seed=5)
        ours, theirs = _leaves(args), _leaves(args)
        torch.compile(_loss(any_op.function), fullgraph=True)(*ours).backward()
        _loss(any_op.reference)(*theirs).backward()
        tol = any_op.declaration["tolerance"] or {}
        for got, want in zip(ours, theirs, strict=True):
            if isinstance(got, torch.Tensor) and got.requires_grad:
                torch.testing.assert_close(got.grad, want.grad, **tol.get("float32", {}))


def test_vmap(any_op, device):
    if any_op.mutates:
        pytest.skip("updates its inputs: test_elementwise_core refuses vmap of it")
    dtype = torch.float32 if torch.float32 in any_op.dtypes else any_op.dtypes[-1]
    batch = [any_op.arguments(9, dtype, device, seed=s) for s in range(3)]
    stacked = [
        torch.stack([b[i] for b in batch]) if isinstance(a, torch.Tensor) else a
        for i, a in enumerate(batch[0])
    ]
    in_dims = tuple(0 if isinstance(a, torch.Tensor) else None for a in stacked)
    with warnings.catch_warnings():
        if any_op.broadcasts:  # a batching rule: no "performance drop" fallback
            warnings.simplefilter("error")
        got = torch.func.vmap(any_op.function, in_dims=in_dims)(*stacked)
    for k, args in enumerate(batch):
        want = _as_tuple(any_op.reference(*args))
        ours = tuple(o[k] for o in _as_tuple(got))
        assert op_checks.difference(any_op.declaration, ours, want) is None


def test_every_op_is_declared_and_listed():
    assert set(cuda_ext_example.OP_NAMES) == set(DECLARED)
    recorded = [op["name"] for op in cuda_ext_example.BUILD_INFO["ops"]]
    assert list(cuda_ext_example.OP_NAMES) == recorded
