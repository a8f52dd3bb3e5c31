"""The GELU workload: my_gelu (tanh approximation) against torch.nn.functional.gelu and
torch.compile of it, on 1-D tensors of 2^12..2^28 elements. A transcendental op: the
implementations agree within torch.testing's tolerance, not bit for bit."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

from . import report
from .report import Record, Target
from .workload import Workload

JUDGED = "my_gelu"
TARGET_LOG2 = range(20, 29)
TARGET_RATIO = 1.00


def implementations(compile_dynamic: bool, max_shapes: int) -> dict[str, Callable]:
    import torch

    import cuda_ext_example

    from .timing import compiled

    gelu = functools.partial(torch.nn.functional.gelu, approximate="tanh")
    return {
        "torch gelu": gelu,
        "torch.compile": compiled(gelu, compile_dynamic, max_shapes),
        JUDGED: cuda_ext_example.my_gelu,
    }


def targets(records: Sequence[Record], roofline_gbps: float) -> list[Target]:
    """my_gelu against the best peer from 2^20 elements on (below, a launch costs more than
    the kernel: the add workload's host-time table covers that)."""
    return [report.best_peer_target(records, roofline_gbps, WORKLOAD, TARGET_LOG2, TARGET_RATIO)]


WORKLOAD = Workload(
    name="gelu",
    peers=("torch gelu", "torch.compile"),
    ours=(JUDGED,),
    input_shapes=lambda n: [(n,)],
    about="gelu(x, approximate='tanh') of n elements (x read, out written): "
    "GB/s = 2 * n * element_size / time.",
    size_name="elements",
    sizes="12-28",
    quick_sizes="16,20,24,28",
    max_log2=30,
    dtypes=("float32", "bfloat16"),
    implementations=implementations,
    targets=targets,
    # torch.testing's defaults: tanh's last bits differ between implementations.
    tolerance={
        "float32": {"rtol": 1.3e-6, "atol": 1e-5},
        "bfloat16": {"rtol": 1.6e-2, "atol": 1e-5},
        "float16": {"rtol": 1e-3, "atol": 1e-5},
    },
)
