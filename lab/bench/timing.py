"""How the benchmark and the tuner time GPU work: triton.testing.do_bench (CUDA events around
each call, L2 flushed before each call), the implementations of a cell taking turns in one
do_bench, in rounds on fresh tensors. torch and triton are imported only inside the functions
that time things."""

from __future__ import annotations

import functools
import statistics
from collections.abc import Callable
from dataclasses import dataclass

DEVICE = "cuda"
COPY_BYTES = 2**30  # the roofline's buffer: 1 GiB, far larger than any L2

# How time_rounds times a cell, for the settings line of each report.
ROUND_ORDER = (
    "rounds, in each one do_bench over the implementations called in turn, forward then "
    "backward (so each runs at odd and at even calls)"
)


@dataclass(frozen=True)
class Settings:
    warmup_ms: int  # do_bench's warm-up and repetition budgets, in ms of GPU time
    rep_ms: int
    rounds: int = 5  # rounds per cell, each on fresh tensors; the median is reported
    compile_dynamic: bool = False  # torch.compile once with dynamic shapes, not once per size
    quick: bool = False  # a smoke run: fewer sizes, rounds and calls


def measure_roofline_gbps(settings: Settings) -> float:
    """Device-to-device copy bandwidth: 1 GiB read + 1 GiB written."""
    import torch
    from triton.testing import do_bench

    src = torch.empty(COPY_BYTES, dtype=torch.uint8, device=DEVICE).random_(0, 256)
    dst = torch.empty_like(src)
    ms = do_bench(
        functools.partial(dst.copy_, src),
        warmup=settings.warmup_ms,
        rep=settings.rep_ms,
        return_mode="median",
    )
    del src, dst
    torch.cuda.empty_cache()
    return 2 * COPY_BYTES / (ms * 1e-3) / 1e9


def compiled(fn: Callable, dynamic: bool, max_shapes: int) -> Callable:
    """A fresh torch.compile of fn. Static shapes (the default) specialize a kernel per size,
    as a static-shape user gets; the recompile limit makes room for them, and hitting it fails
    rather than silently timing eager under the torch.compile label."""
    import torch
    import torch._dynamo

    torch._dynamo.reset()
    config = torch._dynamo.config
    if hasattr(config, "recompile_limit"):
        config.recompile_limit = max(config.recompile_limit, max_shapes + 2)
    if hasattr(config, "fail_on_recompile_limit_hit"):
        config.fail_on_recompile_limit_hit = True

    def call(*args):
        return fn(*args)

    return torch.compile(call, dynamic=dynamic)


def random_tensor(shape: tuple[int, ...], dtype: str):
    import torch

    torch_dtype = getattr(torch, dtype)
    if torch_dtype.is_floating_point:
        return torch.randn(shape, dtype=torch_dtype, device=DEVICE)
    # Large magnitudes exercise the high bytes of the integers too.
    return torch.randint(-(2**40), 2**40, shape, dtype=torch_dtype, device=DEVICE)


def size_matched_copy(a, tensors: int) -> Callable[[], object]:
    """A device-to-device copy moving what an op over `tensors` tensors of a's size moves
    (its inputs read and its output written): the size-matched bandwidth bar."""
    import torch

    src = torch.empty(tensors * a.numel() // 2, dtype=a.dtype, device=a.device)
    dst = torch.empty_like(src)
    return functools.partial(dst.copy_, src)


def check_outputs(
    impls: dict[str, Callable], inputs: tuple, reference: str, label: str, tolerance=None
) -> None:
    """Every implementation must equal the reference implementation before it is timed:
    exactly, or within `tolerance` ({rtol, atol}, or a list of them, one per output). Each
    runs on its own copy of the inputs (an in-place implementation returns what it updated)."""
    import torch

    def run(fn):
        out = fn(*[t.clone() for t in inputs])
        return out if isinstance(out, tuple) else (out,)

    expected = run(impls[reference])
    per_output = tolerance if isinstance(tolerance, list) else [tolerance] * len(expected)
    for name, fn in impls.items():
        for k, (got, want) in enumerate(zip(run(fn), expected, strict=True)):
            tolerance = per_output[k]
            if got.shape != want.shape or got.dtype != want.dtype:
                raise SystemExit(
                    f"FAIL {name} {label}: got {got.dtype} {tuple(got.shape)}, "
                    f"expected {want.dtype} {tuple(want.shape)}"
                )
            if tolerance is not None:
                try:
                    torch.testing.assert_close(got, want, **tolerance)
                except AssertionError as error:
                    said = " ".join(line.strip() for line in str(error).splitlines()[:4])
                    raise SystemExit(
                        f"FAIL {name} {label}, output {k}: {said} (against {reference})"
                    ) from None
            elif not torch.equal(got, want):
                bad = int((got != want).sum())
                raise SystemExit(f"FAIL {name} {label}: {bad} elements differ from {reference}")


def interleaved_ms(
    calls: dict[str, Callable[[], object]], settings: Settings, do_bench: Callable | None = None
) -> dict[str, float]:
    """name -> the median GPU ms of its calls, from ONE do_bench over a function that runs the
    calls in turn.

    One do_bench for all, so that a GPU's slow stretches fall on every implementation alike;
    the turn goes forward then backward (x y z z y x ...), so that an alternate-call effect
    pins none to odd or even calls (docs/PERFORMANCE.md says what each cancels). Each call
    runs once first, so that a compile or a first load stays out of do_bench's estimate of the
    time per call (which sets how many calls it times)."""
    if do_bench is None:
        from triton.testing import do_bench
    names = list(calls)
    turn = names + names[::-1]  # name i runs at calls i and 2n-1-i: one odd, one even
    for call in calls.values():
        call()
    order: list[str] = []

    def next_call() -> object:
        name = turn[len(order) % len(turn)]
        order.append(name)
        return calls[name]()

    times = do_bench(
        next_call,
        warmup=settings.warmup_ms * len(names),
        rep=settings.rep_ms * len(names),
        return_mode="all",
    )
    samples: dict[str, list[float]] = {name: [] for name in names}
    timed = order[len(order) - len(times) :]  # do_bench's timed calls are its last ones
    for name, ms in zip(timed, times, strict=True):
        samples[name].append(ms)
    untimed = [name for name, got in samples.items() if not got]
    if untimed:
        raise RuntimeError(f"do_bench timed no call of {', '.join(untimed)}: raise rep_ms")
    return {name: statistics.median(got) for name, got in samples.items()}


def time_rounds(
    round_calls: Callable[[], dict[str, Callable[[], object]]], settings: Settings
) -> dict[str, list[float]]:
    """name -> its ms in each round (interleaved_ms). Each round asks round_calls() for calls
    on freshly allocated tensors, so a cell samples where its buffers land instead of resting
    on one allocation."""
    times: dict[str, list[float]] = {}
    for _ in range(settings.rounds):
        for name, ms in interleaved_ms(round_calls(), settings).items():
            times.setdefault(name, []).append(ms)
    return times
