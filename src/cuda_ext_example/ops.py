"""Python face of the declared ops, made from their declarations (ops/*/ops.toml, which the
build writes into the build record): typed wrappers, autograd, and the torch.func rules
(vmap batching, forward-mode AD).

The ops themselves (schema, CPU and CUDA kernels, input checks) are registered by the
compiled extension through the LibTorch stable ABI. Nothing here names an op: a new
declaration gets all of it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

import torch

from . import fast_path
from ._build_info import load_build_info
from .torch_errors import raise_torch_error

NAMESPACE = "cuda_ext_example"
_RECORD = load_build_info() or {}
# name -> {"inputs": [...], "doc": ..., "derivatives": {input: expression} or None, ...}
DECLARATIONS: dict[str, dict] = {op["name"]: op for op in _RECORD.get("ops", [])}
OP_NAMES = tuple(DECLARATIONS)

# The dtypes of pyproject.toml's elementwise core, which the build writes into the record.
SUPPORTED_DTYPES = tuple(getattr(torch, name) for name in _RECORD.get("dtypes", []))


def _check_types(op: dict, args: tuple, namespace: str = NAMESPACE) -> None:
    if len(args) != len(op["inputs"]) or not all(isinstance(a, torch.Tensor) for a in args):
        got = ", ".join(type(a).__name__ for a in args)
        count = len(op["inputs"])
        raise TypeError(
            f"{namespace}.{op['name']}: expected {count} torch.Tensor argument"
            f"{'s' if count > 1 else ''} ({', '.join(op['inputs'])}), got ({got})"
        )


def overloads(op: dict, namespace: str = NAMESPACE) -> tuple:
    """(the public op, its no-grad twin) as torch.ops overloads: the same kernels, the
    twin registered without an autograd kernel (csrc/ops.cpp)."""
    ops = getattr(torch.ops, namespace)
    return getattr(ops, op["name"]).default, getattr(ops, op["no_grad_twin"]).default


def make_wrapper(op: dict, namespace: str = NAMESPACE, function=None, private=fast_path.PRIVATE):
    """The Python function for torch.ops.<namespace>.<op>.

    A plain call that builds no autograd graph takes the op's no-grad twin where torch's
    private checks can tell it apart (fast_path.py); every other call takes the public op,
    so that autograd, tracing (torch.compile, torch.export, make_fx), modes and tensor
    subclasses see it; torch.func transforms and forward-mode AD take `function` (the op's
    autograd.Function, applied here, above the dispatcher, where torch.func handles it).
    The argument types are checked only when the call fails: the dispatcher checks them.
    """
    overload, twin = overloads(op, namespace)
    transformed = function.apply if function is not None else overload
    call = fast_path.plain_call_to_twin(overload, twin, transformed, private)
    if call is None:  # the public route: torch.func handles an autograd.Function itself
        call = transformed

    signature = inspect.Signature(
        [inspect.Parameter(x, inspect.Parameter.POSITIONAL_OR_KEYWORD) for x in op["inputs"]]
    )

    def wrapper(*args: torch.Tensor, **kwargs: torch.Tensor) -> torch.Tensor:
        if kwargs:  # by the inputs' names, as the schema allows
            args = signature.bind(*args, **kwargs).args
        try:
            return call(*args)
        except (AttributeError, RuntimeError, TypeError) as error:
            _check_types(op, args, namespace)  # a non-tensor argument: say so as a TypeError
            raise_torch_error(error, args)
            raise

    wrapper.__signature__ = signature
    wrapper.__name__ = wrapper.__qualname__ = op["name"]
    wrapper.__doc__ = f"{op['name']}({', '.join(op['inputs'])})\n\n{op['doc']}"
    return wrapper


# ------------------------------------------------------- autograd and torch.func


class _Derivatives:
    """The declared partial derivatives d(out)/d(input), Python expressions of the inputs
    evaluated with torch ops (so they are differentiable again: hessians work)."""

    def __init__(self, op: dict):
        self.inputs = op["inputs"]
        source = f"ops/{op['name']} [derivatives]"
        self.code = {
            name: compile(expr, f"{source} {name}", "eval")
            for name, expr in (op["derivatives"] or {}).items()
        }

    def partials(self, values: tuple[torch.Tensor, ...]) -> list:
        scope = {"torch": torch, **dict(zip(self.inputs, values, strict=True))}
        return [eval(self.code[name], scope) for name in self.inputs]  # noqa: S307 - ours

    def input_grads(self, ctx, grad: torch.Tensor) -> tuple:
        """backward: grad * d(out)/d(input) for each input that needs it."""
        partials = self.partials(ctx.saved_tensors)
        return tuple(
            _times(grad, p) if needed else None
            for p, needed in zip(partials, ctx.needs_input_grad, strict=True)
        )


def _times(value, partial):
    """value * partial, skipping the multiplication by a constant 1 (add's derivatives)."""
    if isinstance(partial, (int, float)) and partial == 1:
        return value
    return value * partial


def make_function(op: dict, below_autograd) -> type[torch.autograd.Function]:
    """The op as an autograd.Function: backward and jvp from the declared derivatives, a
    vmap rule generated by torch (the forward calls the op, which has a batching rule)."""
    derivatives = _Derivatives(op)

    class Function(torch.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(*args):
            return below_autograd(*args)

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(*inputs)
            ctx.save_for_forward(*inputs)

        @staticmethod
        def backward(ctx, grad):
            return derivatives.input_grads(ctx, grad)

        @staticmethod
        def jvp(ctx, *tangents):
            partials = derivatives.partials(ctx.saved_tensors)
            terms = [_times(t, p) for t, p in zip(tangents, partials, strict=True) if t is not None]
            total = terms[0]
            for term in terms[1:]:
                total = total + term
            return total

    Function.__name__ = Function.__qualname__ = f"{op['name']}_function"
    return Function


def make_autograd_kernel(op: dict, below_autograd, namespace: str, function=None):
    """torch.ops.<namespace>.<op>'s autograd: the op's autograd.Function (`function`, from
    the declared derivatives; None: the op declares none) for plain autograd,
    torch.compile's AOTAutograd and opcheck. torch.func transforms and forward-mode AD
    reach an op's autograd kernel below the point where torch.func can handle an
    autograd.Function, and would get a zero tangent there: they get an error naming the
    Python function that supports them."""
    qualname = f"{namespace}.{op['name']}"

    def kernel(*args):
        differentiating = torch.is_grad_enabled() and any(a.requires_grad for a in args)
        transformed = fast_path.transformed()
        if function is None and (differentiating or transformed):
            raise RuntimeError(
                f"{qualname}: has no derivative (its ops.toml declares none), so it "
                "cannot be differentiated"
            )
        if transformed:
            raise RuntimeError(
                f"torch.ops.{qualname}: torch.func transforms (grad, jvp, jacrev, ...) and "
                f"forward-mode AD need the Python function {namespace}.{op['name']}, which "
                "carries the op's derivatives; call that instead"
            )
        try:
            return function.apply(*args) if differentiating else below_autograd(*args)
        except RuntimeError as error:
            raise_torch_error(error, args)
            raise

    return kernel


def make_vmap_rule(overload):
    """Batching rule: inputs of one shape, so move each batch dimension to the front,
    expand the unbatched inputs to the batch, call the op once."""

    def rule(info, in_dims, *args):
        moved = [
            a.movedim(d, 0) if d is not None else a.expand(info.batch_size, *a.shape)
            for a, d in zip(args, in_dims, strict=True)
        ]
        return overload(*moved), 0

    return rule


_LIBRARIES: list = []  # the registrations live as long as their Library object


def register_python_parts(namespace: str = NAMESPACE) -> dict[str, Callable]:
    """Autograd and vmap rules for every declared op of `namespace` (the JIT
    build has its own); returns the Python wrappers by op name."""
    library = torch.library.Library(namespace, "IMPL")
    _LIBRARIES.append(library)
    wrappers = {}
    for name, op in DECLARATIONS.items():
        qualname = f"{namespace}::{name}"
        overload, twin = overloads(op, namespace)
        torch.library.register_vmap(qualname, make_vmap_rule(overload))
        torch.library.register_vmap(twin, make_vmap_rule(twin))
        below_autograd = fast_path.below_autograd(twin, overload)
        function = make_function(op, below_autograd) if op["derivatives"] is not None else None
        kernel = make_autograd_kernel(op, below_autograd, namespace, function)
        library.impl(name, kernel, "Autograd")
        wrappers[name] = make_wrapper(op, namespace, function=function)
    return wrappers


def public_route(name: str, namespace: str = NAMESPACE) -> Callable:
    """The Python function of op `name` as a torch without fast_path's private checks
    gets it (every call through the op's autograd.Function or the public op): what the
    tests and the benchmark's host-time table run next to the fast route."""
    op = DECLARATIONS[name]
    overload, twin = overloads(op, namespace)
    below_autograd = fast_path.below_autograd(twin, overload, private=None)
    function = make_function(op, below_autograd) if op["derivatives"] is not None else None
    return make_wrapper(op, namespace, function=function, private=None)
