"""The RMSNorm workloads: my_rms_norm over the last dimension at LLM shapes (rows 4096, 16384,
65536 x hidden 1024 .. 16384), forward (`rms_norm`) and forward + backward (`rms_norm_train`),
against torch's F.rms_norm, torch.compile of it, and, where installed, Liger's Triton kernel
(liger-kernel) and quack's CuTe DSL kernel (quack-kernels). Every implementation must agree
with torch's within the tolerance below before it is timed."""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable, Sequence

from . import report
from .report import COPY, Record, Target
from .workload import Workload

JUDGED = "my_rms_norm"
EPS = 1e-6
ROWS = (4096, 16384, 65536)
HIDDEN = (1024, 2048, 4096, 8192, 16384)
PEERS = ("torch rms_norm", "torch.compile", "liger", "quack")
COLUMN_BITS = 20  # a case is rows << COLUMN_BITS | hidden


def case(rows: int, hidden: int) -> int:
    return rows << COLUMN_BITS | hidden


def shape_of(code: int) -> tuple[int, int]:
    return code >> COLUMN_BITS, code & ((1 << COLUMN_BITS) - 1)


CASES = tuple(case(r, h) for r in ROWS for h in HIDDEN)
QUICK_CASES = (case(4096, 4096), case(16384, 8192), case(65536, 2048))


def _peers() -> dict[str, Callable]:
    """fn(x, weight) of every peer installed here; those missing are said on stderr."""
    import torch

    from .timing import compiled

    def torch_rms_norm(x, weight):
        return torch.nn.functional.rms_norm(x, (x.shape[-1],), weight, EPS)

    found = {"torch rms_norm": torch_rms_norm, "torch.compile": torch_rms_norm}
    try:
        from liger_kernel.ops.rms_norm import LigerRMSNormFunction

        # in_place=False: its default writes dx over the gradient, which every implementation reads.
        found["liger"] = lambda x, weight: LigerRMSNormFunction.apply(
            x, weight, EPS, 0.0, "llama", False
        )
    except ImportError as exc:
        print(f"rms_norm: liger-kernel not installed here ({exc}): not measured", file=sys.stderr)
    try:
        from quack import rmsnorm

        found["quack"] = lambda x, weight: rmsnorm(x, weight, eps=EPS)
    except ImportError as exc:
        print(f"rms_norm: quack-kernels not installed here ({exc}): not measured", file=sys.stderr)
    found["torch.compile"] = compiled(torch_rms_norm, False, len(CASES) + 1)
    return found


def _with_ours(peers: dict[str, Callable]) -> dict[str, Callable]:
    import cuda_ext_example

    return {**peers, JUDGED: lambda x, weight: cuda_ext_example.my_rms_norm(x, weight, EPS)}


def forward_implementations(compile_dynamic: bool, max_shapes: int) -> dict[str, Callable]:
    return _with_ours(_peers())


def train_implementations(compile_dynamic: bool, max_shapes: int) -> dict[str, Callable]:
    """fn(x, weight, grad) -> (dx, dweight): the forward, then the backward of every
    implementation, through autograd."""
    import torch

    def trained(forward: Callable) -> Callable:
        def step(x, weight, grad):
            y = forward(x, weight)
            return torch.autograd.grad(y, (x, weight), grad)

        return step

    return {name: trained(fn) for name, fn in _with_ours(_peers()).items()}


def _needs_grad(tensors: list) -> list:
    x, weight, grad = tensors
    return [x.requires_grad_(), weight.requires_grad_(), grad]


def _targets(copy_target: bool) -> Callable[[Sequence[Record], float], list[Target]]:
    def targets(records: Sequence[Record], roofline_gbps: float) -> list[Target]:
        workload = FORWARD if copy_target else TRAIN
        ratios, spreads = report.judged_vs_best_peer(
            records, roofline_gbps, workload, lambda r: _cell(r.dtype, r.size)
        )
        # Every shape in every dtype: a partial run (--sizes, --dtypes, --quick) judges none.
        ratios = {**dict.fromkeys(_cells(workload)), **ratios}
        measured = [v for v in ratios.values() if v is not None]
        median = statistics.median(measured) if measured else None
        partial = len(measured) < len(ratios)
        if median is None:
            median_status, median_said = report.NA, "not measured"
        elif partial:
            median_status = report.NA
            median_said = f"median {median:.3f}x over the {len(measured)} of {len(ratios)} "
            median_said += "shapes measured (a partial run)"
        else:
            median_status = report.PASS if median >= 1.0 else report.MISS
            median_said = f"median {median:.3f}x"
        out = [
            Target(
                f"median over shapes >= 1.00x best of {', '.join(PEERS)}",
                median_status,
                median_said,
            ),
            report.cell_target(
                f"every shape >= 0.95x best of {', '.join(PEERS)}", ratios, 0.95, spreads
            ),
        ]
        if copy_target:
            out.append(_copy_target(records))
        return out

    return targets


