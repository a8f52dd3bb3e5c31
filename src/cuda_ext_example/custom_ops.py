"""Python face of the ops that are not elementwise (kind = "custom" in ops/<folder>/ops.toml),
made from their declarations in the build record: the Python function, the fake kernel
(each output from its declared expression) and autograd (the declared backward), through
torch.library (an Autograd kernel of our own, or register_autograd where torch lacks the
private checks of fast_path.py).

The ops themselves (schema, CPU and CUDA kernels) are registered by the compiled extension
(csrc/custom_ops.cpp). Nothing here names an op.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable

import torch

from ._build_info import load_build_info
from .torch_errors import raise_torch_error

NAMESPACE = "cuda_ext_example"
# name -> what ops.toml declares: arguments, outputs, fake, backward, reference, samples, ...
CUSTOM: dict[str, dict] = {op["name"]: op for op in (load_build_info() or {}).get("custom_ops", [])}


def python_signature(op: dict) -> inspect.Signature:
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    return inspect.Signature(
        [
            inspect.Parameter(a["name"], kind)
            if a["default"] is None
            else inspect.Parameter(a["name"], kind, default=a["default"])
            for a in op["arguments"]
        ]
    )


# namespace -> the Python functions register() made: what a backward calls (each takes its
# own autograd.Function under a torch.func transform, which the bare op cannot).
_FUNCTIONS: dict[str, dict[str, Callable]] = {}


def expression_scope(op: dict, namespace: str = NAMESPACE) -> dict:
    """What an op's expressions see: torch, its folder's reference.py functions, and every
    custom op of `namespace` by name (a backward calls another op). Made once per op."""
    key = (namespace, op["name"])
    if key in _SCOPES:
        return _SCOPES[key]
    from .ops import python_scope

    scope = {**python_scope(op), **_FUNCTIONS.get(namespace, {})}
    if namespace in _FUNCTIONS:  # complete: kept
        _SCOPES[key] = scope
    return scope


_SCOPES: dict[tuple[str, str], dict] = {}


def _values(op: dict, args) -> dict:
    """The arguments by name, defaults filled in (torch passes only those the caller gave)."""
    names = [a["name"] for a in op["arguments"]]
    values = {a["name"]: a["default"] for a in op["arguments"][len(args) :]}
    values.update(zip(names, args, strict=False))
    return values


def _compiled(op: dict, key: str, expression: str):
    return compile(expression, f"ops/{op['folder']}/ops.toml [[op]] {op['name']} {key}", "eval")


def _check_types(op: dict, args: tuple, namespace: str) -> None:
    """A TypeError naming the first argument of the wrong type."""
    from .ops import wrong_type

    for argument, value in zip(op["arguments"], args, strict=False):
        error = wrong_type(f"{namespace}.{op['name']}", argument["name"], argument["type"], value)
        if error:
            raise error


def _result_names(op: dict, prefix: str) -> list[str]:
    return [prefix] if op["outputs"] == 1 else [f"{prefix}{j}" for j in range(op["outputs"])]


def _names_in(expression: str) -> set[str]:
    return {n.id for n in ast.walk(ast.parse(expression, mode="eval")) if isinstance(n, ast.Name)}


class Autograd:
    """An op's declared backward for torch.library.register_autograd and its
    autograd.Functions: an expression of the arguments, the outputs (out, or out0, out1, ...)
    and their gradients (grad, or grad0, ...) giving one gradient per tensor argument. An op
    that declares none raises when differentiated: never a silent zero gradient.

    The expression is made a function of the saved values, in the order backward has them,
    once (at the first backward, when every op it may call exists), not a scope a call:
    `backward` over the Python functions (differentiable again, seen by torch.func), and
    `backward_below` over each op's call below autograd, for a backward that builds no
    graph. The outputs are saved only if the expression names one."""

    def __init__(self, op: dict, namespace: str = NAMESPACE):
        arguments = op["arguments"]
        self.op, self.namespace = op, namespace
        self.qualname = f"{namespace}.{op['name']}"
        self.tensors = [i for i, a in enumerate(arguments) if a["type"] == "Tensor"]
        self.scalars = [i for i, a in enumerate(arguments) if a["type"] != "Tensor"]
        self.defaults = tuple(a["default"] for a in arguments)
        outputs = _result_names(op, "out")
        self.saves_outputs = bool(op["backward"]) and bool(set(outputs) & _names_in(op["backward"]))
        self.unsaved_outputs = () if self.saves_outputs else (None,) * len(outputs)
        parameters = [arguments[i]["name"] for i in self.tensors + self.scalars]
        parameters += outputs + _result_names(op, "grad")
        self.code = (
            _compiled(op, "backward", f"lambda {', '.join(parameters)}: ({op['backward']})")
            if op["backward"]
            else None
        )
        self.made: dict[bool, Callable] = {}  # below autograd? -> the expression's function
        leading = self.tensors == list(range(len(self.tensors)))
        self.trailing = (None,) * len(self.scalars) if leading else None

    def setup_context(self, ctx, inputs, output):
        inputs = tuple(inputs) + self.defaults[len(inputs) :]  # torch passes those given
        outputs = ()
        if self.saves_outputs:
            outputs = (output,) if self.op["outputs"] == 1 else tuple(output)
        ctx.save_for_backward(*[inputs[i] for i in self.tensors], *outputs)
        ctx.scalars = [inputs[i] for i in self.scalars]

    def backward(self, ctx, *grads):
        return self._gradients(ctx, grads, below=False)

    def backward_below(self, ctx, *grads):
        return self._gradients(ctx, grads, below=True)

    def _function(self, below: bool) -> Callable:
        if self.code is None:
            raise RuntimeError(
                f"{self.qualname}: its ops.toml declares no backward, so it cannot be "
                "differentiated"
            )
        function = self.made.get(below)
        if function is None:
            scope = expression_scope(self.op, self.namespace)
            if below:
                scope = {**scope, **_BELOW_OPS.get(self.namespace, {})}
            function = eval(self.code, scope)  # noqa: S307 - ours
            if self.namespace in _FUNCTIONS:  # every op's function exists: kept
                self.made[below] = function
        return function

    def _gradients(self, ctx, grads, below: bool) -> tuple:
        function = self._function(below)
        saved = ctx.saved_tensors
        count = len(self.tensors)
        outputs = saved[count:] if self.saves_outputs else self.unsaved_outputs
        result = function(*saved[:count], *ctx.scalars, *outputs, *grads)
        result = (result,) if isinstance(result, torch.Tensor) else tuple(result)
        if len(result) != count:
            names = [self.op["arguments"][i]["name"] for i in self.tensors]
            raise RuntimeError(
                f"{self.qualname}: its backward gave {len(result)} gradients for the "
                f"{count} tensor arguments {names}"
            )
        if self.trailing is not None:  # the tensors come first: the scalars' Nones after
            return (*result, *self.trailing)
        given = iter(result)
        return tuple(next(given) if i in self.tensors else None for i in range(len(self.defaults)))


def make_function(op: dict, call: Callable, autograd: Autograd, namespace: str = NAMESPACE) -> type:
    """The op as an autograd.Function, with its declared backward `autograd` and its
    forward `call` (the op below autograd): what torch.func transforms use (they cannot
    see through the op's autograd kernel), and every call where torch lacks the private
    checks. vmap runs the op once per batch element (no
    batching rule is declared); forward-mode AD raises: no tangent rule is."""
    qualname = f"{namespace}.{op['name']}"

    class Function(torch.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(*args):
            return call(*args)

        @staticmethod
        def setup_context(ctx, inputs, output):
            autograd.setup_context(ctx, inputs, output)

        @staticmethod
        def backward(ctx, *grads):
            return autograd.backward(ctx, *grads)

        @staticmethod
        def jvp(ctx, *tangents):
            raise RuntimeError(
                f"{qualname}: forward-mode AD (torch.func.jvp, jacfwd) is not supported: its "
                "ops.toml declares a backward only; use reverse mode (torch.func.grad, vjp)"
            )

    Function.__name__ = Function.__qualname__ = f"{op['name']}_function"
    return Function


def make_plain_function(op: dict, below: Callable, autograd: Autograd) -> type:
    """make_function's twin for plain autograd, the commonest training call, made for host
    time (a small training step is host time): its forward saves for the backward itself
    (an autograd.Function with a separate setup_context, which torch.func needs, makes torch
    bind the arguments to forward's signature at every call), and both call the ops below
    autograd (`below`, backward_below) instead of through the Python functions and their
    checks. A backward that is itself differentiated (create_graph) takes the Python
    functions."""

    class PlainFunction(torch.autograd.Function):
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

    PlainFunction.__name__ = PlainFunction.__qualname__ = f"{op['name']}_plain_function"
    return PlainFunction


def leading_tensors(op: dict) -> int | None:
    """How many arguments the op's tensors are, if they all come first (what fast_path's
    checks take); None if a scalar comes before a tensor."""
    kinds = [a["type"] == "Tensor" for a in op["arguments"]]
    count = kinds.index(False) if False in kinds else len(kinds)
    return None if any(kinds[count:]) else count


def make_wrapper(
    op: dict,
    function: type,
    namespace: str = NAMESPACE,
    plain: type | None = None,
    below: Callable | None = None,
) -> Callable:
    """The Python function: the schema's signature and defaults, one call of the op. A
    plain call outside every mode and trace goes below the op's autograd kernel itself:
    through `plain` (its autograd.Function for plain autograd) where a tensor needs a
    gradient, else straight to `below` (the op below autograd), a pass through the
    dispatcher and a Python frame less each (fast_path.py). Every other call takes the
    public op; under a torch.func transform, or where that cannot be known, the op's
    autograd.Function `function`."""
    from . import fast_path

    overload = getattr(getattr(torch.ops, namespace), op["name"]).default
    signature = python_signature(op)
    count = len(op["arguments"])
    tensors = leading_tensors(op)
    call = None
    if plain is not None and below is not None and tensors is not None:
        call = fast_path.plain_call_to_twin(
            overload, below, function.apply, tensors=tensors, grad_call=plain.apply
        )
    if call is None:  # the public route: torch.func handles an autograd.Function itself
        call = function.apply if fast_path.PRIVATE is None else _public_call(overload, function)

    def wrapper(*args, **kwargs):
        if kwargs or len(args) != count:  # binding costs microseconds: only when needed
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            args = bound.args
        try:
            return call(*args)
        except (RuntimeError, TypeError) as error:
            _check_types(op, args, namespace)
            raise_torch_error(error, args)
            raise

    wrapper.__signature__ = signature
    wrapper.__name__ = wrapper.__qualname__ = op["name"]
    wrapper.__doc__ = f"{op['name']}{signature}\n\n{op['doc']}"
    return wrapper


def _public_call(overload, function: type) -> Callable:
    """The public op, or the op's autograd.Function under a torch.func transform."""
    from .fast_path import transformed

    def call(*args):
        return function.apply(*args) if transformed() else overload(*args)

    return call


def make_fake(op: dict, namespace: str = NAMESPACE) -> Callable:
    """The fake kernel: each output from its declared expression of the arguments."""
    codes = [_compiled(op, "fake", e) for e in op["fake"]]

    def fake(*args):
        scope = {**expression_scope(op, namespace), **_values(op, args)}
        outputs = tuple(eval(code, scope) for code in codes)  # noqa: S307 - ours
        return outputs[0] if len(outputs) == 1 else outputs

    return fake


def make_autograd_kernel(op: dict, function: type, below: Callable, namespace: str = NAMESPACE):
    """The op's autograd kernel: its autograd.Function where a tensor argument needs a
    gradient, else the op below autograd (`below`). One Python frame a call, where
    torch.library.register_autograd's kernel costs tens of microseconds: what small shapes
    pay in training. torch.func reaches this kernel below the point where it handles an
    autograd.Function: it gets an error naming the Python function instead."""
    tensors = [i for i, a in enumerate(op["arguments"]) if a["type"] == "Tensor"]
    defaults = tuple(a["default"] for a in op["arguments"])
    qualname = f"{namespace}.{op['name']}"
    from .fast_path import transformed

    def kernel(*args):
        args = args + defaults[len(args) :]  # torch passes the arguments the caller gave
        if transformed():
            raise RuntimeError(
                f"torch.ops.{qualname}: torch.func transforms (grad, vjp, vmap, ...) need the "
                f"Python function {qualname}, which carries the op's backward; call that instead"
            )
        if torch.is_grad_enabled() and any(args[i].requires_grad for i in tensors):
            return function.apply(*args)
        return below(*args)

    return kernel


_LIBRARIES: list = []  # the registrations live as long as their Library object
# namespace -> op name -> its call below autograd: what backward_below calls.
_BELOW_OPS: dict[str, dict[str, Callable]] = {}


def register(namespace: str = NAMESPACE) -> dict[str, Callable]:
    """Fake kernels and autograd for every custom op of `namespace`; returns the Python
    functions by op name."""
    if not CUSTOM:
        return {}
    from .fast_path import PRIVATE, below_autograd

    library = torch.library.Library(namespace, "FRAGMENT")
    _LIBRARIES.append(library)
    ops = getattr(torch.ops, namespace)
    if PRIVATE is not None:
        overloads = {name: getattr(ops, name).default for name in CUSTOM}
        _BELOW_OPS[namespace] = {name: below_autograd(o, o) for name, o in overloads.items()}
    wrappers = {}
    for name, op in CUSTOM.items():
        qualname = f"{namespace}::{name}"
        overload = getattr(ops, name).default
        torch.library.register_fake(qualname, make_fake(op, namespace), lib=library)
        autograd = Autograd(op, namespace)  # its expression compiled once for every use
        plain = below = None
        if PRIVATE is None:  # no public call below autograd: torch.library's own autograd
            torch.library.register_autograd(
                qualname, autograd.backward, setup_context=autograd.setup_context, lib=library
            )
            function = make_function(op, overload, autograd, namespace)
        else:
            below = _BELOW_OPS[namespace][name]
            function = make_function(op, below, autograd, namespace)
            plain = make_plain_function(op, below, autograd)
            library.impl(name, make_autograd_kernel(op, plain, below, namespace), "Autograd")
        wrappers[name] = make_wrapper(op, function, namespace, plain, below)
    _FUNCTIONS[namespace] = wrappers
    return wrappers
