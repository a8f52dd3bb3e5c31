"""A plain Triton elementwise add: the hand-written-Triton peer in the benchmark.

Deliberately the textbook kernel (one program per BLOCK_SIZE elements, masked loads and
stores for the tail, no autotuning): it stands for "what a few lines of Triton give you".

    >>> from triton_add import triton_add
    >>> triton_add(a, b)  # == torch.add(a, b) for same-shape, same-dtype CUDA tensors
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

# 1024 elements per program with Triton's default 4 warps: 8 elements (32 B of float32) per
# thread per operand, enough bytes in flight to stream at full bandwidth.
BLOCK_SIZE = 1024

# Offsets are int32 (pid * BLOCK_SIZE + arange), so the last program's offsets must fit.
MAX_ELEMENTS = 2**31 - 1 - BLOCK_SIZE


@triton.jit
def _add_kernel(a_ptr, b_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    # The mask only matters in the last program, where n_elements is not a multiple of
    # BLOCK_SIZE; Triton still vectorizes the loads when n_elements is divisible by 16.
    mask = offsets < n_elements
    a = tl.load(a_ptr + offsets, mask=mask)
    b = tl.load(b_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, a + b, mask=mask)


def triton_add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Return a new contiguous tensor a + b computed by the Triton kernel.

    a and b must be contiguous CUDA tensors of the same shape and dtype (no broadcasting,
    no hidden copies: the benchmark must time the kernel, not a .contiguous()).
    """
    if a.shape != b.shape or a.dtype != b.dtype or a.device != b.device:
        raise ValueError(
            f"triton_add: expected same shape/dtype/device, got {tuple(a.shape)} {a.dtype} "
            f"{a.device} and {tuple(b.shape)} {b.dtype} {b.device}"
        )
    if not a.is_cuda:
        raise ValueError(f"triton_add: expected CUDA tensors, got {a.device}")
    if not (a.is_contiguous() and b.is_contiguous()):
        raise ValueError("triton_add: expected contiguous tensors")
    n = a.numel()
    if n > MAX_ELEMENTS:
        raise ValueError(f"triton_add: {n} elements overflow the kernel's int32 offsets")
    out = torch.empty_like(a, memory_format=torch.contiguous_format)
    if n == 0:
        return out
    grid = (triton.cdiv(n, BLOCK_SIZE),)
    _add_kernel[grid](a, b, out, n, BLOCK_SIZE=BLOCK_SIZE)
    return out
