"""Python face of the declared ops, made from their declarations (ops/*/ops.toml, which the
build writes into the build record): typed wrappers, autograd, and the torch.func rules
(vmap batching, forward-mode AD).

The ops themselves (schema, CPU and CUDA kernels, input checks) are registered by the
compiled extension through the LibTorch stable ABI. Nothing here names an op: a new
declaration gets all of it.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable

import torch

from . import fast_path
from ._build_info import load_build_info
from .torch_errors import raise_torch_error

NAMESPACE = "cuda_ext_example"
_RECORD = load_build_info() or {}
# name -> what ops.toml declares: inputs, scalars, outputs, reference, derivatives, ...
DECLARATIONS: dict[str, dict] = {op["name"]: op for op in _RECORD.get("ops", [])}
# Every op: the elementwise ones, then those that are not (custom_ops.py), each sorted.
OP_NAMES = tuple(DECLARATIONS) + tuple(op["name"] for op in _RECORD.get("custom_ops", []))

# The dtypes of pyproject.toml's elementwise core, which the build writes into the record.
SUPPORTED_DTYPES = tuple(getattr(torch, name) for name in _RECORD.get("dtypes", []))


def _tensor_count(op: dict) -> int:
    return len(op["inputs"])


def _python_signature(op: dict) -> inspect.Signature:
    """The op's Python signature: its tensors, then its scalars with their defaults."""
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    tensors = [inspect.Parameter(x, kind) for x in op["inputs"]]
    scalars = [
        inspect.Parameter(s["name"], kind, default=s["default"])
        if s["default"] is not None
        else inspect.Parameter(s["name"], kind)
        for s in op["scalars"]
    ]
    return inspect.Signature(tensors + scalars)


SCALAR_TYPES = {"float": (float, int), "int": (int,), "bool": (bool,)}


def wrong_type(qualname: str, name: str, kind: str, value, also: str = "") -> TypeError | None:
    """The TypeError for an argument `name` of schema type `kind` ("Tensor", "float", "int",
    "bool") given `value`, or None where the value fits (a bool is no number here)."""
    if kind == "Tensor":
        fits, wanted = isinstance(value, torch.Tensor), f"a torch.Tensor{also}"
    else:
        number = isinstance(value, SCALAR_TYPES[kind])
        fits = number and (kind == "bool" or not isinstance(value, bool))
        wanted = f"a Python {kind}"
    if fits:
        return None
    return TypeError(f"{qualname}: {name} must be {wanted}, got {type(value).__name__}")


def _check_types(op: dict, args: tuple, namespace: str = NAMESPACE) -> None:
    """A TypeError naming the first argument of the wrong type (the dispatcher's own
    message names none of the op's arguments)."""
    qualname = f"{namespace}.{op['name']}"
    count = _tensor_count(op)
    for name, value in zip(op["inputs"], args[:count], strict=False):
        also = " or a Python number" if name in op["numbers"] else ""
        error = wrong_type(qualname, name, "Tensor", value, also)
        if error:
            raise error
    for scalar, value in zip(op["scalars"], args[count:], strict=False):
        error = wrong_type(qualname, scalar["name"], scalar["type"], value)
        if error:
            raise error


