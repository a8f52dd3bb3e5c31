"""The Python face of every declared op, made from its declaration in the build record: its
Python function (with the op's real signature), autograd (from its backward: declared, or
derived by the build from [derivatives]), forward-mode AD (from [derivatives]) and a vmap
rule for the ops that broadcast.

The ops themselves (schema, CPU, CUDA and meta kernels, every input check) are registered by
the compiled library through the LibTorch stable ABI. Nothing here names an op.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Callable

import torch

from . import fast_path
from ._build_info import load_build_info
from .torch_errors import raise_torch_error

NAMESPACE = "cuda_ext_example"
_RECORD = load_build_info() or {}
# name -> what its ops.toml declares: arguments, outputs, reference, backward, samples, ...
DECLARATIONS: dict[str, dict] = {op["name"]: op for op in _RECORD.get("ops", [])}
OP_NAMES = tuple(DECLARATIONS)
# The dtypes of pyproject.toml's core, which the build writes into the record.
SUPPORTED_DTYPES = tuple(getattr(torch, name) for name in _RECORD.get("dtypes", []))


def tensor_names(op: dict) -> list[str]:
    return [a["name"] for a in op["arguments"] if a["type"] == "Tensor"]


def argument_names(op: dict) -> list[str]:
    return [a["name"] for a in op["arguments"]]


# ------------------------------------------------------------------- the function

SCALAR_TYPES = {"float": (float, int), "int": (int,), "bool": (bool,)}
NUMBERS = (int, float, bool)


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


def _explain(op: dict, namespace: str, error: BaseException, args: tuple) -> None:
    """Raises what a failed call really was: the first argument of the wrong type (the
    dispatcher's own message names none of the op's arguments), or torch's own exception
    for a torch call that failed inside the op; else returns (the caller re-raises)."""
    qualname = f"{namespace}.{op['name']}"
    for argument, value in zip(op["arguments"], args, strict=False):
        also = " or a Python number" if argument["number"] else ""
        problem = wrong_type(qualname, argument["name"], argument["type"], value, also)
        if problem:
            raise problem from None
    raise_torch_error(error, args)


def numbers_to_tensors(op: dict, args: tuple, namespace: str = NAMESPACE) -> tuple:
    """Python numbers where the declaration allows them become 0-dim tensors of the
    tensors' dtype and device (the strided kernel reads them with stride 0: nothing is
    expanded). A float for integer tensors is refused: torch would promote the result."""
    qualname = f"{namespace}.{op['name']}"
    tensors = op["arguments"][: len(tensor_names(op))]
    like = next((a for a in args[: len(tensors)] if isinstance(a, torch.Tensor)), None)
    out = list(args)
    for k, argument in enumerate(tensors):
        value, name = args[k], argument["name"]
        if not argument["number"] or not isinstance(value, NUMBERS):
            continue  # a tensor, or what _explain names
        if like is None:
            raise TypeError(f"{qualname}: at least one of {tensor_names(op)} must be a tensor")
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
        out[k] = number.to(like.device, non_blocking=True)
    return tuple(out)


def make_python_function(op: dict, call: Callable, namespace: str = NAMESPACE) -> Callable:
    """The op's Python function, made once with its real signature (the schema's names and
    defaults), so that a call binds its arguments as any Python function does: `call` takes
    them all, positionally. Python numbers become tensors where the op allows them; a call
    that fails is explained (_explain)."""
    params = []
    for a in op["arguments"]:
        params.append(a["name"] if a["default"] is None else f"{a['name']}={a['default']!r}")
    names = ", ".join(argument_names(op))
    numbers = [a["name"] for a in op["arguments"] if a["number"]]
    convert = ""
    if numbers:
        test = " or ".join(f"type({n}) in _numbers" for n in numbers)
        convert = f"    if {test}:\n        {names}, = _to_tensors(({names},))\n"
    source = (
        f"def {op['name']}({', '.join(params)}):\n"
        f"{convert}"
        f"    try:\n"
        f"        return _call({names})\n"
        f"    except (AttributeError, RuntimeError, TypeError) as error:\n"
        f"        _explain(error, ({names},))\n"
        f"        raise\n"
    )
    scope = {
        "_call": call,
        "_numbers": frozenset(NUMBERS),
        "_to_tensors": lambda args: numbers_to_tensors(op, args, namespace),
        "_explain": lambda error, args: _explain(op, namespace, error, args),
        "inf": float("inf"),  # a default's repr
    }
    exec(compile(source, f"<{namespace}.{op['name']}>", "exec"), scope)  # noqa: S102 - ours
    function = scope[op["name"]]
    function.__doc__ = f"{op['name']}{op['schema'][len(op['name']) :]}\n\n{op['doc']}"
    function.__module__ = __package__
    return function


# ------------------------------------------------------- autograd and torch.func


def unbroadcast(grad: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """grad summed back to an input's shape, where the op broadcast the input."""
    shape = like.shape
    if grad.shape == shape:
        return grad
    extra = grad.dim() - len(shape)
    dims = tuple(range(extra)) + tuple(
        extra + d for d, size in enumerate(shape) if size == 1 and grad.shape[extra + d] != 1
    )
    summed = grad.sum(dim=dims, keepdim=True) if dims else grad
    return summed.reshape(shape)


