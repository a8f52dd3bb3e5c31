"""The AdamW workload: one optimizer step of one parameter tensor of 2^12..2^28 elements,
in place: my_adamw_step against torch.optim.AdamW(fused=True) (torch's fused CUDA kernel)
and AdamW(foreach=True) (torch's multi-tensor kernels). Each reads param, exp_avg,
exp_avg_sq and grad and writes the first three: 7 tensors of traffic per step."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from . import report
from .report import Record, Target
from .workload import Workload

JUDGED = "my_adamw_step"
TARGET_LOG2 = range(20, 29)
TARGET_RATIO = 1.00
HYPER = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2)


def torch_step(**kind) -> Callable:
    """fn(param, exp_avg, exp_avg_sq, grad): torch.optim.AdamW(**kind).step() on those
    tensors, returning them updated. The optimizer is made at the first call on a parameter
    tensor (the timing's warm-up) and kept for that tensor only."""
    import torch

    made: dict = {}

    def step(param, exp_avg, exp_avg_sq, grad):
        if made.get("param") is not param:
            weight = torch.nn.Parameter(param, requires_grad=True)  # shares param's memory
            weight.grad = grad
            optimizer = torch.optim.AdamW([weight], **HYPER, **kind)
            optimizer.state[weight] = {
                "step": torch.tensor(0.0, device=param.device),
                "exp_avg": exp_avg,
                "exp_avg_sq": exp_avg_sq,
            }
            made.clear()
            made.update(param=param, optimizer=optimizer)
        made["optimizer"].step()
        return param, exp_avg, exp_avg_sq

    return step


def implementations(compile_dynamic: bool, max_shapes: int) -> dict[str, Callable]:
    import cuda_ext_example

    lr, (beta1, beta2), eps, decay = (
        HYPER["lr"],
        HYPER["betas"],
        HYPER["eps"],
        HYPER["weight_decay"],
    )

    def ours(param, exp_avg, exp_avg_sq, grad):
        cuda_ext_example.my_adamw_step(
            param, exp_avg, exp_avg_sq, grad, lr, 1, beta1, beta2, eps, decay
        )
        return param, exp_avg, exp_avg_sq

    return {
        "torch fused": torch_step(fused=True),
        "torch foreach": torch_step(foreach=True),
        JUDGED: ours,
    }


def targets(records: Sequence[Record], roofline_gbps: float) -> list[Target]:
    """my_adamw_step against the best peer from 2^20 elements on."""
    return [report.best_peer_target(records, roofline_gbps, WORKLOAD, TARGET_LOG2, TARGET_RATIO)]


WORKLOAD = Workload(
    name="adamw",
    peers=("torch fused", "torch foreach"),
    ours=(JUDGED,),
    input_shapes=lambda n: [(n,)] * 4,
    about="One AdamW step of an n-element parameter in place (param, exp_avg, exp_avg_sq and "
    "grad read, the first three written): GB/s = 7 * n * element_size / time.",
    size_name="elements",
    sizes="12-28",
    quick_sizes="16,20,24,28",
    max_log2=29,
    dtypes=("float32", "bfloat16"),
    implementations=implementations,
    targets=targets,
    traffic=7,
    # exp_avg_sq is a running mean of squares: never negative.
    prepare=lambda tensors: [tensors[0], tensors[1], tensors[2].abs(), tensors[3]],
    # torch computes the scalars' products in double, ours in the compute type.
    tolerance={
        "float32": {"rtol": 5e-5, "atol": 1e-4},
        "bfloat16": {"rtol": 1.6e-2, "atol": 1e-2},
    },
)
