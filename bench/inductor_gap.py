#!/usr/bin/env python3
"""Where does torch.compile's ~1% lead at large float32 sizes come from? (bench/NOTES.md)

    python bench/inductor_gap.py build/tune/libtune_variants.so [--ncu]

Times, with scripts/benchmark.py's do_bench method, at 2^24..2^28 float32 and bfloat16:
torch.compile(torch.add); a hand-written Triton copy of Inductor's kernel (no mask,
XBLOCK=1024, 4 warps); the textbook Triton peer (masked); the sweep's plain CUDA kernel
("v1") with a new output per call and with one preallocated output; torch.add with a new
output and with out=. If the copy of Inductor's kernel matches the masked peer, the lead is
not in the kernel; if the preallocated rows move, the output allocation matters.

--ncu: instead, run each kernel once at 2^28 float32 after an L2-dirtying flush, for
`ncu --cache-control none --clock-control none` to read DRAM bytes and duration.
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchmark  # noqa: E402
import tune_variants  # noqa: E402
from bench_report import record_from_rounds  # noqa: E402


@triton.jit
def _inductor_like_kernel(a_ptr, b_ptr, out_ptr, XBLOCK: tl.constexpr):
    offsets = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    tl.store(out_ptr + offsets, tl.load(a_ptr + offsets) + tl.load(b_ptr + offsets))


def inductor_like(a, b):
    out = torch.empty_like(a)
    _inductor_like_kernel[(a.numel() // 1024,)](a, b, out, XBLOCK=1024, num_warps=4)
    return out


def impls_for(lib: Path, dtype: str, n: int) -> dict:
    from triton_add import triton_add

    v1 = tune_variants.variant_impls(lib, dtype, "v1")["k:v1"]
    out = torch.empty(n, dtype=getattr(torch, dtype), device="cuda")
    lib_handle = tune_variants.load_lib(lib)
    code = tune_variants.DTYPE_CODES[dtype]

    def v1_prealloc(a, b):
        stream = torch.cuda.current_stream().cuda_stream
        lib_handle.tune_add(0, code, a.data_ptr(), b.data_ptr(), out.data_ptr(), n, stream)
        return out

    return {
        "torch.add": torch.add,
        "torch.add(out=)": functools.partial(torch.add, out=out),
        "torch.compile": benchmark.compiled_add(False, 2),
        "triton (masked)": triton_add,
        "triton inductor-like": inductor_like,
        "cuda v1": v1,
        "cuda v1 prealloc": v1_prealloc,
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("lib", type=Path)
    parser.add_argument("--ncu", action="store_true")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    settings = benchmark.Settings(10, 40, 0, 0, False, rounds=args.rounds)

    if args.ncu:
        n = 2**28
        a, b = benchmark.make_inputs(n, "float32")
        flush = torch.empty(256 * 10**6 // 4, dtype=torch.int32, device="cuda")
        for name, fn in impls_for(args.lib, "float32", n).items():
            fn(a, b)  # compile / warm up
            torch.cuda.synchronize()
            flush.zero_()  # leaves dirty lines in L2, as do_bench does
            torch.cuda.nvtx.range_push(name)
            fn(a, b)
            torch.cuda.nvtx.range_pop()
            torch.cuda.synchronize()
        return 0

    print(torch.cuda.get_device_name(0), torch.__version__, triton.__version__)
    for dtype in ("float32", "bfloat16"):
        for k in (24, 26, 28):
            n = 2**k
            a, b = benchmark.make_inputs(n, dtype)
            impls = impls_for(args.lib, dtype, n)
            benchmark.check_outputs(impls, a, b, f"2^{k} {dtype}")
            for name, samples in benchmark.time_rounds(impls, a, b, settings).items():
                r = record_from_rounds(n, dtype, name, samples)
                print(
                    f"{dtype} 2^{k} {name:<22} {r.gbps:7.1f} GB/s ±{r.spread_pct:.1f}%",
                    flush=True,
                )
            del a, b, impls
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