def _numbers_to_tensors(op: dict, args: list, namespace: str) -> None:
    """Python numbers where the declaration allows them become 0-dim tensors of the
    tensors' dtype and device (the strided kernel reads them with stride 0: nothing is
    expanded). A float for integer tensors is refused: torch would promote the result."""
    like = next((a for a in args[: _tensor_count(op)] if isinstance(a, torch.Tensor)), None)
    for k, name in enumerate(op["inputs"]):
        value = args[k]
        if name not in op["numbers"] or isinstance(value, torch.Tensor):
            continue
        if not isinstance(value, (int, float)):
            continue  # _check_types names it
        qualname = f"{namespace}.{op['name']}"
        if like is None:
            raise TypeError(f"{qualname}: at least one of {op['inputs']} must be a tensor")
        if isinstance(value, float) and not like.dtype.is_floating_point:
            raise TypeError(
                f"{qualname}: {name}={value} is a float and the tensors are {like.dtype}; "
                "torch would promote the result to a float dtype: pass float tensors"
            )
        try:
            number = torch.full((), value, dtype=like.dtype)
        except RuntimeError as error:  # torch's overflow check: int8 and 1000
            raise TypeError(f"{qualname}: {name}={value}: {error}") from None
        if like.dtype in (torch.float16, torch.bfloat16) and float(number) != value:
            # torch computes with the number in float32: rounding it first would differ.
            raise TypeError(
                f"{qualname}: {name}={value} is not exactly a {like.dtype}, and torch "
                f"would compute with it in float32; pass a tensor (torch.tensor({value}, "
                f"dtype={like.dtype}) rounds it first)"
            )
        args[k] = number.to(like.device, non_blocking=True)


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
    tensors = _tensor_count(op)
    call = fast_path.plain_call_to_twin(overload, twin, transformed, private, tensors)
    if call is None:  # the public route: torch.func handles an autograd.Function itself
        call = transformed
    signature = _python_signature(op)
    plain = len(op["scalars"]) == 0 and not op["numbers"]

    def wrapper(*args, **kwargs):
        if not plain or kwargs or len(args) != tensors:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            args = list(bound.args)
            if op["numbers"]:
                _numbers_to_tensors(op, args, namespace)
        try:
            return call(*args)
        except (AttributeError, RuntimeError, TypeError) as error:
            _check_types(op, tuple(args), namespace)
            raise_torch_error(error, tuple(args))
            raise

    wrapper.__signature__ = signature
    wrapper.__name__ = wrapper.__qualname__ = op["name"]
    wrapper.__doc__ = f"{op['name']}{signature}\n\n{op['doc']}"
    return wrapper


# ------------------------------------------------------- autograd and torch.func


def python_scope(op: dict) -> dict:
    """What an op's Python expressions (reference, derivatives) see: torch, and the
    functions of its folder's reference.py (installed as op_references.<folder>)."""
    scope = {"torch": torch}
    try:
        module = importlib.import_module(f"{__package__}.op_references.{op['folder']}")
    except ModuleNotFoundError:
        return scope
    scope.update({k: v for k, v in vars(module).items() if not k.startswith("_")})
    return scope


class _Derivatives:
    """The declared partial derivatives d(out)/d(input), Python expressions of the
    arguments evaluated with torch ops (so they are differentiable again: hessians work)."""

    def __init__(self, op: dict):
        self.inputs = op["inputs"]
        self.scalars = [s["name"] for s in op["scalars"]]
        self.scope = python_scope(op)
        source = f"ops/{op['folder']}/ops.toml [derivatives]"
        self.code = {
            name: compile(expr, f"{source} {name}", "eval")
            for name, expr in (op["derivatives"] or {}).items()
        }

    def partials(self, values: tuple[torch.Tensor, ...], scalars: tuple) -> list:
        scope = {
            **self.scope,
            **dict(zip(self.inputs, values, strict=True)),
            **dict(zip(self.scalars, scalars, strict=True)),
        }
        return [eval(self.code[name], scope) for name in self.inputs]  # noqa: S307 - ours

    def input_grads(self, ctx, grad: torch.Tensor) -> tuple:
        """backward: grad * d(out)/d(input) for each input that needs it, summed over
        the dimensions it was broadcast along; None for the scalars."""
        partials = self.partials(ctx.saved_tensors, ctx.scalars)
        grads = tuple(
            _unbroadcast(_times(grad, p), value.shape) if needed else None
            for p, needed, value in zip(
                partials, ctx.needs_input_grad, ctx.saved_tensors, strict=False
            )
        )
        return grads + (None,) * len(self.scalars)


