"""Python face of the ops: typed wrappers, fake kernels (torch.compile) and autograd.

The ops themselves (schema, CPU and CUDA kernels, input checks) are registered
by the compiled extension through the LibTorch stable ABI; this module adds
what is naturally Python: fake tensor propagation and the backward formula.
"""

from __future__ import annotations

import torch

from ._build_info import load_build_info

NAMESPACE = "cuda_ext_example"
OP_NAMES = ("my_add", "my_fast_add")

# The dtypes of csrc/kernel_table.h, which the build writes into the build record.
SUPPORTED_DTYPES = tuple(getattr(torch, name) for name in load_build_info()["dtypes"])


def check_inputs(op: str, a: torch.Tensor, b: torch.Tensor) -> None:
    """The checks of csrc/ops.cpp check_inputs, with the same messages, for fake tensors."""
    prefix = f"{NAMESPACE}.{op}"
    if a.layout != torch.strided or b.layout != torch.strided:
        raise RuntimeError(
            f"{prefix}: expected dense (strided) tensors, got a sparse or other layout"
        )
    if a.device != b.device:
        raise RuntimeError(
            f"{prefix}: expected both tensors on the same device, "
            f"got a on {a.device} and b on {b.device}"
        )
    if a.dtype != b.dtype:
        raise RuntimeError(
            f"{prefix}: expected both tensors to have the same dtype, "
            f"got a {a.dtype} and b {b.dtype}"
        )
    if a.dtype not in SUPPORTED_DTYPES:
        supported = ", ".join(str(d) for d in SUPPORTED_DTYPES)
        raise RuntimeError(f"{prefix}: unsupported dtype {a.dtype}; supported: {supported}")
    if a.shape != b.shape:
        raise RuntimeError(
            f"{prefix}: expected tensors of the same shape (no broadcasting), "
            f"got a {list(a.shape)} and b {list(b.shape)}"
        )


def _check_types(op: str, a: object, b: object) -> None:
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
        raise TypeError(
            f"{NAMESPACE}.{op}: expected two torch.Tensor arguments, "
            f"got {type(a).__name__} and {type(b).__name__}"
        )


def _below_autograd(overload, torch_c=torch._C):
    """(the C++ callable behind the OpOverload, a guard that dispatches below autograd),
    or None where this torch lacks those private APIs (then every call takes the
    public OpOverload: correct, only slower)."""
    direct = getattr(overload, "_op", None)
    guard = getattr(torch_c, "_AutoDispatchBelowAutograd", None)
    return (direct, guard) if direct is not None and guard is not None else None


def _make_wrapper(op: str, doc: str, torch_c=torch._C):
    """The Python function for torch.ops.<NAMESPACE>.<op>, lean on the host.

    A call that builds no autograd graph skips the Python autograd kernel that
    register_autograd installs (microseconds per call, which launch-bound callers
    notice) and calls the C++ callable behind the OpOverload below autograd.
    Tracing (torch.compile) and graph-building calls take the full OpOverload path.
    The argument types are checked only when the call fails: on the fast path they
    cost time and the dispatcher checks them anyway.
    """
    overload = getattr(getattr(torch.ops, NAMESPACE), op).default
    fast = _below_autograd(overload, torch_c)
    direct, below_autograd = fast or (overload, None)
    grad_enabled = torch.is_grad_enabled
    is_compiling = torch.compiler.is_compiling

    def wrapper(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        try:
            if (
                below_autograd is None
                or is_compiling()
                or (grad_enabled() and (a.requires_grad or b.requires_grad))
            ):
                return overload(a, b)
            with below_autograd():
                return direct(a, b)
        except (AttributeError, RuntimeError):
            _check_types(op, a, b)  # a non-tensor argument: say so as a TypeError
            raise

    wrapper.__name__ = wrapper.__qualname__ = op
    wrapper.__doc__ = doc
    return wrapper


my_add = _make_wrapper(
    "my_add",
    """a + b with the simple one-element-per-thread CUDA kernel (or the CPU kernel).

    Both tensors must have the same shape, dtype and device. Returns a new
    contiguous tensor equal to ``torch.add(a, b)``.
    """,
)
my_fast_add = _make_wrapper(
    "my_fast_add",
    """a + b with the vectorized CUDA kernel (or the CPU kernel).

    16-byte vector loads/stores; past 64 MiB per tensor, 8-byte accesses, which
    stream faster there. Same contract as :func:`my_add`; any size, offset or
    layout is accepted.
    """,
)


def _make_fake(op: str):
    def fake(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        check_inputs(op, a, b)
        return a.new_empty(a.shape)  # contiguous, like the real kernels' output

    return fake


def _backward(ctx, grad: torch.Tensor):
    # d(a + b)/da = d(a + b)/db = 1
    return grad, grad


def register_python_parts(namespace: str = NAMESPACE) -> None:
    """Fake kernels and autograd for the ops of `namespace` (the JIT build has its own)."""
    for op in OP_NAMES:
        qualname = f"{namespace}::{op}"
        torch.library.register_fake(qualname, _make_fake(op))
        torch.library.register_autograd(qualname, _backward)
