#!/usr/bin/env python3
"""Does a load hint's gain survive the next op? (benchmarks/NOTES.md change 37)

Times two variants of scripts/bench/tune_variants.cu (say the shipped load and an
evict-first one, same launch shape) three ways, each call after do_bench's L2 flush:
alone, followed by an unrelated add (c + d: it must evict whatever the first kernel
left dirty in L2), and followed by an add of its output (out + e: a chain, which gains
if the output is still in L2). Prints, per cell and way, the first variant's time over
the second's: the median over rounds and its range.

    python -m scripts.bench.variant_pairs build/tune/libtune_variants.so \\
        --pair t128-v2-ldnc,t128-v2-ldef --pair t256-v4-ldnc,t256-v4-ldef
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from scripts.bench import benchmark
from scripts.bench.tune_variants import BUILD_IT, variant_impls

CELLS = "float32:20-23,bfloat16:21-24"


def parse_cells(text: str) -> list[tuple[str, int]]:
    """ "float32:20-23,bfloat16:21" -> [("float32", 20), ..., ("bfloat16", 21)]."""
    cells = []
    for part in text.split(","):
        dtype, sizes = part.split(":")
        cells += [(dtype, k) for k in benchmark.parse_sizes(sizes)]
    return cells


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python -m scripts.bench.variant_pairs", description=__doc__.splitlines()[0]
    )
    parser.add_argument("lib", type=Path)
    parser.add_argument("--pair", action="append", required=True, help="BASE,OTHER names")
    parser.add_argument("--cells", type=parse_cells, default=parse_cells(CELLS))
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    if not args.lib.is_file():
        parser.error(f"no such library: {args.lib} ({BUILD_IT})")
    import torch

    if not torch.cuda.is_available():
        print("scripts.bench.variant_pairs: needs a CUDA GPU", file=sys.stderr)
        return 2

    settings = benchmark.Settings(10, 40, 0, 0, False, rounds=args.rounds)
    pairs = [tuple(p.split(",")) for p in args.pair]
    wanted = "|".join(name for pair in pairs for name in pair)
    print(torch.cuda.get_device_name(0), torch.__version__, flush=True)
    for dtype, k in args.cells:
        impls = variant_impls(args.lib, dtype, wanted)

        def round_calls(n=2**k, dtype=dtype, impls=impls):
            a, b = benchmark.make_inputs(n, dtype)
            c, d = benchmark.make_inputs(n, dtype)
            e, _ = benchmark.make_inputs(n, dtype)
            calls = {}
            for name, fn in impls.items():
                calls[f"{name} alone"] = lambda fn=fn: fn(a, b)
                calls[f"{name} +other"] = lambda fn=fn: (fn(a, b), torch.add(c, d))
                calls[f"{name} +chain"] = lambda fn=fn: torch.add(fn(a, b), e)
            return calls

        times = benchmark.time_rounds(round_calls, settings)
        parts = []
        for base, other in pairs:
            for way in ("alone", "+other", "+chain"):
                base_ms, other_ms = times[f"k:{base} {way}"], times[f"k:{other} {way}"]
                ratios = [x / y for x, y in zip(base_ms, other_ms, strict=True)]
                parts.append(
                    f"{base}/{other} {way} {statistics.median(ratios):.3f} "
                    f"[{min(ratios):.3f},{max(ratios):.3f}]"
                )
        print(f"{dtype} 2^{k} (time / time): " + "; ".join(parts), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
