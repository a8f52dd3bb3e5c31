"""torch.func and forward-mode AD through the core, tested once: the batching rule of an op
that broadcasts (batch dimensions anywhere, inputs of other ranks), vmap of an in-place op
refused, dual tensors, hessians, and the raw torch.ops call refused under a transform it
cannot do. Each op's own jvp, gradients and vmap: test_declared_ops.py."""

from __future__ import annotations

import warnings

import pytest
import torch
from conftest import DECLARED, DIFFERENTIABLE

import cuda_ext_example


def assert_as_declared(op, got, want):
    from cuda_ext_example import op_checks

    problem = op_checks.difference(op.declaration, (got,), (want,))
    assert problem is None, f"{op.__name__}: {problem}"


@pytest.mark.parametrize("raw", [False, True], ids=["python", "torch.ops"])
@pytest.mark.parametrize("name", ["my_add", "my_leaky_relu"])
def test_the_batching_rule_lines_up_batch_dimensions_anywhere(device, raw, name):
    op = DECLARED[name]
    function = getattr(torch.ops.cuda_ext_example, name) if raw else op.function

    def fn(*x):
        return function(*x, *op.scalars)

    def reference(*x):
        return op.reference(*x, *op.scalars)

    batched = op.sample((3, 5), torch.float32, device)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch's "performance drop" fallback warning
        out = torch.func.vmap(fn)(*batched)
        # batch dimension 1 of the first input; the others not batched
        mixed = [batched[0].t()] + [b[0] for b in batched[1:]]
        in_dims = (1,) + (None,) * (op.arity - 1)
        out_mixed = torch.func.vmap(fn, in_dims=in_dims)(*mixed)
        if op.arity > 1:  # inputs of other ranks that broadcast: (3, 4, 1) over 3, with (5,)
            ranked = [op.sample((3, 4, 1), torch.float32, device)[0]]
            ranked += [t[0] for t in op.sample((5,), torch.float32, device)[1:]]
            dims = (0,) + (None,) * (op.arity - 1)
            out_ranked = torch.func.vmap(fn, in_dims=dims)(*ranked)
            want = torch.stack([reference(r, *ranked[1:]) for r in ranked[0]])
            assert_as_declared(op, out_ranked, want)
    assert_as_declared(op, out, reference(*batched))
    assert_as_declared(op, out_mixed, torch.func.vmap(reference, in_dims=in_dims)(*mixed))


def test_vmap_over_an_in_place_op_is_refused(device):
    op = DECLARED["my_adamw_step"]
    tensors = [t.view(2, 3) for t in op.sample((6,), torch.float32, device)]
    with pytest.raises(RuntimeError, match="my_adamw_step: vmap over an op that updates"):
        torch.func.vmap(lambda *x: op(*x, *op.scalars))(*tensors)


def test_forward_mode_ad_with_dual_tensors(device):
    import torch.autograd.forward_ad as fwAD

    op = DECLARED["my_leaky_relu"]
    primals = op.sample((6,), torch.float64, device)
    tangents = op.sample((6,), torch.float64, device, seed=1)
    with fwAD.dual_level():
        duals = [fwAD.make_dual(p, t) for p, t in zip(primals, tangents, strict=True)]
        got = fwAD.unpack_dual(op(*duals, 0.2)).tangent
        want = fwAD.unpack_dual(op.reference(*duals, 0.2)).tangent
    assert torch.equal(got, want)


def test_jacrev_and_hessian_of_a_derived_backward(device):
    op = DECLARED["my_square"]
    (x,) = op.sample((6,), torch.float64, device)
    assert torch.equal(torch.func.jacrev(op.function)(x), torch.func.jacrev(torch.square)(x))
    hessian = torch.func.hessian(lambda t: op(t).sum())(x)
    assert torch.equal(hessian, torch.func.hessian(lambda t: torch.square(t).sum())(x))


@pytest.fixture(params=list(DIFFERENTIABLE), ids=list(DIFFERENTIABLE))
def diff_op(request):
    return DIFFERENTIABLE[request.param]


def test_the_raw_op_refuses_transforms_it_cannot_do(diff_op, device):
    """torch.ops.<op> under grad/jvp would get no tangent (torch.func cannot see an
    autograd.Function below the dispatcher): a clear error naming the Python function."""
    from cuda_ext_example import fast_path

    if fast_path.PRIVATE is None:
        pytest.skip("this torch lacks the private checks: the op's autograd is torch.library's")
    raw = getattr(torch.ops.cuda_ext_example, diff_op.__name__)
    args = diff_op.arguments(6, torch.float64, device)
    first, rest = args[0], args[1:]
    message = rf"need the Python function cuda_ext_example\.{diff_op.__name__}"
    with pytest.raises(RuntimeError, match=message):
        torch.func.jvp(lambda x: raw(x, *rest), (first,), (first,))
    with pytest.raises(RuntimeError, match=message):
        torch.func.grad(lambda x: raw(x, *rest).sum())(first)


def test_an_op_without_a_backward_refuses_to_be_differentiated(device):
    """An op whose ops.toml declares no backward runs, even on tensors that need a
    gradient (a graph may record it), and asking it for a gradient raises, naming it:
    never a silent zero gradient."""
    op = DECLARED["my_rms_norm_backward"]
    args = [
        a.requires_grad_() if isinstance(a, torch.Tensor) else a
        for a in op.arguments(5, torch.float64, device)
    ]
    dx, dweight = op(*args)
    assert dx.requires_grad
    with pytest.raises(RuntimeError, match=r"my_rms_norm_backward: has no derivative"):
        dx.sum().backward()
    with pytest.raises(RuntimeError, match=r"my_rms_norm_backward: has no derivative"):
        torch.func.grad(lambda g: op(g, *args[1:])[0].sum())(args[0].detach())


def test_an_in_place_op_refuses_to_be_differentiated_at_the_call(device):
    op = DECLARED["my_adamw_step"]
    tensors = op.sample((8,), torch.float32, device)
    tensors[3].requires_grad_()  # the gradient input of a graph being built
    with pytest.raises(RuntimeError, match=r"my_adamw_step: has no derivative .*in place"):
        op(*tensors, *op.scalars)
    kernel = cuda_ext_example.ops.make_autograd_kernel(
        op.declaration, None, lambda *a: "below", "cuda_ext_example"
    )
    with torch.no_grad():  # as an optimizer steps
        assert kernel(*tensors, *op.scalars) == "below"
