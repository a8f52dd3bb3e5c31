"""Helpers shared by the test modules."""

from __future__ import annotations

import torch


def random_tensor(shape, dtype, device, seed: int | None = None) -> torch.Tensor:
    """The core's sample values (full integer range, spread floats) in `shape`."""
    from cuda_ext_example.op_checks import default_sample

    n = 1
    for size in shape:
        n *= size
    with torch.random.fork_rng(devices=[], enabled=seed is not None):
        if seed is not None:
            torch.manual_seed(seed)
        return default_sample(n, dtype).reshape(shape).to(device)


def assert_bitwise_equal(out: torch.Tensor, ref: torch.Tensor) -> None:
    assert out.shape == ref.shape
    assert out.dtype == ref.dtype
    assert out.device == ref.device
    got = out.detach().contiguous().flatten().view(torch.uint8)
    want = ref.detach().contiguous().flatten().view(torch.uint8)
    mismatches = (got != want).nonzero()
    assert mismatches.numel() == 0, f"{mismatches.numel()} bytes differ, first at {mismatches[:5]}"
