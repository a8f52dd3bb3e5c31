"""my_adamw_step: what its declaration cannot say. The declared-op tests already run one
step against torch.optim.AdamW(fused=True) for every dtype, size, offset and layout."""

import pytest
import torch

import cuda_ext_example


@pytest.mark.parametrize("options", [{}, {"maximize": True}, {"weight_decay": 0.0}], ids=str)
def test_a_training_loop_follows_torchs_adamw(device, options):
    # Ten steps on one parameter, each with a new gradient, against torch's own optimizer
    # (fused where this torch fuses on the device, its default otherwise).
    torch.manual_seed(0)
    start = torch.randn(1000, device=device)
    weight = torch.nn.Parameter(start.clone())
    hyper = {"lr": 1e-2, "betas": (0.9, 0.99), "eps": 1e-8, "weight_decay": 0.1, **options}
    optimizer = torch.optim.AdamW([weight], **hyper, fused=True)
    param, exp_avg, exp_avg_sq = start.clone(), torch.zeros_like(start), torch.zeros_like(start)
    for step in range(1, 11):
        grad = torch.randn_like(start)
        weight.grad = grad.clone()
        optimizer.step()
        cuda_ext_example.my_adamw_step(
            param, exp_avg, exp_avg_sq, grad, hyper["lr"], step, *hyper["betas"], hyper["eps"],
            hyper["weight_decay"], hyper.get("maximize", False),
        )  # fmt: skip
    state = optimizer.state[weight]
    torch.testing.assert_close(param, weight.detach(), rtol=5e-5, atol=1e-5)
    torch.testing.assert_close(exp_avg, state["exp_avg"], rtol=5e-5, atol=1e-6)
    torch.testing.assert_close(exp_avg_sq, state["exp_avg_sq"], rtol=5e-5, atol=1e-7)
    assert not torch.equal(param, start)


def test_returns_nothing_and_updates_in_place(device):
    param, exp_avg, exp_avg_sq, grad = (torch.ones(8, device=device) for _ in range(4))
    pointers = [t.data_ptr() for t in (param, exp_avg, exp_avg_sq)]
    assert cuda_ext_example.my_adamw_step(param, exp_avg, exp_avg_sq, grad, 0.1, 1) is None
    assert [t.data_ptr() for t in (param, exp_avg, exp_avg_sq)] == pointers
    assert torch.allclose(exp_avg, torch.full_like(exp_avg, 0.9 + 0.1))