def _cell(dtype: str, code: int) -> str:
    """How the targets name a cell: "bfloat16 4096x1024"."""
    return f"{dtype} {_label(code)}"


def _cells(workload: Workload, min_elements: int = 0) -> list[str]:
    """The cells of every shape a full run measures, in every dtype."""
    return [
        _cell(dtype, code)
        for dtype in workload.dtypes
        for code in workload.cases
        if shape_of(code)[0] * shape_of(code)[1] >= min_elements
    ]


def _copy_target(records: Sequence[Record]) -> Target:
    """The forward's GB/s >= 90% of the size-matched copy's at >= 2^26 elements."""
    cells: dict[str, float | None] = dict.fromkeys(_cells(FORWARD, 2**26))
    spreads = {}
    copies = {(r.size, r.dtype): r for r in records if r.impl == COPY}
    for r in records:
        rows, hidden = shape_of(r.size)
        if r.impl != JUDGED or rows * hidden < 2**26:
            continue
        label = _cell(r.dtype, r.size)
        copy = copies.get((r.size, r.dtype))
        cells[label] = r.gbps / copy.gbps if copy else None
        if copy:
            spreads[label] = report.ratio_spread_pct(r, copy)
    return report.cell_target(
        "forward >= 0.90x the size-matched copy at >= 2^26", cells, 0.9, spreads
    )


# Liger's and quack's own roundings (Liger rounds x * rstd to the dtype before dweight's sum).
TOLERANCE = {
    "float32": {"rtol": 1e-3, "atol": 1e-3},
    "bfloat16": {"rtol": 5e-2, "atol": 5e-2},
}
# dx, then dweight: a sum over up to 65536 rows of terms rounded in other ways, whose
# difference grows with sqrt(rows), so bfloat16's absolute tolerance is wide.
TRAIN_TOLERANCE = {
    "float32": [TOLERANCE["float32"], {"rtol": 1e-3, "atol": 1e-2}],
    "bfloat16": [TOLERANCE["bfloat16"], {"rtol": 5e-2, "atol": 4.0}],
}


def _label(code: int) -> str:
    rows, hidden = shape_of(code)
    return f"{rows}x{hidden}"


COMMON = dict(
    peers=PEERS,
    ours=(JUDGED,),
    size_name="rows x hidden",
    sizes="",
    quick_sizes="",
    max_log2=0,
    dtypes=("bfloat16", "float32"),
    peer_packages=("liger-kernel", "quack-kernels", "nvidia-cutlass-dsl"),
    cases=CASES,
    quick_cases=QUICK_CASES,
    case_label=_label,
)

FORWARD = Workload(
    name="rms_norm",
    input_shapes=lambda code: [shape_of(code), shape_of(code)[1:]],
    about="y = rms_norm(x, weight) over rows x hidden (x read, y written): "
    "GB/s = 2 * rows * hidden * element_size / time.",
    implementations=forward_implementations,
    targets=_targets(copy_target=True),
    traffic=2,
    tolerance=TOLERANCE,
    **COMMON,
)

TRAIN = Workload(
    name="rms_norm_train",
    input_shapes=lambda code: [shape_of(code), shape_of(code)[1:], shape_of(code)],
    about="the forward, then dx and dweight for a gradient of y (x read twice, y written, "
    "the gradient read, dx written): GB/s = 5 * rows * hidden * element_size / time.",
    implementations=train_implementations,
    targets=_targets(copy_target=False),
    traffic=5,
    tolerance=TRAIN_TOLERANCE,
    prepare=_needs_grad,
    **COMMON,
)
