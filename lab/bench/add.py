"""The add workload: my_add and my_fast_add against torch.add, torch.compile of torch.add and a
plain Triton kernel, on 1-D tensors of 2^12..2^28 elements; and the host time per call at
n=1024, where a launch costs more than the kernel."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence

from . import report
from .report import COPY, MISS, NA, PASS, Record, Row, Target
from .timing import Settings
from .workload import Extra, Workload

JUDGED = "my_fast_add"
TARGET_DTYPES = ("float32", "bfloat16")
PEER_TARGET_LOG2 = range(20, 29)
PEER_TARGET_RATIO = 1.00
EAGER_TARGET_LOG2 = range(20, 25)
EAGER_TARGET_RATIO = 1.05
COPY_TARGET_LOG2 = range(20, 29)
COPY_TARGET_RATIO = 0.99
ROOFLINE_TARGET_LOG2 = 28
ROOFLINE_TARGET_DTYPE = "float32"
ROOFLINE_TARGET_FRACTION = 0.98
HOST_N = 1024  # launch-bound: the kernel takes less time than the call's host side
# The Python function against torch.add, and below every other route to a custom kernel.
HOST_TARGET_RATIO = 1.5
HOST_OTHER_ROUTES = ("triton", "torch.compile")
# Reported beside it: the same function as a torch without fast_path's private checks gets
# it, and the op through torch.ops.
PUBLIC_ROUTE = "my_fast_add, public route"
COLDSTART_TARGET_MS = 0.5  # first call of ours over torch's first new kernel


def implementations(compile_dynamic: bool, max_shapes: int) -> dict[str, Callable]:
    import torch

    import cuda_ext_example

    from .timing import compiled
    from .triton_add import triton_add

    return {
        "torch.add": torch.add,
        "torch.compile": compiled(torch.add, compile_dynamic, max_shapes),
        "triton": triton_add,
        "my_add": cuda_ext_example.my_add,
        "my_fast_add": cuda_ext_example.my_fast_add,
    }


# --------------------------------------------------------------------------- cell targets


def targets(records: Sequence[Record], roofline_gbps: float) -> list[Target]:
    """my_fast_add against the best peer, torch.add and the size-matched copy, per cell, and
    against the copy roofline at the largest size."""
    cells = report.index(report.annotate(records, roofline_gbps, WORKLOAD))
    best = report.best_peer(records, WORKLOAD.peers)

    def record_of(impl: str) -> Callable[[int, str], Record | None]:
        def record(size: int, dtype: str) -> Record | None:
            row = cells.get((size, dtype, impl))
            return row.record if row else None

        return record

    def judged(name: str, log2_sizes: range, threshold: float, ratio, other) -> Target:
        """A cell target over TARGET_DTYPES x log2_sizes: ratio(ours, size, dtype) is the
        cell's ratio (None: not measured, inf: not judged), other(size, dtype) the record
        the ratio is taken against (for its spread)."""
        ratios, spreads = {}, {}
        for dtype in TARGET_DTYPES:
            for k in log2_sizes:
                label, ours = f"{dtype} 2^{k}", cells.get((2**k, dtype, JUDGED))
                ratios[label] = ratio(ours, 2**k, dtype) if ours else None
                theirs = other(2**k, dtype)
                if ours and theirs:
                    spreads[label] = report.ratio_spread_pct(ours.record, theirs)
        ratios = {label: r for label, r in ratios.items() if r != math.inf}
        first, last = log2_sizes[0], log2_sizes[-1]
        name = f"{name} 2^{first}..2^{last}, {' and '.join(TARGET_DTYPES)}"
        return report.cell_target(name, ratios, threshold, spreads)

    def vs_torch_add(ours: Row, size: int, dtype: str) -> float | None:
        eager = record_of("torch.add")(size, dtype)
        return ours.record.gbps / eager.gbps if eager else None

    def vs_copy(ours: Row, size: int, dtype: str) -> float | None:
        copy, eager = record_of(COPY)(size, dtype), record_of("torch.add")(size, dtype)
        if not copy or not eager or copy.gbps <= eager.gbps:
            return math.inf  # the copy is no faster than torch.add here: nothing to meet
        return ours.record.gbps / copy.gbps

    return [
        judged(
            f"GB/s >= {PEER_TARGET_RATIO:.2f}x best peer at every size",
            PEER_TARGET_LOG2,
            PEER_TARGET_RATIO,
            lambda ours, size, dtype: ours.ratio_best_peer,
            lambda size, dtype: best.get((size, dtype)),
        ),
        judged(
            f"GB/s >= {EAGER_TARGET_RATIO:.2f}x torch.add at",
            EAGER_TARGET_LOG2,
            EAGER_TARGET_RATIO,
            vs_torch_add,
            record_of("torch.add"),
        ),
        judged(
            f"GB/s >= {COPY_TARGET_RATIO:.2f}x the size-matched copy where the copy beats "
            "torch.add,",
            COPY_TARGET_LOG2,
            COPY_TARGET_RATIO,
            vs_copy,
            record_of(COPY),
        ),
        roofline_target(cells, roofline_gbps),
    ]


def roofline_target(cells: dict[tuple[int, str, str], Row], roofline_gbps: float) -> Target:
    k, dtype = ROOFLINE_TARGET_LOG2, ROOFLINE_TARGET_DTYPE
    name = f"GB/s at 2^{k} {dtype} >= {ROOFLINE_TARGET_FRACTION:.0%} of the copy roofline"
    row = cells.get((2**k, dtype, JUDGED))
    if row is None:
        return Target(name, NA, "not measured in this run")
    fraction = row.record.gbps / roofline_gbps
    status = PASS if fraction >= ROOFLINE_TARGET_FRACTION else MISS
    return Target(
        name, status, f"{row.record.gbps:.1f} GB/s = {fraction:.1%} of {roofline_gbps:.1f} GB/s"
    )


# --------------------------------------------------------------------------- host time


def host_target(host_us: dict[str, float]) -> Target:
    name = (
        f"host us/call (n={HOST_N} float32) <= {HOST_TARGET_RATIO:.2f}x torch.add and below "
        f"{' and '.join(HOST_OTHER_ROUTES)}"
    )
    ours, eager = host_us.get(JUDGED), host_us.get("torch.add")
    if ours is None or eager is None or any(o not in host_us for o in HOST_OTHER_ROUTES):
        return Target(name, NA, "not measured in this run")
    ratio = ours / eager
    below = all(ours < host_us[o] for o in HOST_OTHER_ROUTES)
    status = PASS if ratio <= HOST_TARGET_RATIO and below else MISS
    versus = ", ".join(f"{o} {host_us[o]:.2f} us" for o in HOST_OTHER_ROUTES)
    return Target(name, status, f"{ours:.2f} us vs {eager:.2f} us = {ratio:.3f}x; {versus}")


def coldstart_target(ours_ms: float | None, torch_ms: float | None) -> Target:
    name = f"first call of a process <= {COLDSTART_TARGET_MS} ms over torch's first new kernel"
    if ours_ms is None or torch_ms is None:
        return Target(name, NA, "not measured in this run")
    over = ours_ms - torch_ms
    status = PASS if over <= COLDSTART_TARGET_MS else MISS
    return Target(name, status, f"{ours_ms:.2f} ms vs {torch_ms:.2f} ms = {over:+.2f} ms")


def host_text(host_us: dict[str, float]) -> str:
    base = host_us.get("torch.add")
    lines = [f"Host time per call, n={HOST_N} float32 (launch-bound):"]
    for impl, us in host_us.items():
        vs = f"  ({us / base:.2f}x torch.add)" if base else ""
        lines.append(f"  {impl:<40} {us:8.2f} us/call{vs}")
    return "\n".join(lines)


def host_markdown(host_us: dict[str, float], calls: int, repeats: int) -> list[str]:
    base = host_us.get("torch.add")
    out = [
        "",
        f"## Host time per call (n={HOST_N} float32, launch-bound)",
        "",
        "Back-to-back calls timed with `time.perf_counter` up to a final "
        f"`torch.cuda.synchronize()`, best of {repeats} interleaved rounds of {calls} calls: the "
        "host-side cost of a call, which is what a tiny add costs the caller.",
        "",
        "| impl | us/call | vs torch.add |",
        "|---|---:|---:|",
    ]
    for impl, us in host_us.items():
        out.append(f"| {impl} | {us:.2f} | {f'{us / base:.2f}x' if base else '-'} |")
    return out


def time_host_calls(fn: Callable, a, b, calls: int) -> float:
    """us per call of `calls` back-to-back calls, up to one final synchronize. The GPU keeps up
    with launch-bound calls, so the wall-clock time is the host side of a call: the one thing
    a host clock is right for here."""
    import torch

    sync = torch.cuda.synchronize if a.is_cuda else (lambda: None)
    sync()
    start = time.perf_counter()
    for _ in range(calls):
        fn(a, b)
    sync()
    return (time.perf_counter() - start) / calls * 1e6


def best_host_times(impls: dict[str, Callable], a, b, calls: int, repeats: int) -> dict:
    """name -> host us/call of fn(a, b): the best of `repeats` interleaved rounds. Interleaved,
    because a machine's host speed drifts over minutes; the best, because host-side noise only
    ever adds time."""
    for fn in impls.values():  # warm up: compile, allocator, caches
        time_host_calls(fn, a, b, 50)
    best = {name: float("inf") for name in impls}
    for _ in range(repeats):
        for name, fn in impls.items():
            best[name] = min(best[name], time_host_calls(fn, a, b, calls))
    return best


def first_call_ms() -> tuple[float | None, float | None]:
    """(the slowest first call of our ops, torch's first new kernel) of a fresh process, in
    ms: medians over lab/gpu/coldstart.py's fresh processes."""
    from lab.gpu.coldstart import BASELINE, measure

    rows = measure(repeats=5)
    ours = [v for k, v in rows.items() if k.startswith("first ") and "torch" not in k]
    base = rows.get(BASELINE)
    return (max(ours) * 1e3 if ours else None), (base * 1e3 if base is not None else None)


def host_costs(settings: Settings) -> Extra:
    import torch

    from cuda_ext_example.ops import public_route

    from .timing import check_outputs, random_tensor

    calls, repeats = (500, 3) if settings.quick else (2000, 7)
    impls = implementations(settings.compile_dynamic, max_shapes=1)
    impls[PUBLIC_ROUTE] = public_route(JUDGED)
    impls[f"torch.ops.cuda_ext_example.{JUDGED}"] = getattr(torch.ops.cuda_ext_example, JUDGED)
    a, b = random_tensor((HOST_N,), "float32"), random_tensor((HOST_N,), "float32")
    check_outputs(impls, (a, b), "torch.add", f"n={HOST_N} float32")
    host_us = best_host_times(impls, a, b, calls, repeats)
    found = [host_target(host_us)]
    if not settings.quick:  # fresh processes take a minute
        found.append(coldstart_target(*first_call_ms()))
    return Extra(found, host_markdown(host_us, calls, repeats), host_text(host_us))


WORKLOAD = Workload(
    name="add",
    peers=("torch.add", "torch.compile", "triton"),
    ours=("my_add", JUDGED),
    input_shapes=lambda n: [(n,), (n,)],
    about="Two 1-D tensors of n elements added (a, b read, out written): GB/s = 3 * n * "
    "element_size / time.",
    size_name="elements",
    sizes="12-28",
    quick_sizes="12,16,20,24,28",
    max_log2=30,
    dtypes=tuple(report.DTYPE_BYTES),
    implementations=implementations,
    targets=targets,
    extra=host_costs,
)
