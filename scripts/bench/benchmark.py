#!/usr/bin/env python3
"""Memory-bandwidth benchmark of cuda_ext_example.my_add / my_fast_add against their peers.

    python -m scripts.bench [--sizes 12-28] [--dtypes float32,bfloat16,float16,int64]
                                [--out build/results] [--quick] [--compile-dynamic]

Implementations: the peers torch.add (eager), torch.compile of torch.add (Inductor's
generated Triton kernel) and a plain Triton kernel (triton_add.py), then the
project's my_add and my_fast_add. Every one returns a new tensor, so they do the same work:
read a and b, write the output.

Timing: triton.testing.do_bench (CUDA events around each call, L2 flushed before each
call), one do_bench per round over the implementations called in turn, each one's median of
its calls. GB/s counts the 3 tensors of traffic. The roofline is the bandwidth of a
device-to-device copy of 1 GiB (bytes read + written).

Launch overhead: for tiny tensors the GPU time is not what the user waits for, the host
time per call is, so it is measured separately (see run_host_times).

Outputs, in --out: <gpu-name-slug>-<YYYY-MM-DD>.md, .csv and .png, and the table and the
targets on stdout.

Structure: this file measures (a list of Record, the copy roofline, the host times);
report.py turns those into the table, targets, markdown, CSV and plot, and is
tested on fake numbers by tests/test_benchmark.py with no GPU. torch, triton and the
extension are imported only inside the functions that time things.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from .report import (
    COPY,
    DTYPE_BYTES,
    HOST_N,
    Record,
    Target,
    coldstart_target,
    format_host_times,
    format_table,
    format_targets,
    record_from_rounds,
    write_reports,
)

DEFAULT_SIZES = "12-28"  # log2 of the element counts
QUICK_SIZES = "12,16,20,24,28"
DEVICE = "cuda"  # one place to name it (a CPU dry run of the flow can swap it)
COPY_BYTES = 2**30  # the roofline's buffer: 1 GiB, far larger than any L2


# --------------------------------------------------------------------------- CLI parsing


def parse_sizes(text: str) -> list[int]:
    """'12-28' or '12,16,20' or '12-14,20' -> sorted distinct log2 sizes."""
    exponents: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        low, sep, high = part.partition("-")
        try:
            first, last = int(low), int(high) if sep else int(low)
        except ValueError:
            raise argparse.ArgumentTypeError(f"bad size range {part!r}") from None
        if not 0 <= first <= last <= 30:
            raise argparse.ArgumentTypeError(f"sizes are log2 exponents in 0..30, got {part!r}")
        exponents.update(range(first, last + 1))
    if not exponents:
        raise argparse.ArgumentTypeError("no sizes given")
    return sorted(exponents)


def parse_dtypes(text: str) -> list[str]:
    dtypes = [d.strip() for d in text.split(",") if d.strip()]
    unknown = [d for d in dtypes if d not in DTYPE_BYTES]
    if unknown or not dtypes:
        raise argparse.ArgumentTypeError(
            f"unknown dtype(s) {unknown}; choose from {', '.join(DTYPE_BYTES)}"
        )
    return list(dict.fromkeys(dtypes))


def add_run_options(parser: argparse.ArgumentParser, quick: str, compile_dynamic: str) -> None:
    """The options every benchmark command shares (this one and scripts.bench.square)."""
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("build/results"),
        help="directory for the .md/.csv/.png (default build/results)",
    )
    parser.add_argument("--quick", action="store_true", help=quick)
    parser.add_argument("--compile-dynamic", action="store_true", help=compile_dynamic)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="GB/s of my_add / my_fast_add vs torch.add, torch.compile and Triton.",
    )
    parser.add_argument(
        "--sizes",
        type=parse_sizes,
        default=None,
        help=f"log2 element counts, e.g. 12-28 or 16,20,24 (default {DEFAULT_SIZES}; "
        f"{QUICK_SIZES} with --quick)",
    )
    parser.add_argument(
        "--dtypes",
        type=parse_dtypes,
        default=list(DTYPE_BYTES),
        help=f"comma-separated (default {','.join(DTYPE_BYTES)})",
    )
    add_run_options(
        parser,
        quick="every 4th size and shorter do_bench runs: a smoke run, not a result",
        compile_dynamic="compile torch.add once per dtype with dynamic shapes instead of once "
        "per (size, dtype) with static shapes (faster to run, but Inductor's kernel then "
        "cannot assume the size is a multiple of 16 and may lose vectorized loads)",
    )
    args = parser.parse_args(argv)
    if args.sizes is None:
        args.sizes = parse_sizes(QUICK_SIZES if args.quick else DEFAULT_SIZES)
    return args


# --------------------------------------------------------------------------- GPU part


@dataclass(frozen=True)
class Settings:
    warmup_ms: int  # do_bench warmup and repetition budgets, in ms of GPU time
    rep_ms: int
    host_calls: int
    host_repeats: int
    compile_dynamic: bool
    rounds: int = 5  # do_bench rounds per cell, each on fresh tensors; the median is reported


def settings_for(args: argparse.Namespace) -> Settings:
    if args.quick:
        return Settings(10, 30, 500, 3, args.compile_dynamic, rounds=1)
    return Settings(25, 100, 2000, 7, args.compile_dynamic)


def bench_ms(fn: Callable[[], object], settings: Settings) -> float:
    """Median GPU time of fn() in ms: CUDA events around each call, L2 flushed before each
    (triton.testing.do_bench). Never a host clock around asynchronous launches."""
    from triton.testing import do_bench

    return float(do_bench(fn, warmup=settings.warmup_ms, rep=settings.rep_ms, return_mode="median"))


def measure_roofline_gbps(settings: Settings) -> float:
    """Device-to-device copy bandwidth: 1 GiB read + 1 GiB written."""
    import torch

    src = torch.empty(COPY_BYTES, dtype=torch.uint8, device=DEVICE).random_(0, 256)
    dst = torch.empty_like(src)
    ms = bench_ms(functools.partial(dst.copy_, src), settings)
    del src, dst
    torch.cuda.empty_cache()
    return 2 * COPY_BYTES / (ms * 1e-3) / 1e9


def compiled_add(dynamic: bool, max_shapes: int) -> Callable:
    """A fresh torch.compile of torch.add.

    The dynamo cache is reset first so each dtype starts clean. Static shapes (the
    default) specialize a kernel per size, like a static-shape user gets; the recompile
    limit is raised to allow that, and hitting it must fail rather than silently fall back
    to eager (which would time torch.add under the torch.compile label)."""
    import torch
    import torch._dynamo

    torch._dynamo.reset()
    config = torch._dynamo.config
    if hasattr(config, "recompile_limit"):
        config.recompile_limit = max(config.recompile_limit, max_shapes + 2)
    if hasattr(config, "fail_on_recompile_limit_hit"):
        config.fail_on_recompile_limit_hit = True

    def add(a, b):
        return torch.add(a, b)

    return torch.compile(add, dynamic=dynamic)


def implementations(settings: Settings, max_shapes: int) -> dict[str, Callable]:
    """name -> fn(a, b) returning a new tensor, peers first."""
    import torch

    import cuda_ext_example

    from .triton_add import triton_add

    return {
        "torch.add": torch.add,
        "torch.compile": compiled_add(settings.compile_dynamic, max_shapes),
        "triton": triton_add,
        "my_add": cuda_ext_example.my_add,
        "my_fast_add": cuda_ext_example.my_fast_add,
    }


def make_inputs(n: int, dtype: str):
    import torch

    torch_dtype = getattr(torch, dtype)

    def one():
        if torch_dtype.is_floating_point:
            return torch.randn(n, dtype=torch_dtype, device=DEVICE)
        # Large magnitudes exercise the high bytes of the int64 values too.
        return torch.randint(-(2**40), 2**40, (n,), dtype=torch_dtype, device=DEVICE)

    return one(), one()


def size_matched_copy(a, tensors: int = 3) -> Callable[[], object]:
    """A device-to-device copy moving what an op over `tensors` tensors of a's size moves
    (inputs and output; an add's 3: 1.5n elements read and 1.5n written): report.COPY, the
    size-matched bandwidth bar."""
    import torch

    src = torch.empty(tensors * a.numel() // 2, dtype=a.dtype, device=a.device)
    dst = torch.empty_like(src)
    return functools.partial(dst.copy_, src)


def check_outputs(impls: dict[str, Callable], a, b, label: str) -> None:
    """Every implementation must equal torch.add exactly before it is timed."""
    import torch

    expected = torch.add(a, b)
    for name, fn in impls.items():
        got = fn(a, b)
        if got.shape != expected.shape or got.dtype != expected.dtype:
            raise SystemExit(
                f"FAIL {name} {label}: got {got.dtype} {tuple(got.shape)}, "
                f"expected {expected.dtype} {tuple(expected.shape)}"
            )
        if not torch.equal(got, expected):
            bad = int((got != expected).sum())
            raise SystemExit(f"FAIL {name} {label}: {bad} elements differ from torch.add")


# How time_rounds times a cell, for the settings line of each result.
ROUND_ORDER = (
    "rounds, in each one do_bench over the implementations called in turn, forward then "
    "backward (so each runs at odd and at even calls)"
)


def interleaved_ms(
    calls: dict[str, Callable[[], object]], settings: Settings, do_bench: Callable | None = None
) -> dict[str, float]:
    """name -> the median GPU ms of its calls, from ONE triton.testing.do_bench over a function
    that runs the calls in turn, so that do_bench's timed calls go round the implementations.

    Why not one do_bench per implementation: on the lent H200 every kernel of one 40-100 ms
    stretch can run 0.5-1 us slower than in the next, the same for every implementation
    (benchmarks/NOTES.md change 32). With a do_bench each, that offset - 3% of a 2^22 float32
    add - fell on one implementation and not on the next and decided the mid-size verdicts;
    called in turn they all sample the same stretches, and the round-to-round range of their
    ratio fell from 6-12% to 0.4-1.8% at 2^21..2^23 (8 rounds).

    The turn goes forward then backward (x y z z y x ...), so that every implementation runs
    at odd and at even calls alike: on the lent H100 and H200 alternate calls of one kernel
    differ by up to 4% for a whole do_bench (even and odd medians of float32 2^22: 18.34 and
    17.63 us), and in plain turns (x y x y) an even number of implementations pins each one to
    one of the two: the same kernel timed as x and as y measured 0.965-1.038x itself, forward
    then backward 0.998-1.002x (benchmarks/NOTES.md change 35). do_bench still flushes L2
    before every call. Each call runs once first, so that a compile or a first load stays out
    of do_bench's estimate of the time per call (which sets how many calls it times)."""
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

    times = do_bench(next_call, warmup=settings.warmup_ms * len(names),
                     rep=settings.rep_ms * len(names), return_mode="all")  # fmt: skip
    samples: dict[str, list[float]] = {name: [] for name in names}
    timed = order[len(order) - len(times) :]  # do_bench's timed calls are its last ones
    for name, ms in zip(timed, times, strict=True):
        samples[name].append(ms)
    untimed = [name for name, got in samples.items() if not got]
    if untimed:
        raise RuntimeError(f"do_bench timed no call of {', '.join(untimed)}: raise rep_ms")
    return {name: statistics.median(got) for name, got in samples.items()}


def time_rounds(round_impls: Callable[[], dict[str, Callable[[], object]]], settings: Settings):
    """name -> ms of each call round_impls() returns, one per round (interleaved_ms). Each
    round calls round_impls() for calls on freshly allocated tensors, so a cell samples where
    its buffers land instead of resting on one allocation (benchmarks/NOTES.md change 19).
    (No implementation always runs right after the same neighbour: interleaved_ms goes
    forward then backward.)"""
    times: dict[str, list[float]] = {}
    for _ in range(settings.rounds):
        for name, ms in interleaved_ms(round_impls(), settings).items():
            times.setdefault(name, []).append(ms)
    return times


def add_round(impls: dict[str, Callable], n: int, dtype: str) -> Callable[[], dict]:
    """round_impls for time_rounds: every fn(a, b) of impls and the size-matched copy, on
    fresh inputs of n elements."""

    def calls() -> dict[str, Callable[[], object]]:
        a, b = make_inputs(n, dtype)
        bound = {name: functools.partial(fn, a, b) for name, fn in impls.items()}
        return {**bound, COPY: size_matched_copy(a)}

    return calls


def run_cells(sizes: Sequence[int], dtypes: Sequence[str], settings: Settings) -> list[Record]:
    import torch

    records = []
    for dtype in dtypes:
        # One compile cache per dtype: a fresh torch.compile, then every size.
        impls = implementations(settings, max_shapes=len(sizes) + 1)
        for k in sizes:
            n = 2**k
            label = f"2^{k} {dtype}"
            check_outputs(impls, *make_inputs(n, dtype), label)  # also compiles torch.compile
            for name, samples in time_rounds(add_round(impls, n, dtype), settings).items():
                record = record_from_rounds(n, dtype, name, samples)
                records.append(record)
                print(
                    f"  {label:<14} {name:<14} {record.ms * 1e3:10.2f} us "
                    f"{record.gbps:9.1f} GB/s ±{record.spread_pct:.1f}%",
                    file=sys.stderr,
                    flush=True,
                )
            torch.cuda.empty_cache()
    return records


def time_host_calls(fn: Callable, a, b, calls: int) -> float:
    """us per call of `calls` back-to-back calls, up to one final synchronize.

    At n=1024 the kernels take a couple of us while a launch costs more on the host, so
    the GPU keeps up and the wall-clock time is the host-side cost of a call (argument
    checks, dispatch, allocation, launch): the launch overhead is the thing measured here,
    which is why a host clock is right for this and only this."""
    import torch

    sync = torch.cuda.synchronize if a.is_cuda else (lambda: None)
    sync()
    start = time.perf_counter()
    for _ in range(calls):
        fn(a, b)
    sync()
    return (time.perf_counter() - start) / calls * 1e6


def best_host_times(impls: dict[str, Callable], a, b, calls: int, repeats: int) -> dict:
    """name -> host us/call of fn(a, b): the best of `repeats` interleaved rounds.

    Interleaved, because a machine's host speed drifts (one lent H100 measured torch.add at
    6.9 and 10.5 us/call minutes apart, and timing each implementation in one block put
    that drift into their ratios); the best round, because host-side noise only ever adds
    time (timeit's rule)."""
    for fn in impls.values():  # warm up: compile, allocator, caches
        time_host_calls(fn, a, b, 50)
    best = {name: float("inf") for name in impls}
    for _ in range(repeats):
        for name, fn in impls.items():
            best[name] = min(best[name], time_host_calls(fn, a, b, calls))
    return best


def run_host_times(settings: Settings) -> dict[str, float]:
    impls = implementations(settings, max_shapes=1)
    a, b = make_inputs(HOST_N, "float32")
    check_outputs(impls, a, b, f"n={HOST_N} float32")
    return best_host_times(impls, a, b, settings.host_calls, settings.host_repeats)


def run_coldstart() -> Target:
    """The first call of a fresh process (scripts/gpu/coldstart.py's children, median of 3)
    against torch's first new kernel there."""
    from scripts.gpu.coldstart import measure

    rows = measure(repeats=3)
    ms = {k: v * 1e3 for k, v in rows.items() if isinstance(v, float)}
    print(f"cold start: first my_add {ms.get('first my_add', 0):.2f} ms, torch's first new "
          f"kernel {ms.get('first torch.add', 0):.2f} ms", flush=True)  # fmt: skip
    return coldstart_target(ms.get("first my_add"), ms.get("first torch.add"))


def collect_meta(now: datetime, settings: Settings) -> dict[str, str]:
    from scripts.gpu.facts import benchmark_facts

    compile_mode = "dynamic shapes" if settings.compile_dynamic else "static shapes, per size"
    return {
        **benchmark_facts(now),
        "settings": f"do_bench warmup={settings.warmup_ms} ms rep={settings.rep_ms} ms per "
        f"implementation (median of {settings.rounds} {ROUND_ORDER}, each on fresh tensors); "
        f"host: best of {settings.host_repeats} interleaved rounds of {settings.host_calls} "
        "calls; "
        f"torch.compile {compile_mode}",
    }


def missing_prerequisite() -> str:
    """What the GPU run needs and this Python lacks, in one line with its fix ("" if none):
    found before any timing, so that the run does not end in a traceback minutes in."""
    try:
        import cuda_ext_example  # noqa: F401
    except ImportError as exc:
        return (
            f"cuda_ext_example is not importable ({exc}); install it first "
            "(make install, or pip install a wheel of it)"
        )
    try:
        import triton.testing  # noqa: F401  (do_bench times every implementation)
    except ImportError as exc:
        return f"needs triton for triton.testing.do_bench: {exc}"
    return ""


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print(
            f"scripts.bench: no CUDA GPU here (torch {torch.__version__}), nothing measured: "
            "run it on a machine with an NVIDIA GPU",
            file=sys.stderr,
        )
        return 2
    missing = missing_prerequisite()
    if missing:
        print(f"scripts.bench: {missing}", file=sys.stderr)
        return 1
    settings = settings_for(args)
    now = datetime.now(timezone.utc)
    meta = collect_meta(now, settings)
    print("\n".join(f"{k}: {v}" for k, v in meta.items()), flush=True)

    roofline = measure_roofline_gbps(settings)
    print(f"copy roofline: {roofline:.1f} GB/s", flush=True)
    records = run_cells(args.sizes, args.dtypes, settings)
    host_us = run_host_times(settings)
    cold = None if args.quick else run_coldstart()

    paths, targets, rows = write_reports(
        records, roofline, host_us, meta, args.out, now.strftime("%Y-%m-%d"), cold
    )
    print()
    print(format_table(rows))
    print()
    print(format_host_times(host_us))
    print()
    print(format_targets(targets))
    print()
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