def tangent_sum(*terms):
    """The sum of the tangents' terms that are there (a None tangent has no term)."""
    present = [t for t in terms if t is not None]
    total = present[0]
    for term in present[1:]:
        total = total + term
    return total


def python_scope(op: dict) -> dict:
    """What an op's expressions (reference, backward, jvp) see besides its arguments:
    torch, the core's helpers and its folder's reference.py functions (installed as
    op_references.<folder>)."""
    scope = {"torch": torch, "unbroadcast": unbroadcast, "tangent_sum": tangent_sum}
    try:
        module = importlib.import_module(f"{__package__}.op_references.{op['folder']}")
    except ModuleNotFoundError:
        return scope
    scope.update({k: v for k, v in vars(module).items() if not k.startswith("_")})
    return scope


def _names_in(expression: str) -> set[str]:
    return {n.id for n in ast.walk(ast.parse(expression, mode="eval")) if isinstance(n, ast.Name)}


def _results(op: dict, prefix: str) -> list[str]:
    n = len(op["outputs"])
    return [prefix] if n == 1 else [f"{prefix}{j}" for j in range(n)]


class Autograd:
    """An op's backward (an expression of its arguments, its outputs `out`/`out0`.. and their
    gradients `grad`/`grad0`.., giving one gradient per tensor input) and jvp, each compiled
    once into a function of the values in the order autograd has them. The backward may
    call other ops: `backward` over their Python functions (differentiable again, seen by
    torch.func), `backward_below` over their calls below autograd (a backward that builds no
    graph). The outputs are saved only if the backward names one. An op that declares no
    backward raises when a gradient is asked of it, never a silent zero."""

    def __init__(self, op: dict, namespace: str, functions: dict, below_ops: dict):
        self.op, self.namespace = op, namespace
        self.qualname = f"{namespace}.{op['name']}"
        self.functions, self.below_ops = functions, below_ops  # filled by register()
        kinds = [a["type"] == "Tensor" for a in op["arguments"]]
        self.tensors = [i for i, tensor in enumerate(kinds) if tensor]
        self.scalars = [i for i, tensor in enumerate(kinds) if not tensor]
        self.defaults = tuple(a["default"] for a in op["arguments"])
        names = argument_names(op)
        ordered = [names[i] for i in self.tensors + self.scalars]
        where = f"ops/{op['folder']}/ops.toml [[op]] {op['name']}"
        outputs, grads = _results(op, "out"), _results(op, "grad")
        backward = op["backward"]
        self.saves_outputs = bool(backward) and bool(set(outputs) & _names_in(backward))
        self.unsaved = (None,) * len(outputs)
        parameters = ", ".join([*ordered, *outputs, *grads, "needs_grad"])
        self.code = None
        if backward:
            self.code = compile(f"lambda {parameters}: ({backward})", f"{where} backward", "eval")
        self.jvp_code = None
        if op["jvp"]:
            tangents = ", ".join(f"tangent_{names[i]}" for i in self.tensors)
            lambda_ = f"lambda {', '.join(ordered)}, {tangents}: ({op['jvp']})"
            self.jvp_code = compile(lambda_, f"{where} jvp", "eval")
        self.made: dict = {}

    def setup_context(self, ctx, inputs, output):
        inputs = tuple(inputs) + self.defaults[len(inputs) :]  # torch passes those given
        outputs = ()
        if self.saves_outputs:
            outputs = (output,) if len(self.op["outputs"]) == 1 else tuple(output)
        tensors = [inputs[i] for i in self.tensors]
        ctx.save_for_backward(*tensors, *outputs)
        if self.jvp_code is not None:
            ctx.save_for_forward(*tensors)
        ctx.scalars = [inputs[i] for i in self.scalars]

    def _function(self, below: bool) -> Callable:
        if self.code is None:
            raise RuntimeError(
                f"{self.qualname}: has no derivative (its ops.toml declares no backward), so "
                "it cannot be differentiated"
            )
        function = self.made.get(below)
        if function is None:
            scope = {**python_scope(self.op), **self.functions}
            if below:
                scope.update(self.below_ops)
            function = self.made[below] = eval(self.code, scope)  # noqa: S307 - ours
        return function

    def backward(self, ctx, *grads):
        return self._gradients(ctx, grads, below=False)

    def backward_below(self, ctx, *grads):
        return self._gradients(ctx, grads, below=True)

    def _gradients(self, ctx, grads, below: bool) -> tuple:
        saved = ctx.saved_tensors
        count = len(self.tensors)
        outputs = saved[count:] if self.saves_outputs else self.unsaved
        needs = [ctx.needs_input_grad[i] for i in self.tensors]
        result = self._function(below)(*saved[:count], *ctx.scalars, *outputs, *grads, needs)
        result = (result,) if isinstance(result, torch.Tensor) else tuple(result)
        if len(result) != count:
            names = [self.op["arguments"][i]["name"] for i in self.tensors]
            raise RuntimeError(
                f"{self.qualname}: its backward gave {len(result)} gradients for the "
                f"{count} tensor inputs {names}"
            )
        given = iter(result)
        return tuple(next(given) if i in self.tensors else None for i in range(len(self.defaults)))

    def jvp(self, ctx, *tangents):
        if self.jvp_code is None:
            raise RuntimeError(
                f"{self.qualname}: forward-mode AD (torch.func.jvp, jacfwd) is not supported: its "
                "ops.toml declares no [derivatives]; use reverse mode (torch.func.grad, vjp)"
            )
        function = self.made.get("jvp")
        if function is None:
            function = self.made["jvp"] = eval(self.jvp_code, python_scope(self.op))  # noqa: S307
        return function(*ctx.saved_tensors, *ctx.scalars, *[tangents[i] for i in self.tensors])


