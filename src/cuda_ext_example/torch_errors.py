"""torch's own exception, with its type and its words, for a torch call that failed inside an op.

The ops' C++ side calls torch through the stable C ABI, where a failure comes back as an
error code: torch's exception (torch.OutOfMemoryError and its message, "Cannot re-initialize
CUDA in forked subprocess", ...) stops at that boundary. The C++ side then raises a
RuntimeError saying "torch call failed (what)", with torch's words where the running torch
hands them over (torch >= 2.13). Here that torch work is done again with torch's public API,
so torch raises its own exception, of its own type, exactly as torch.add would.
"""

from __future__ import annotations

import torch

# Written by csrc/torch_boundary.h (kTorchCallFailed) before what failed.
TORCH_CALL_FAILED = "torch call failed ("


def raise_torch_error(error: BaseException, tensors: tuple) -> None:
    """If `error` is an op's failed torch call, raise torch's own exception for it; else
    return (the caller re-raises `error`). The op allocated one contiguous tensor per
    input at most (dense copies of the inputs, the output) and asked for torch's current
    stream: the same allocations, all held at once, and the same lookup fail the same way."""
    if not isinstance(error, RuntimeError) or TORCH_CALL_FAILED not in str(error):
        return
    held = []
    try:
        for tensor in tensors:
            if isinstance(tensor, torch.Tensor):
                held.append(torch.empty_like(tensor, memory_format=torch.contiguous_format))
                if tensor.is_cuda:
                    torch.cuda.current_stream(tensor.device)
    except Exception as torch_error:
        raise torch_error from error
    # torch did it all this time (the memory came free meanwhile): `error` stands.
