"""torch's own fused AdamW update of one parameter: the reference of my_adamw_step."""

import torch


def fused_adamw_step(
    param, exp_avg, exp_avg_sq, grad, lr, step, beta1, beta2, eps, weight_decay, maximize
):
    """torch.optim.AdamW(fused=True).step() for `param` at step `step` (1 for the first),
    updating param, exp_avg and exp_avg_sq in place as my_adamw_step does."""
    weight = torch.nn.Parameter(param.detach().clone())
    weight.grad = grad.detach().clone()
    optimizer = torch.optim.AdamW(
        [weight],
        lr=lr,
        betas=(beta1, beta2),
        eps=eps,
        weight_decay=weight_decay,
        maximize=maximize,
        fused=True,
    )
    # The optimizer's state before this step: the moments, and the steps taken so far.
    optimizer.state[weight] = {
        "step": torch.tensor(float(step - 1), dtype=torch.float32, device=param.device),
        "exp_avg": exp_avg,
        "exp_avg_sq": exp_avg_sq,
    }
    optimizer.step()
    with torch.no_grad():
        param.copy_(weight)