def make_function(op: dict, forward: Callable, autograd: Autograd) -> type:
    """The op as an autograd.Function: what torch.func transforms and forward-mode AD use
    (they cannot see through the op's autograd kernel), and every call where torch lacks
    fast_path's private checks. vmap runs its forward under the op's batching rule where it
    broadcasts, else one call per batch element."""

    class Function(torch.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(*args):
            return forward(*args)

        @staticmethod
        def setup_context(ctx, inputs, output):
            autograd.setup_context(ctx, inputs, output)

        @staticmethod
        def backward(ctx, *grads):
            return autograd.backward(ctx, *grads)

        @staticmethod
        def jvp(ctx, *tangents):
            return autograd.jvp(ctx, *tangents)

    Function.__name__ = Function.__qualname__ = f"{op['name']}_function"
    return Function


def make_training_function(op: dict, below: Callable, autograd: Autograd) -> type:
    """The op as a second autograd.Function, for eager autograd, the commonest training
    call, made for host time: its forward saves for the backward itself (a separate
    setup_context, which torch.func needs, makes torch bind the arguments to forward's
    signature every call), and both call the ops below autograd. A backward that is itself
    differentiated (create_graph) calls the Python functions."""

    class TrainingFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *args):
            output = below(*args)
            autograd.setup_context(ctx, args, output)
            return output

        @staticmethod
        def backward(ctx, *grads):
            if torch.is_grad_enabled():
                return autograd.backward(ctx, *grads)
            return autograd.backward_below(ctx, *grads)

    TrainingFunction.__name__ = TrainingFunction.__qualname__ = f"{op['name']}_training_function"
    return TrainingFunction


