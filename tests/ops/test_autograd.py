"""The core's autograd, tested once: a backward that builds a graph (create_graph) takes the
Python functions and equals the plain one, the outputs are saved only where the backward
names them, and the ops with their own kernels on a second GPU."""

from __future__ import annotations

import pytest
import torch
from conftest import DECLARED

import cuda_ext_example
from cuda_ext_example import op_checks


def leaves(args: list) -> list:
    """The arguments with each tensor a fresh leaf that requires grad."""
    return [a.detach().clone().requires_grad_() if isinstance(a, torch.Tensor) else a for a in args]


@pytest.mark.parametrize("name", ["my_rms_norm", "my_gelu"])
def test_a_backward_with_create_graph_is_recorded_and_equals_the_plain_one(name, device):
    # A plain backward runs its ops below autograd; one that builds a graph (create_graph)
    # must take the Python functions, so that its own gradient is taken or refused.
    op = DECLARED[name]
    args = op.arguments(9, torch.float64, device)
    inputs = leaves(args)
    wrt = [a for a in inputs if isinstance(a, torch.Tensor)]
    out = op(*inputs)
    # The output's gradient needs one too: a linear op's gradients depend on it alone.
    grad = torch.randn_like(out).requires_grad_()
    plain = torch.autograd.grad(out, wrt, grad.detach(), retain_graph=True)
    recorded = torch.autograd.grad(out, wrt, grad, create_graph=True)
    assert not any(g.requires_grad for g in plain)
    assert all(g.requires_grad for g in recorded)
    for ours, theirs in zip(recorded, plain, strict=True):
        torch.testing.assert_close(ours, theirs, rtol=0, atol=0)
    try:
        second = torch.autograd.grad(recorded[0].sum(), [*wrt, grad], allow_unused=True)
    except RuntimeError as error:  # an op the backward calls declares no backward itself
        assert "has no derivative" in str(error)
    else:
        assert any(g is not None for g in second)


class SavingContext:
    """What an autograd.Function's ctx gives Autograd."""

    needs_input_grad = (True, True)

    def save_for_backward(self, *tensors):
        self.saved_tensors = tensors


@pytest.mark.parametrize(("backward", "saved"), [("(grad * out * alpha,)", 2),
                                                  ("(grad * alpha * 2 * x,)", 1)])  # fmt: skip
def test_the_backward_saves_the_output_only_where_it_names_it(backward, saved):
    op = {
        "name": "scale",
        "folder": "none",
        "arguments": [
            {"name": "x", "type": "Tensor", "default": None, "mutable": False, "number": False},
            {"name": "alpha", "type": "float", "default": 3.0, "mutable": False, "number": False},
        ],
        "outputs": ["out"],
        "backward": backward,
        "jvp": None,
    }
    autograd = cuda_ext_example.ops.Autograd(op, "test_only", {}, {})
    x = torch.rand(5, dtype=torch.float64) + 1
    out = x * x
    ctx = SavingContext()
    autograd.setup_context(ctx, (x,), out)
    assert len(ctx.saved_tensors) == saved
    grads = autograd.backward(ctx, torch.ones_like(out))
    assert len(grads) == 2 and grads[1] is None
    expected = 2 * 3.0 * x if saved == 1 else 3.0 * out  # out = x * x, alpha = 3
    torch.testing.assert_close(grads[0], expected)


def test_a_backward_that_gives_too_few_gradients_says_so():
    op = {
        "name": "pair",
        "folder": "none",
        "arguments": [
            {"name": n, "type": "Tensor", "default": None, "mutable": False, "number": False}
            for n in ("x", "y")
        ],
        "outputs": ["out"],
        "backward": "(grad,)",
        "jvp": None,
    }
    autograd = cuda_ext_example.ops.Autograd(op, "test_only", {}, {})
    ctx = SavingContext()
    x = torch.ones(2)
    autograd.setup_context(ctx, (x, x), x)
    with pytest.raises(RuntimeError, match=r"pair: its backward gave 1 gradients for the 2"):
        autograd.backward(ctx, x)


@pytest.mark.gpu
@pytest.mark.multigpu
@pytest.mark.parametrize("n", [300, 8192])
@pytest.mark.parametrize("name", ["my_rms_norm", "my_rms_norm_backward"])
def test_own_kernels_on_the_second_gpu_while_the_first_is_current(name, n):
    # Each GPU resolves its own kernels and answers its own occupancy (the backward's grid):
    # cuda:0 first, then cuda:1 with cuda:0 still current, each against the CPU reference.
    torch.cuda.set_device(0)
    op = DECLARED[name]
    for device in ("cuda:0", "cuda:1"):
        for dtype in op.dtypes:
            problem = op_checks.check_one(cuda_ext_example, name, device, dtype, n, "cpu")
            assert problem is None, f"{device} {dtype} n={n}: {problem}"
    out = op(*op.arguments(n, op.dtypes[0], "cuda:1"))
    assert all(
        o.device == torch.device("cuda:1") for o in (out if isinstance(out, tuple) else (out,))
    )
    assert torch.cuda.current_device() == 0
