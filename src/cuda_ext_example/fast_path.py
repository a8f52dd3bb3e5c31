"""The one module that touches torch's private API, each name with a public fallback.

What it buys: the commonest call (eager: plain tensors, no autograd graph, no mode, no
trace, no torch.func transform) goes straight to the op's no-grad twin (its kernels
registered under a second name with no autograd kernel), and an eager training call
straight to the op's training Function, whose forward and backward call the ops with
autograd's dispatch keys excluded: a dispatcher pass and a Python frame less each,
microseconds per call that launch-bound callers notice. Only torch's private checks can
tell such a call apart, so they live here.

Every name is looked up once, at import. Where this torch lacks one, PRIVATE is None and
every call takes the public route: the op's autograd.Function (torch.library's
register_autograd for the public op), which torch.func handles itself.
tests/ops/test_torch_integration.py runs both routes on the installed torch.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace

import torch


def lookup(torch_c=torch._C, forward_ad=torch.autograd.forward_ad) -> SimpleNamespace | None:
    """torch's private checks and calls this module uses, or None if any is missing."""
    names = dict(
        transforms_active=getattr(torch_c, "_are_functorch_transforms_active", None),
        dispatch_modes=getattr(torch_c, "_len_torch_dispatch_stack", None),
        function_modes=getattr(torch_c, "_is_torch_function_mode_enabled", None),
        tracing=getattr(torch_c, "_is_tracing", None),
        below_autograd=getattr(torch_c, "_AutoDispatchBelowAutograd", None),
    )
    if None in names.values() or not hasattr(forward_ad, "_current_level"):
        return None
    return SimpleNamespace(**names, forward_ad=forward_ad)


PRIVATE = lookup()


def transformed(private: SimpleNamespace | None = PRIVATE) -> bool:
    """A torch.func transform (vmap, grad, jvp) or forward-mode AD is active: a call must
    then take the op's autograd.Function, or its tangents would be lost. Unknowable
    without the private checks: then False (the Python function applies the Function in
    every case anyway)."""
    if private is None:
        return False
    return private.forward_ad._current_level >= 0 or private.transforms_active()


def raw_op(overload) -> Callable:
    """The overload's C++ callable, a Python frame less a call than the overload, or the
    overload itself where it has none."""
    return getattr(overload, "_op", overload)


def below_autograd(overload, private: SimpleNamespace | None = PRIVATE) -> Callable | None:
    """A call of the op below its autograd kernel: the public op with autograd's dispatch
    keys excluded (torch.export and AOTAutograd record the public op); None where that
    exclusion is private and missing."""
    if private is None:
        return None
    exclude = private.below_autograd
    op = raw_op(overload)

    def call(*args):
        with exclude():
            return op(*args)

    return call


def route(
    overload,
    below: Callable | None,
    transformed_call: Callable,
    grad_call: Callable,
    tensors: int,
    private: SimpleNamespace | None = PRIVATE,
) -> Callable:
    """The Python function's call of the op: `below` for an eager no-grad call outside every
    mode and trace, `grad_call` for such a call that builds an autograd graph,
    `transformed_call` under torch.func, the public op otherwise. Without the private
    checks, `transformed_call` for every call (torch.func handles an autograd.Function
    itself). The first `tensors` arguments are the op's tensors, the rest its scalars."""
    if private is None or below is None:
        return transformed_call
    is_dynamo_compiling = torch.compiler.is_dynamo_compiling  # public, and cheapest first
    forward_ad, functorch = private.forward_ad, private.transforms_active
    dispatch_modes, function_modes, tracing = (
        private.dispatch_modes,
        private.function_modes,
        private.tracing,
    )
    grad_enabled = torch.is_grad_enabled
    # A Parameter is a plain tensor to the dispatcher (its torch_function is off).
    plain = (torch.Tensor, torch.nn.Parameter)

    def call(*args):
        inputs = args[:tensors]
        if is_dynamo_compiling():  # dynamo records the public op and traces nothing below
            return overload(*args)
        if forward_ad._current_level >= 0 or functorch():
            return transformed_call(*args)
        for a in inputs:
            if a.__class__ not in plain:  # a subclass sees the public op; a non-tensor fails
                return overload(*args)
        if dispatch_modes() or function_modes() or tracing():
            return overload(*args)
        if grad_enabled():
            for a in inputs:
                if a.requires_grad:
                    return grad_call(*args)
        return below(*args)

    return call