def make_autograd_kernel(op: dict, training: type | None, below: Callable, namespace: str):
    """torch.ops.<namespace>.<op>'s autograd kernel: the training Function where a tensor
    input needs a gradient, else the op below autograd. torch.func reaches this kernel below
    the point where it handles an autograd.Function: it gets an error naming the Python
    function instead (never a silent zero tangent)."""
    tensors = [i for i, a in enumerate(op["arguments"]) if a["type"] == "Tensor"]
    defaults = tuple(a["default"] for a in op["arguments"])
    qualname = f"{namespace}.{op['name']}"
    mutates = any(a["mutable"] for a in op["arguments"])

    def kernel(*args):
        args = args + defaults[len(args) :]  # torch passes the arguments the caller gave
        differentiating = torch.is_grad_enabled() and any(args[i].requires_grad for i in tensors)
        transformed = fast_path.transformed()
        if training is None and (differentiating or transformed):
            raise RuntimeError(
                f"{qualname}: has no derivative (its ops.toml declares none"
                + (", and it updates inputs in place" if mutates else "")
                + "), so it cannot be differentiated"
            )
        if transformed:
            raise RuntimeError(
                f"torch.ops.{qualname}: torch.func transforms (grad, jvp, vmap, ...) and "
                f"forward-mode AD need the Python function {qualname}, which carries the "
                "op's derivatives; call that instead"
            )
        try:
            return training.apply(*args) if differentiating else below(*args)
        except RuntimeError as error:
            raise_torch_error(error, args)
            raise

    return kernel


def make_vmap_rule(op: dict, overload, namespace: str = NAMESPACE):
    """Batching rule of an op that broadcasts: each batched input's batch dimension moved to
    the front, with size-1 dimensions after it up to the call's rank, so the op's
    broadcasting lines the batch up; unbatched inputs broadcast as they are. One call."""
    count = len(tensor_names(op))
    outputs = len(op["outputs"])

    def rule(info, in_dims, *args):
        if any(a["mutable"] for a in op["arguments"]):
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
        return overload(*moved, *args[count:]), (0 if outputs == 1 else (0,) * outputs)

    return rule


_LIBRARIES: list = []  # the registrations live as long as their Library object


def register(namespace: str = NAMESPACE, private=fast_path.PRIVATE) -> dict[str, Callable]:
    """Autograd, forward-mode AD and vmap rules for every declared op of `namespace` (the JIT
    build has its own); returns the Python functions by op name."""
    library = torch.library.Library(namespace, "IMPL")
    _LIBRARIES.append(library)
    ops = getattr(torch.ops, namespace)
    functions: dict[str, Callable] = {}
    below_ops: dict[str, Callable] = {}
    for name, op in DECLARATIONS.items():
        overload = getattr(ops, name).default
        below_ops[name] = fast_path.below_autograd(overload, private)
        if op["broadcasts"]:
            torch.library.register_vmap(
                f"{namespace}::{name}", make_vmap_rule(op, overload, namespace)
            )
    for name, op in DECLARATIONS.items():
        overload, below = getattr(ops, name).default, below_ops[name]
        function = training = None
        # An op that updates its inputs in place has no Function: differentiating it raises
        # at the call. Any other op has one, which raises at backward where it declares none.
        if not any(a["mutable"] for a in op["arguments"]):
            autograd = Autograd(op, namespace, functions, below_ops)
            if private is None:  # no public call below autograd: torch.library's own autograd
                torch.library.register_autograd(
                    f"{namespace}::{name}",
                    autograd.backward,
                    setup_context=autograd.setup_context,
                    lib=library,
                )
                function = make_function(op, overload, autograd)
            else:
                function = make_function(op, below, autograd)
                training = make_training_function(op, below, autograd)
        if private is not None:
            library.impl(name, make_autograd_kernel(op, training, below, namespace), "Autograd")
        # An eager call goes to the op's no-grad twin: a microsecond less than the exclusion
        # of autograd's keys (below), which the autograd kernel keeps so traces see the op.
        twin = fast_path.raw_op(getattr(ops, op["no_grad_twin"]).default)
        call = fast_path.route(
            overload, twin, function.apply if function else overload,
            training.apply if training else overload, len(tensor_names(op)), private,
        )  # fmt: skip
        functions[name] = make_python_function(op, call, namespace)
    return functions


def public_route(name: str, namespace: str = NAMESPACE) -> Callable:
    """Op `name`'s Python function as a torch without fast_path's private checks gets it:
    every call through its autograd.Function (or the public op, for an op that updates its
    inputs in place). What the tests and the benchmark's host-time table run beside the
    fast route."""
    op = DECLARATIONS[name]
    overload = getattr(getattr(torch.ops, namespace), name).default
    if any(a["mutable"] for a in op["arguments"]):
        return make_python_function(op, overload, namespace)
    functions = {n: getattr(importlib.import_module(__package__), n) for n in DECLARATIONS}
    autograd = Autograd(op, namespace, functions, {})
    forward = fast_path.below_autograd(overload) or overload
    return make_python_function(op, make_function(op, forward, autograd).apply, namespace)
