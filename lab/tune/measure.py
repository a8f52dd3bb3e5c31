"""Times every compiled launch shape of the vectorized kernel on this GPU, for each number of
inputs the declared ops have (or, with --ops, for those ops' own lists: an op whose math is
heavier than an add's, GELU's tanh, wants other shapes), in float32 and bfloat16, at tensor
sizes of 64 KiB .. 1 GiB; next to the op's torch reference and a copy that moves the same
bytes, for context.

Method (lab/bench/timing.py's): triton.testing.do_bench (CUDA events, L2 flushed
before each call), in each round one do_bench over the shapes called in turn
(timing.interleaved_ms), each round on tensors of its own (earlier rounds' kept alive, so
that every round's land elsewhere). Each shape is forced through
cuda_ext_example._launch_shapes.force_launch_shape (the library's C hook, through ctypes),
and its output is checked against the reference before it is timed. A shape is judged by
its time over the reference's in the same round, the median over the rounds (vs_reference):
a round's common slow or fast stretch cancels there, and not in a shape's own median time.

Writes <out>/<gpu-slug>-<date>.csv, one row per (op, dtype, bytes, shape), with the GPU,
driver, torch and date on every row (the table's provenance). A shape is labelled as
str(Shape) writes it, '16B x2 /128', or '16B x2 /128 evict-first' for a shape with evict-first
loads (lab/tune/derive.py parses the labels back).
"""

from __future__ import annotations

import csv
import functools
import statistics
import sys
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

from buildtools.launch_shapes import OP_PREFIX, Shape, load
from lab.bench.report import slug, spread_pct
from lab.bench.timing import Settings, interleaved_ms, size_matched_copy
from lab.gpu.facts import benchmark_facts


def tensor_names(op: dict) -> list[str]:
    return [a["name"] for a in op["arguments"] if a["type"] == "Tensor"]


COLUMNS = ("gpu", "driver", "torch", "date", "inputs", "op", "dtype", "bytes", "shape", "ms",
           "spread_pct", "vs_reference", "vs_reference_spread_pct", "table")  # fmt: skip
DTYPES = ("float32", "bfloat16")
LOG2_BYTES = range(16, 31)  # bytes of one tensor: 64 KiB .. 1 GiB
QUICK_LOG2_BYTES = (16, 22, 28)
REFERENCE, COPY = "reference", "copy"
# Rounds per cell: mid-size shapes differ by less than the rounds' spread; more steady them.
ROUNDS = 5


def vectorized_ops() -> dict[int, dict]:
    """inputs -> the first declared op with the vectorized kernel and that many inputs."""
    from cuda_ext_example.ops import DECLARATIONS

    found: dict[int, dict] = {}
    for op in DECLARATIONS.values():
        if op["kernel"] == "vectorized":
            found.setdefault(len(tensor_names(op)), op)
    return dict(sorted(found.items()))


def lists_to_measure(names: list[str] | None) -> list[tuple[str, dict]]:
    """[(table list, op)]: each number of inputs' list, timed on its first vectorized op; or,
    given op names, each op's own list (an op with heavier math than that first op)."""
    from cuda_ext_example.ops import DECLARATIONS

    if not names:
        return [(f"inputs-{n}", op) for n, op in vectorized_ops().items()]
    vectorized = [n for n, op in DECLARATIONS.items() if op["kernel"] == "vectorized"]
    unknown = [n for n in names if n not in vectorized]
    if unknown:
        raise SystemExit(f"lab.tune measure: --ops {', '.join(unknown)}: not a declared op "
                         f"with the vectorized kernel; one of {', '.join(vectorized)}")  # fmt: skip
    return [(f"{OP_PREFIX}{n}", DECLARATIONS[n]) for n in names]