def _unbroadcast(grad: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """grad summed back to an input's shape, where the op broadcast the input."""
    if grad.shape == shape:
        return grad
    extra = grad.dim() - len(shape)
    dims = tuple(range(extra)) + tuple(
        extra + d for d, size in enumerate(shape) if size == 1 and grad.shape[extra + d] != 1
    )
    summed = grad.sum(dim=dims, keepdim=True) if dims else grad
    return summed.reshape(shape)


def _times(value, partial):
    """value * partial, skipping the multiplication by a constant 1 (add's derivatives)."""
    if isinstance(partial, (int, float)) and partial == 1:
        return value
    return value * partial


def make_function(op: dict, below_autograd) -> type[torch.autograd.Function]:
    """The op as an autograd.Function: backward and jvp from the declared derivatives, a
    vmap rule generated by torch (the forward calls the op, which has a batching rule)."""
    derivatives = _Derivatives(op)
    count = _tensor_count(op)

    class Function(torch.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(*args):
            return below_autograd(*args)

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(*inputs[:count])
            ctx.save_for_forward(*inputs[:count])
            ctx.scalars = inputs[count:]

        @staticmethod
        def backward(ctx, grad):
            return derivatives.input_grads(ctx, grad)

        @staticmethod
        def jvp(ctx, *tangents):
            partials = derivatives.partials(ctx.saved_tensors, ctx.scalars)
            terms = [
                _times(t, p)
                for t, p in zip(tangents[:count], partials, strict=True)
                if t is not None
            ]
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

    count = _tensor_count(op)
    defaults = [s["default"] for s in op["scalars"]]

    def kernel(*args):
        # torch passes the arguments the caller gave: the scalars left out take defaults
        args = args + tuple(defaults[len(args) - count :])
        differentiating = torch.is_grad_enabled() and any(a.requires_grad for a in args[:count])
        transformed = fast_path.transformed()
        if function is None and (differentiating or transformed):
            raise RuntimeError(
                f"{qualname}: has no derivative (its ops.toml declares none"
                + (", and it updates inputs in place" if op["mutates"] else "")
                + "), so it cannot be differentiated"
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


def make_vmap_rule(op: dict, overload, namespace: str = NAMESPACE):
    """Batching rule: each batched input's batch dimension moved to the front, with
    size-1 dimensions after it up to the call's rank, so the op's broadcasting lines the
    batch up; unbatched inputs broadcast as they are. One call of the op."""
    count = _tensor_count(op)

    def rule(info, in_dims, *args):
        if op["mutates"]:
            raise RuntimeError(
                f"{namespace}.{op['name']}: vmap over an op that updates its inputs in "
                "place is not supported; loop over the batch, or call it on whole tensors"
            )
        tensors = args[:count]
        rank = max(
            (t.dim() - (d is not None) for t, d in zip(tensors, in_dims, strict=False)),
            default=0,
        )
        moved = []
        for t, d in zip(tensors, in_dims, strict=False):
            if d is None:
                moved.append(t)
                continue
            t = t.movedim(d, 0)
            moved.append(t.reshape(t.shape[0], *([1] * (rank - t.dim() + 1)), *t.shape[1:]))
        out = overload(*moved, *args[count:])
        return out, (0 if len(op["outputs"]) == 1 else (0,) * len(op["outputs"]))

    return rule


_LIBRARIES: list = []  # the registrations live as long as their Library object


def register_python_parts(namespace: str = NAMESPACE) -> dict[str, Callable]:
    """Autograd and vmap rules for every declared op of `namespace` (the JIT
    build has its own), and the custom ops' fake kernels and autograd; returns the Python
    wrappers by op name."""
    library = torch.library.Library(namespace, "IMPL")
    _LIBRARIES.append(library)
    wrappers = {}
    for name, op in DECLARATIONS.items():
        qualname = f"{namespace}::{name}"
        overload, twin = overloads(op, namespace)
        torch.library.register_vmap(qualname, make_vmap_rule(op, overload, namespace))
        torch.library.register_vmap(twin, make_vmap_rule(op, twin, namespace))
        below_autograd = fast_path.below_autograd(twin, overload)
        function = make_function(op, below_autograd) if op["derivatives"] is not None else None
        kernel = make_autograd_kernel(op, below_autograd, namespace, function)
        library.impl(name, kernel, "Autograd")
        wrappers[name] = make_wrapper(op, namespace, function=function)
    from . import custom_ops  # the ops that are not elementwise

    wrappers.update(custom_ops.register(namespace))
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
