#!/usr/bin/env python3
"""Times the kernel variants of scripts/bench/tune_variants.cu next to the peers (torch.add,
torch.compile, Triton) and the installed my_fast_add, with scripts/bench/benchmark.py's method:
do_bench (CUDA events, L2 flushed before each call), interleaved rounds, median.

    nvcc -O3 -std=c++17 -arch=sm_90 -shared -Xcompiler -fPIC \\
         scripts/bench/tune_variants.cu -o build/tune/libtune_variants.so
    python -m scripts.bench.tune_variants build/tune/libtune_variants.so --out sweep.csv

More than one library may be given (scripts/bench/aten_variants.cu: torch's own kernel),
so that their variants are timed in one process.

Prints per cell every implementation's GB/s and spread (max-min over the rounds, in % of
the median), then per implementation its worst and geometric-mean ratio to torch.add
(2^20..2^24) and to the best peer (2^16..2^28). A research tool for benchmarks/NOTES.md.
"""

from __future__ import annotations

import argparse
import csv
import ctypes
import math
import re
import statistics
import sys
from pathlib import Path

from scripts.bench import benchmark
from scripts.bench.report import record_from_rounds

PEERS = ("torch.add", "torch.compile", "triton")
DTYPE_CODES = {"float32": 0, "bfloat16": 1, "float16": 2}


BUILD_IT = "build it with the nvcc line atop scripts/bench/tune_variants.cu"


def load_lib(lib_path: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(lib_path))
    # (variant, dtype code, a, b, out, n, stream)
    lib.tune_add.argtypes = [ctypes.c_int, ctypes.c_int] + [ctypes.c_void_p] * 3
    lib.tune_add.argtypes += [ctypes.c_int64, ctypes.c_void_p]
    lib.tune_variant_name.restype = ctypes.c_char_p
    return lib


def variant_impls(lib_path: Path, dtype: str, pattern: str) -> dict:
    import torch

    lib = load_lib(lib_path)
    code = DTYPE_CODES[dtype]

    def make(v: int):
        def fn(a, b):
            out = torch.empty_like(a)
            stream = torch.cuda.current_stream().cuda_stream
            rc = lib.tune_add(
                v, code, a.data_ptr(), b.data_ptr(), out.data_ptr(), a.numel(), stream
            )
            if rc:
                raise RuntimeError(f"variant {v} failed: {rc}")
            return out

        return fn

    # A library may say which dtypes a variant has (aten_variants.cu); the others have all.
    supports = getattr(lib, "tune_variant_supports", lambda v, code: 1)
    names = {v: lib.tune_variant_name(v).decode() for v in range(lib.tune_variant_count())}
    return {
        "k:" + name: make(v)
        for v, name in names.items()
        if re.fullmatch(pattern, name) and supports(v, code)
    }


def summarize(rows: list[dict]) -> None:
    cells: dict[tuple, dict[str, float]] = {}
    for row in rows:
        cells.setdefault((row["dtype"], row["log2n"]), {})[row["impl"]] = row["gbps"]
    impls = sorted({row["impl"] for row in rows})
    print(
        "\nimpl, then per dtype: worst / geomean vs torch.add at 2^20..2^24, "
        "worst / geomean vs best peer at 2^16..2^28"
    )
    for dtype in DTYPE_CODES:
        keys = sorted(k for k in cells if k[0] == dtype)
        if not keys:
            continue
        print(f"\n{dtype}")
        scored = []
        for impl in impls:
            # a variant that lacks this dtype (aten_variants.cu's bfloat16-only ones) has no cells
            keys_of = [k for k in keys if impl in cells[k]]
            vs_add = [cells[k][impl] / cells[k]["torch.add"] for k in keys_of if 20 <= k[1] <= 24]
            vs_peer = [
                cells[k][impl] / max(cells[k][p] for p in PEERS) for k in keys_of if k[1] >= 16
            ]
            if not vs_peer:
                continue
            gm = math.exp(statistics.fmean(math.log(r) for r in vs_peer))
            scored.append((gm, impl, vs_add, vs_peer))
        for gm, impl, vs_add, vs_peer in sorted(scored, reverse=True):
            add_part = (
                f"{min(vs_add):.3f} / {math.exp(statistics.fmean(map(math.log, vs_add))):.3f}"
                if vs_add
                else "-"
            )
            print(f"  {impl:<18} add {add_part}   peer {min(vs_peer):.3f} / {gm:.3f}")


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python -m scripts.bench.tune_variants", description=__doc__.splitlines()[0]
    )
    parser.add_argument("lib", type=Path, nargs="+", help="one or more variant libraries")
    parser.add_argument(
        "--sizes", type=benchmark.parse_sizes, default=benchmark.parse_sizes("16-28")
    )
    parser.add_argument("--dtypes", default="float32,bfloat16,float16")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rep-ms", type=int, default=40)
    parser.add_argument("--variants", default=".*", help="regex over variant names")
    parser.add_argument("--out", type=Path, default=Path("tune_variants.csv"))
    args = parser.parse_args()

    missing = [str(lib) for lib in args.lib if not lib.is_file()]
    if missing:
        parser.error(f"no such library: {', '.join(missing)} ({BUILD_IT})")
    import torch

    if not torch.cuda.is_available():
        print("scripts.bench.tune_variants: needs a CUDA GPU", file=sys.stderr)
        return 2
    settings = benchmark.Settings(10, args.rep_ms, 0, 0, False, rounds=args.rounds)
    print(torch.cuda.get_device_name(0), torch.__version__, flush=True)
    rows = []
    for dtype in args.dtypes.split(","):
        impls = benchmark.implementations(settings, max_shapes=len(args.sizes) + 1)
        del impls["my_add"]
        for lib in args.lib:
            impls.update(variant_impls(lib, dtype, args.variants))
        for k in args.sizes:
            benchmark.check_outputs(impls, *benchmark.make_inputs(2**k, dtype), f"2^{k} {dtype}")
            line = []
            rounds = benchmark.add_round(impls, 2**k, dtype)
            for name, samples in benchmark.time_rounds(rounds, settings).items():
                r = record_from_rounds(2**k, dtype, name, samples)
                rows.append(
                    {
                        "dtype": dtype,
                        "log2n": k,
                        "impl": name,
                        "ms": r.ms,
                        "gbps": r.gbps,
                        "spread_pct": r.spread_pct,
                    }
                )
                line.append(f"{name}={r.gbps:.0f}±{r.spread_pct:.1f}%")
            print(f"{dtype} 2^{k}: " + " ".join(line), flush=True)
        torch.cuda.empty_cache()
    with args.out.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    summarize(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
