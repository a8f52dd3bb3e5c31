"""The square workload, as the GPU MODE lecture measures a square: my_square against
torch.square, torch.compile of torch.square and the lecture's row-wise Triton kernel, on a
(4096, N) matrix for N = 2^7..2^15 columns."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from . import report
from .report import Record, Target
from .workload import Workload

ROWS = 4096  # the lecture's matrix height
JUDGED = "my_square"
TARGET_RATIO = 1.00


def implementations(compile_dynamic: bool, max_shapes: int) -> dict[str, Callable]:
    import torch

    import cuda_ext_example

    from .timing import compiled
    from .triton_square import triton_square

    return {
        "torch.square": torch.square,
        "torch.compile": compiled(torch.square, compile_dynamic, max_shapes),
        "triton": triton_square,
        JUDGED: cuda_ext_example.my_square,
    }


def targets(records: Sequence[Record], roofline_gbps: float) -> list[Target]:
    """my_square against the best peer at every N and dtype measured."""
    ratios, spreads = report.judged_vs_best_peer(
        records, roofline_gbps, WORKLOAD, lambda r: f"{r.dtype} N={report.size_label(r.size)}"
    )
    name = f"GB/s >= {TARGET_RATIO:.2f}x best of {', '.join(WORKLOAD.peers)} at every N measured"
    return [report.cell_target(name, ratios, TARGET_RATIO, spreads)]


WORKLOAD = Workload(
    name="square",
    peers=("torch.square", "torch.compile", "triton"),
    ours=(JUDGED,),
    input_shapes=lambda n: [(ROWS, n)],
    about=f"A ({ROWS}, N) matrix squared (x read, out written): GB/s = 2 * {ROWS} * N * "
    "element_size / time.",
    size_name="N",
    sizes="7-15",
    quick_sizes="7,11,15",
    max_log2=16,  # the Triton kernel holds a whole row in one block
    dtypes=("float32",),
    implementations=implementations,
    targets=targets,
)
