"""torch.func and forward-mode AD for every declared op, from its declared derivatives:
vmap (a batching rule, no fallback), grad, jacrev, hessian, jvp, dual tensors; compared
with the same transform of the op's torch reference."""

from __future__ import annotations

import warnings

import pytest
import torch


def inputs_of(op, device, shape=(6,)):
    return op.sample(shape, torch.float64, device)


def tensors_only(function, op):
    """function of the op's tensors alone, its scalars at their sample values."""
    return lambda *x: function(*x, *op.scalars)


def first_input_only(function, op, rest):
    return lambda x: function(x, *rest, *op.scalars)


def assert_as_declared(op, got, want):
    """got equals want as the op's declaration says: bit for bit, or within its tolerance
    (GELU's exp form differs from torch's tanh form in the last bits, most near zero)."""
    from cuda_ext_example import op_checks

    problem = op_checks.difference(op.declaration, (got,), (want,))
    assert problem is None, f"{op.__name__}: {problem}"


def test_jvp_gives_the_reference_tangent(diff_op, device):
    primals = inputs_of(diff_op, device)
    tangents = inputs_of(diff_op, device)
    op, ref = tensors_only(diff_op, diff_op), tensors_only(diff_op.reference, diff_op)
    out, tangent = torch.func.jvp(op, tuple(primals), tuple(tangents))
    want_out, want_tangent = torch.func.jvp(ref, tuple(primals), tuple(tangents))
    assert torch.allclose(out, want_out)
    assert torch.allclose(tangent, want_tangent)
    assert tangent.abs().sum() > 0  # not the silent zero tangent of a missing rule


def test_grad_jacrev_and_hessian(diff_op, device):
    primals = inputs_of(diff_op, device)
    argnums = tuple(range(diff_op.arity))
    op, reference = tensors_only(diff_op, diff_op), tensors_only(diff_op.reference, diff_op)
    grads = torch.func.grad(lambda *x: op(*x).sum(), argnums=argnums)(*primals)
    want = torch.func.grad(lambda *x: reference(*x).sum(), argnums=argnums)(*primals)
    for got, expected in zip(grads, want, strict=True):
        assert torch.allclose(got, expected)
    assert torch.allclose(torch.func.jacrev(op)(*primals), torch.func.jacrev(reference)(*primals))
    f = first_input_only(diff_op, diff_op, primals[1:])
    ref = first_input_only(diff_op.reference, diff_op, primals[1:])
    assert torch.allclose(
        torch.func.hessian(lambda x: f(x).sum())(primals[0]),
        torch.func.hessian(lambda x: ref(x).sum())(primals[0]),
    )


@pytest.mark.parametrize("raw", [False, True], ids=["python", "torch.ops"])
def test_vmap_has_a_batching_rule(functional_op, device, raw):
    op = functional_op
    fn = getattr(torch.ops.cuda_ext_example, op.__name__) if raw else op
    fn, reference = tensors_only(fn, op), tensors_only(op.reference, op)
    batched = op.sample((3, 5), torch.float32, device)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch's "performance drop" fallback warning
        out = torch.func.vmap(fn)(*batched)
        # batch dimension 1 of the first input; the others not batched
        mixed = [batched[0].t()] + [b[0] for b in batched[1:]]
        in_dims = (1,) + (None,) * (op.arity - 1)
        out_mixed = torch.func.vmap(fn, in_dims=in_dims)(*mixed)
        # inputs of other ranks that broadcast: (3, 4, 1) batched over 3, with (5,)
        if op.arity > 1:
            ranked = [op.sample((3, 4, 1), torch.float32, device)[0]]
            ranked += [t[0] for t in op.sample((5,), torch.float32, device)[1:]]
            dims = (0,) + (None,) * (op.arity - 1)
            out_ranked = torch.func.vmap(fn, in_dims=dims)(*ranked)
            want = torch.stack([reference(r, *ranked[1:]) for r in ranked[0]])
            assert_as_declared(op, out_ranked, want)
    assert_as_declared(op, out, reference(*batched))
    assert_as_declared(op, out_mixed, torch.func.vmap(reference, in_dims=in_dims)(*mixed))


def test_vmap_over_an_in_place_op_is_refused(device):
    from conftest import DECLARED

    op = DECLARED["my_adamw_step"]
    tensors = [t.view(2, 3) for t in op.sample((6,), torch.float32, device)]
    with pytest.raises(RuntimeError, match="my_adamw_step: vmap over an op that updates"):
        torch.func.vmap(tensors_only(op, op))(*tensors)


def test_forward_mode_ad_with_dual_tensors(diff_op, device):
    import torch.autograd.forward_ad as fwAD

    primals, tangents = inputs_of(diff_op, device), inputs_of(diff_op, device)
    with fwAD.dual_level():
        duals = [fwAD.make_dual(p, t) for p, t in zip(primals, tangents, strict=True)]
        got = fwAD.unpack_dual(diff_op(*duals, *diff_op.scalars)).tangent
        want = fwAD.unpack_dual(diff_op.reference(*duals, *diff_op.scalars)).tangent
    assert torch.allclose(got, want)


def test_gradcheck_and_gradgradcheck(diff_op, device):
    primals = tuple(p.requires_grad_() for p in inputs_of(diff_op, device, (4,)))
    if diff_op.__name__ == "my_leaky_relu":  # away from the kink at 0, where it has none
        primals = tuple((p.detach() + 0.1 * p.detach().sign()).requires_grad_() for p in primals)
    op = tensors_only(diff_op, diff_op)
    assert torch.autograd.gradcheck(op, primals)
    assert torch.autograd.gradgradcheck(op, primals)


def test_the_raw_op_refuses_transforms_it_cannot_do(diff_op, device):
    """torch.ops.<op> under grad/jvp would get no tangent (torch.func cannot see an
    autograd.Function below the dispatcher): a clear error naming the Python function."""
    raw = tensors_only(getattr(torch.ops.cuda_ext_example, diff_op.__name__), diff_op)
    primals = tuple(inputs_of(diff_op, device))
    message = rf"need the Python function cuda_ext_example\.{diff_op.__name__}"
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