def time_cell(op: dict, dtype: str, nbytes: int, shapes: list[Shape], settings: Settings):
    """{shape label: [ms per round]} for one op, dtype and size.

    Each round runs on tensors of its own, the earlier rounds' kept alive until the cell is
    done (freed, the next round's would take the same blocks back from torch's caching
    allocator), so a cell samples where its buffers land instead of resting on one or two
    allocations (up to 10 GiB held at 1 GiB per tensor); within a round the shapes take turns
    call by call in one do_bench, so a slow stretch of the GPU slows them all alike."""
    import torch

    from cuda_ext_example import _launch_shapes
    from cuda_ext_example.op_checks import difference
    from cuda_ext_example.op_checks import reference as reference_of

    run = getattr(torch.ops.cuda_ext_example, op["name"]).default
    reference = reference_of(op)
    torch_dtype = getattr(torch, dtype)
    n = nbytes // torch_dtype.itemsize

    def forced(index: int, fn) -> Callable[[], object]:
        """fn, run in launch shape `index` of the compiled ones (-1: the table's own choice)."""

        def call() -> object:
            _launch_shapes.force_launch_shape(index)
            return fn()

        return call

    labels = [str(shape) for shape in shapes] + [REFERENCE, COPY]
    times: dict[str, list[float]] = {label: [] for label in labels}
    held: list[list] = []  # every round's inputs, until the cell is done
    try:
        for round_ in range(settings.rounds):
            inputs = [torch.randn(n, device="cuda", dtype=torch_dtype) for _ in tensor_names(op)]
            impls = {str(s): (i, forced(i, functools.partial(run, *inputs)))
                     for i, s in enumerate(shapes)}  # fmt: skip
            impls[REFERENCE] = (-1, forced(-1, functools.partial(reference, *inputs)))
            # A copy that moves what the op moves: its inputs and its output.
            impls[COPY] = (-1, forced(-1, size_matched_copy(inputs[0], len(inputs) + 1)))
            if round_ == 0:  # bit for bit, or within the op's declared tolerance
                expected = (reference(*inputs),)
                for label, (index, call) in impls.items():
                    problem = index >= 0 and difference(op, (call(),), expected)
                    if problem:
                        raise SystemExit(f"shape {label} of {op['name']} {dtype} n={n} differs "
                                         f"from {op['reference']}: {problem}")  # fmt: skip
                del expected
            calls = {label: call for label, (_, call) in impls.items()}
            for label, ms in interleaved_ms(calls, settings).items():
                times[label].append(ms)
            held.append(inputs)  # the next round's inputs land elsewhere
            del inputs, impls, calls
    finally:
        _launch_shapes.force_launch_shape(-1)
        held.clear()
    return times


def vs_reference(times: dict[str, list[float]]) -> dict[str, tuple[float, float]]:
    """label -> (the median over rounds of its time over the reference's in that round, the
    spread of that ratio: (largest - smallest) / median). A cell's rounds move together, more
    than the shapes differ, so each one's own median time would rank them by which rounds
    their medians fell in."""
    reference = times[REFERENCE]
    out = {}
    for label, samples in times.items():
        ratios = [ms / ref for ms, ref in zip(samples, reference, strict=True)]
        out[label] = (statistics.median(ratios), spread_pct(ratios) / 100)
    return out


def measure(
    out_dir: Path, quick: bool = False, rounds: int | None = None, ops: list[str] | None = None
) -> int:
    import torch

    if not torch.cuda.is_available():
        print("lab.tune measure needs a CUDA GPU", file=sys.stderr)
        return 2
    from cuda_ext_example import _launch_shapes

    compiled = [Shape(*s) for s in _launch_shapes.vector_shapes()]
    missing = sorted(set(load().candidates) - set(compiled))
    if missing:
        names = ", ".join(map(str, missing))
        print(
            f"note: this wheel lacks {len(missing)} candidate shapes ({names}): build it with "
            "`make tune-wheel` to time them all",
            file=sys.stderr,
        )
    lists = lists_to_measure(ops)
    now = datetime.now(timezone.utc)
    facts = benchmark_facts(now)
    gpu = facts["GPU"]  # the GPU measured, the current device
    rounds = 1 if quick else ROUNDS if rounds is None else rounds
    settings = Settings(5, 20, rounds=rounds)
    out_dir.mkdir(parents=True, exist_ok=True)
    # An op's own lists go to a file of their own: the GPU's inputs-N file stays.
    path = out_dir / f"{slug(gpu)}-{'-'.join(ops) + '-' if ops else ''}{now:%Y-%m-%d}.csv"
    print("\n".join(f"{k}: {v}" for k, v in facts.items()), flush=True)
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(COLUMNS)
        for table, op in lists:
            inputs = len(tensor_names(op))
            for dtype in DTYPES:
                for log2 in QUICK_LOG2_BYTES if quick else LOG2_BYTES:
                    times = time_cell(op, dtype, 2**log2, compiled, settings)
                    relative = vs_reference(times)
                    for label, samples in times.items():
                        ms, spread = statistics.median(samples), spread_pct(samples)
                        ratio, ratio_spread = relative[label]
                        writer.writerow([gpu, facts["driver"], torch.__version__, f"{now:%Y-%m-%d}",
                                         inputs, op["name"], dtype, 2**log2, label, f"{ms:.6f}",
                                         f"{spread:.2f}", f"{ratio:.5f}",
                                         f"{ratio_spread * 100:.2f}", table])  # fmt: skip
                    winner = min(relative, key=lambda label: relative[label][0])
                    print(f"  {op['name']:<12} {dtype:<9} 2^{log2} B  best {winner:<26} "
                          f"{relative[winner][0]:.4f}x the reference's time",
                          flush=True)  # fmt: skip
                    torch.cuda.empty_cache()
    print(f"wrote {path}")
    return 0
