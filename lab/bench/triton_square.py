"""The GPU MODE lecture's Triton square, written anew: the Triton peer of the square workload.

The shape of the lecture's kernel (lecture 1, "How to profile CUDA kernels in PyTorch"),
kept on purpose so the benchmark compares against what the lecture showed: one program per
row of a 2-D tensor, the whole row in one block of BLOCK_SIZE = next power of two >= n_cols
elements (masked past n_cols), and the number of warps picked from the block size. No
autotuning, no persistent loop over rows.

    >>> from lab.bench.triton_square import triton_square
    >>> triton_square(x)  # == torch.square(x) bitwise, for a 2-D float CUDA tensor

launch_params() is the launch choice as a pure function (lab/tests/test_benchmark.py).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

# Triton refuses blocks of more than 2^20 elements; a whole row has to fit in one.
MAX_BLOCK = 2**20
# Offsets are int32 (row * stride + column): the last element's must fit.
MAX_ELEMENTS = 2**31 - 1


def launch_params(n_cols: int) -> tuple[int, int]:
    """(BLOCK_SIZE, num_warps) for rows of n_cols elements.

    The block is the row rounded up to a power of two; warps grow with it as in the
    lecture: 4 up to 1024 elements, 8 at 2048, 16 from 4096 on (at most 16 warps, 512
    threads, per program)."""
    if n_cols < 1:
        raise ValueError(f"triton_square: rows need at least one column, got {n_cols}")
    block = 1 << (n_cols - 1).bit_length()
    if block > MAX_BLOCK:
        raise ValueError(
            f"triton_square: a row of {n_cols} columns needs a block of {block} elements; "
            f"Triton allows at most {MAX_BLOCK}"
        )
    return block, min(16, max(4, block // 256))


@triton.jit
def _square_rows(in_ptr, out_ptr, in_row_stride, out_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(axis=0)
    cols = tl.arange(0, BLOCK_SIZE)
    inside = cols < n_cols  # the block is a power of two, the row need not be
    values = tl.load(in_ptr + row * in_row_stride + cols, mask=inside, other=0.0)
    tl.store(out_ptr + row * out_row_stride + cols, values * values, mask=inside)


def triton_square(x: torch.Tensor) -> torch.Tensor:
    """x * x for a 2-D CUDA tensor whose rows are contiguous, one program per row."""
    if x.dim() != 2:
        raise ValueError(f"triton_square: expected a 2-D tensor, got shape {tuple(x.shape)}")
    if not x.is_cuda:
        raise ValueError(f"triton_square: expected a CUDA tensor, got {x.device}")
    if x.stride(1) != 1:
        raise ValueError("triton_square: expected rows of contiguous elements (stride(1) == 1)")
    n_rows, n_cols = x.shape
    out = torch.empty_like(x, memory_format=torch.contiguous_format)
    if x.numel() == 0:
        return out
    if (n_rows - 1) * max(x.stride(0), n_cols) + n_cols > MAX_ELEMENTS:
        raise ValueError(f"triton_square: {tuple(x.shape)} overflows the kernel's int32 offsets")
    block, num_warps = launch_params(n_cols)
    _square_rows[(n_rows,)](
        x, out, x.stride(0), out.stride(0), n_cols, BLOCK_SIZE=block, num_warps=num_warps
    )
    return out
