"""Helpers shared by the test modules."""

from __future__ import annotations

import torch


def random_tensor(shape, dtype, device, generator=None) -> torch.Tensor:
    """Random values covering the dtype: full integer range (wrap-around), spread floats."""
    if dtype.is_floating_point:
        t = torch.randn(shape, dtype=torch.float32, generator=generator) * 100
        return t.to(dtype=dtype, device=device)
    info = torch.iinfo(dtype)
    high = info.max + 1 if dtype != torch.int64 else info.max  # randint: high is exclusive
    t = torch.randint(info.min, high, shape, dtype=torch.int64, generator=generator)
    return t.to(dtype=dtype, device=device)


def assert_bitwise_equal(out: torch.Tensor, ref: torch.Tensor) -> None:
    assert out.shape == ref.shape
    assert out.dtype == ref.dtype
    assert out.device == ref.device
    got = out.detach().contiguous().flatten().view(torch.uint8)
    want = ref.detach().contiguous().flatten().view(torch.uint8)
    mismatches = (got != want).nonzero()
    assert mismatches.numel() == 0, f"{mismatches.numel()} bytes differ, first at {mismatches[:5]}"
