"""torch.func and forward-mode AD for every declared op, from its declared derivatives:
vmap (a batching rule, no fallback), grad, jacrev, hessian, jvp, dual tensors; compared
with the same transform of the op's torch reference."""

from __future__ import annotations

import warnings

import pytest
import torch

from tests.helpers import random_tensor


def inputs_of(op, device, shape=(6,)):
    return [random_tensor(shape, torch.float64, device) for _ in range(op.arity)]


def first_input_only(op, rest):
    return lambda x: op(x, *rest)


def test_jvp_gives_the_reference_tangent(any_op, device):
    primals = inputs_of(any_op, device)
    tangents = inputs_of(any_op, device)
    out, tangent = torch.func.jvp(any_op, tuple(primals), tuple(tangents))
    want_out, want_tangent = torch.func.jvp(any_op.reference, tuple(primals), tuple(tangents))
    assert torch.equal(out, want_out)
    assert torch.allclose(tangent, want_tangent)
    assert tangent.abs().sum() > 0  # not the silent zero tangent of a missing rule


def test_grad_jacrev_and_hessian(any_op, device):
    primals = inputs_of(any_op, device)
    argnums = tuple(range(any_op.arity))
    grads = torch.func.grad(lambda *x: any_op(*x).sum(), argnums=argnums)(*primals)
    want = torch.func.grad(lambda *x: any_op.reference(*x).sum(), argnums=argnums)(*primals)
    for got, expected in zip(grads, want, strict=True):
        assert torch.allclose(got, expected)
    assert torch.allclose(
        torch.func.jacrev(any_op)(*primals), torch.func.jacrev(any_op.reference)(*primals)
    )
    f = first_input_only(any_op, primals[1:])
    ref = first_input_only(any_op.reference, primals[1:])
    assert torch.allclose(
        torch.func.hessian(lambda x: f(x).sum())(primals[0]),
        torch.func.hessian(lambda x: ref(x).sum())(primals[0]),
    )


@pytest.mark.parametrize("raw", [False, True], ids=["python", "torch.ops"])
def test_vmap_has_a_batching_rule(any_op, device, raw):
    fn = getattr(torch.ops.cuda_ext_example, any_op.__name__) if raw else any_op
    batched = [random_tensor((3, 5), torch.float32, device) for _ in range(any_op.arity)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch's "performance drop" fallback warning
        out = torch.func.vmap(fn)(*batched)
        # batch dimension 1 of the first input; the others not batched
        mixed = [batched[0].t()] + [b[0] for b in batched[1:]]
        in_dims = (1,) + (None,) * (any_op.arity - 1)
        out_mixed = torch.func.vmap(fn, in_dims=in_dims)(*mixed)
    assert torch.equal(out, any_op.reference(*batched))
    assert torch.equal(out_mixed, torch.func.vmap(any_op.reference, in_dims=in_dims)(*mixed))


def test_forward_mode_ad_with_dual_tensors(any_op, device):
    import torch.autograd.forward_ad as fwAD

    primals, tangents = inputs_of(any_op, device), inputs_of(any_op, device)
    with fwAD.dual_level():
        duals = [fwAD.make_dual(p, t) for p, t in zip(primals, tangents, strict=True)]
        got = fwAD.unpack_dual(any_op(*duals)).tangent
        want = fwAD.unpack_dual(any_op.reference(*duals)).tangent
    assert torch.allclose(got, want)


def test_gradcheck_and_gradgradcheck(any_op, device):
    primals = tuple(p.requires_grad_() for p in inputs_of(any_op, device, (4,)))
    assert torch.autograd.gradcheck(any_op, primals)
    assert torch.autograd.gradgradcheck(any_op, primals)


def test_the_raw_op_refuses_transforms_it_cannot_do(any_op, device):
    """torch.ops.<op> under grad/jvp would get no tangent (torch.func cannot see an
    autograd.Function below the dispatcher): a clear error naming the Python function."""
    raw = getattr(torch.ops.cuda_ext_example, any_op.__name__)
    primals = tuple(inputs_of(any_op, device))
    message = rf"need the Python function cuda_ext_example\.{any_op.__name__}"
    with pytest.raises(RuntimeError, match=message):
        torch.func.jvp(raw, primals, primals)
    with pytest.raises(RuntimeError, match=message):
        torch.func.grad(lambda *x: raw(*x).sum())(*primals)


def test_an_op_declared_without_derivatives_refuses_to_be_differentiated():
    """An ops.toml without [derivatives]: the op runs, and differentiating it raises,
    naming the op (the autograd kernel of such a declaration, over my_add's op)."""
    import cuda_ext_example

    op = {**cuda_ext_example.ops.DECLARATIONS["my_add"], "derivatives": None}
    overload = torch.ops.cuda_ext_example.my_add.default
    kernel = cuda_ext_example.ops.make_autograd_kernel(op, overload, "cuda_ext_example")
    a, b = torch.randn(4), torch.randn(4)
    assert torch.equal(kernel(a, b), torch.add(a, b))
    with pytest.raises(RuntimeError, match=r"my_add: has no derivative \(its ops.toml"):
        kernel(a.requires_grad_(), b)
