"""Every op that is not elementwise (kind = "custom" in ops/*/ops.toml), from its declaration
alone: its reference on each dtype and size, opcheck (schema, fake kernel, autograd
registration, AOT dispatch), the Python function's signature and errors, and for the ops
that declare a backward, gradients against torch's (float64 gradcheck too), torch.compile
forward and backward, and torch.func."""

from __future__ import annotations

import collections

import pytest
import torch

import cuda_ext_example
from cuda_ext_example import custom_ops, fast_path, op_checks

CUSTOM = custom_ops.CUSTOM
DIFFERENTIABLE = [name for name, op in CUSTOM.items() if op["backward"]]
SIZES = [1, 7, 300, 1024, 4099]  # each op's declared samples take the size n


@pytest.fixture(params=list(CUSTOM))
def custom(request):
    return CUSTOM[request.param]


def dtypes_of(op):
    return [getattr(torch, d) for d in op["dtypes"]]


def test_every_custom_op_is_a_public_function_with_the_schemas_signature():
    assert CUSTOM, "no custom op in the build record"
    for name, op in CUSTOM.items():
        function = getattr(cuda_ext_example, name)
        assert name in cuda_ext_example.OP_NAMES and name in cuda_ext_example.__all__
        assert list(function.__signature__.parameters) == [a["name"] for a in op["arguments"]]
        assert function.__doc__.startswith(f"{name}(") and op["doc"] in function.__doc__
        schema = getattr(torch.ops.cuda_ext_example, name).default._schema
        declared = [(a["name"], a["type"], a["default"]) for a in op["arguments"]]
        assert [(a.name, str(a.type), a.default_value) for a in schema.arguments] == declared
        assert len(schema.returns) == op["outputs"]


@pytest.mark.parametrize("n", SIZES)
def test_matches_its_reference_on_every_dtype(custom, device, n):
    for dtype in dtypes_of(custom):
        problem = op_checks.check_one(cuda_ext_example, custom["name"], device, dtype, n)
        assert problem is None, f"{dtype} n={n}: {problem}"


@pytest.mark.gpu
@pytest.mark.multigpu
@pytest.mark.parametrize("n", [300, 8192])
def test_on_the_second_gpu_while_the_first_is_current(custom, n):
    # Each GPU resolves its own kernels and answers its own occupancy (the backward's grid):
    # cuda:0 first, then cuda:1 with cuda:0 still current, each against the CPU reference.
    torch.cuda.set_device(0)
    for device in ("cuda:0", "cuda:1"):
        for dtype in dtypes_of(custom):
            problem = op_checks.check_one(cuda_ext_example, custom["name"], device, dtype, n)
            assert problem is None, f"{device} {dtype} n={n}: {problem}"
    args = op_checks.custom_arguments(custom, "cuda:1", dtypes_of(custom)[0], n)
    out = getattr(cuda_ext_example, custom["name"])(*args)
    assert all(
        o.device == torch.device("cuda:1") for o in (out if isinstance(out, tuple) else (out,))
    )
    assert torch.cuda.current_device() == 0


def test_opcheck(custom, device):
    args = op_checks.custom_arguments(custom, device, dtypes_of(custom)[-1], 33)
    overload = getattr(torch.ops.cuda_ext_example, custom["name"]).default
    torch.library.opcheck(overload, args)
    if custom["backward"]:
        grad_args = [
            a.requires_grad_() if isinstance(a, torch.Tensor) and a.is_floating_point() else a
            for a in args
        ]
        torch.library.opcheck(overload, grad_args)


def test_a_wrong_type_or_dtype_is_named(custom):
    name = custom["name"]
    function = getattr(cuda_ext_example, name)
    args = op_checks.custom_arguments(custom, "cpu", dtypes_of(custom)[0], 8)
    first = next(a["name"] for a in custom["arguments"] if a["type"] == "Tensor")
    with pytest.raises(TypeError, match=f"{name}: {first} must be a torch.Tensor, got list"):
        function([1.0], *args[1:])
    undeclared = next(
        d for d in (torch.int32, torch.complex64) if str(d)[6:] not in custom["dtypes"]
    )
    wrong = [a.to(undeclared) if isinstance(a, torch.Tensor) else a for a in args]
    with pytest.raises(RuntimeError, match=f"{name}: .* is {undeclared}; supported: "):
        function(*wrong)


def leaves(args: list) -> list:
    """The arguments with each tensor a fresh leaf that requires grad."""
    return [a.detach().clone().requires_grad_() if isinstance(a, torch.Tensor) else a for a in args]


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_gradients_match_torchs_and_gradcheck_in_float64(name, device):
    op = CUSTOM[name]
    function = getattr(cuda_ext_example, name)
    reference = op_checks.custom_reference(op)
    args = op_checks.custom_arguments(op, device, torch.float64, 17)
    tensors = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]

    ours, theirs = leaves(args), leaves(args)
    (function(*ours).sin().sum()).backward()
    (reference(*theirs).sin().sum()).backward()
    for i in tensors:
        torch.testing.assert_close(ours[i].grad, theirs[i].grad)
    assert torch.autograd.gradcheck(function, tuple(leaves(args)))


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_a_plain_training_step_passes_the_dispatcher_once_per_op(name, device):
    # The Python function goes below the op's autograd kernel itself (fast_path.py): one
    # dispatcher pass per op, where torch.ops' route takes two (the autograd kernel, then
    # below it), with the same outputs and gradients.
    op = CUSTOM[name]
    if fast_path.PRIVATE is None or custom_ops.leading_tensors(op) is None:
        pytest.skip("no fast route here: every call takes torch.ops' route")
    args = op_checks.custom_arguments(op, device, torch.float32, 33)
    tensors = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]

    def step(function):
        inputs = leaves(args)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as trace:
            out = function(*inputs)
            (out if isinstance(out, torch.Tensor) else out[0]).sum().backward()
        passes = collections.Counter(
            e.name for e in trace.events() if e.name.startswith("cuda_ext_example::")
        )
        return out, [inputs[i].grad for i in tensors], passes

    fast_out, fast_grads, fast = step(getattr(cuda_ext_example, name))
    public_out, public_grads, public = step(getattr(torch.ops.cuda_ext_example, name))
    assert public[f"cuda_ext_example::{name}"] == 2
    assert fast[f"cuda_ext_example::{name}"] == 1
    assert set(fast.values()) == {1}, fast  # the backward's ops too
    torch.testing.assert_close(fast_out, public_out, rtol=0, atol=0)
    for ours, theirs in zip(fast_grads, public_grads, strict=True):
        torch.testing.assert_close(ours, theirs, rtol=0, atol=0)


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_torch_compile_fullgraph_forward_and_backward(name, device):
    op = CUSTOM[name]
    torch._dynamo.reset()
    function = getattr(cuda_ext_example, name)
    reference = op_checks.custom_reference(op)
    args = op_checks.custom_arguments(op, device, torch.float32, 64)
    tensors = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]

    compiled = torch.compile(lambda *a: function(*a).sin().sum(), fullgraph=True)
    ours, theirs = leaves(args), leaves(args)
    compiled(*ours).backward()
    reference(*theirs).sin().sum().backward()
    tol = op["tolerance"]["float32"]
    for i in tensors:
        torch.testing.assert_close(ours[i].grad, theirs[i].grad, **tol)


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_torch_func_grad_and_vmap_follow_torch_and_jvp_raises(name, device):
    op = CUSTOM[name]
    function = getattr(cuda_ext_example, name)
    reference = op_checks.custom_reference(op)
    args = op_checks.custom_arguments(op, device, torch.float64, 9)

    def loss(f):
        return lambda first, *rest: f(first, *rest).sin().sum()

    torch.testing.assert_close(
        torch.func.grad(loss(function))(*args), torch.func.grad(loss(reference))(*args)
    )
    batched = [
        args[0].unsqueeze(0).expand(3, *args[0].shape)
        * torch.arange(1, 4, device=device).view(3, *[1] * args[0].dim())
    ]
    got = torch.func.vmap(lambda first: function(first, *args[1:]))(*batched)
    want = torch.stack([reference(b, *args[1:]) for b in batched[0]])
    torch.testing.assert_close(got, want)
    with pytest.raises(RuntimeError, match=f"{name}: forward-mode AD .* is not supported"):
        torch.func.jvp(lambda first: function(first, *args[1:]), (args[0],), (args[0],))


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_torch_func_through_torch_ops_is_refused_with_the_function_to_call(name, device):
    # torch.func reaches the op's autograd kernel below where it sees the backward: an
    # error naming the Python function, never a silent zero gradient.
    op = CUSTOM[name]
    args = op_checks.custom_arguments(op, device, torch.float64, 9)
    raw = getattr(torch.ops.cuda_ext_example, name)
    if fast_path.PRIVATE is None:
        pytest.skip("this torch lacks the private checks: the op's autograd is torch.library's")
    with pytest.raises(RuntimeError, match=f"need the Python function cuda_ext_example.{name}"):
        torch.func.grad(lambda first, *rest: raw(first, *rest).sum())(*args)


def test_an_op_with_no_backward_refuses_to_be_differentiated(device):
    no_backward = [name for name, op in CUSTOM.items() if not op["backward"]]
    assert no_backward, "every custom op declares a backward: nothing to check"
    name = no_backward[0]
    args = op_checks.custom_arguments(CUSTOM[name], device, torch.float64, 5)
    args = [a.requires_grad_() if isinstance(a, torch.Tensor) else a for a in args]
    out = getattr(cuda_ext_example, name)(*args)
    out = out if isinstance(out, torch.Tensor) else out[0]
    with pytest.raises(RuntimeError, match=f"{name}: its ops.toml declares no backward"):
        out.sum().backward()


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_a_backward_with_create_graph_is_recorded_and_equals_the_plain_one(name, device):
    # A plain backward runs its ops below autograd; one that builds a graph (create_graph)
    # must take the Python functions, so that its own gradient is taken or refused.
    op = CUSTOM[name]
    args = op_checks.custom_arguments(op, device, torch.float64, 9)
    tensors = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
    inputs = leaves(args)
    out = getattr(cuda_ext_example, name)(*inputs)
    out = out if isinstance(out, torch.Tensor) else out[0]
    # The output's gradient needs one too: a linear op's gradients depend on it alone (and
    # are views of it, which need one wherever it does: the plain step takes it detached).
    grad = torch.randn_like(out).requires_grad_()
    wrt = [inputs[i] for i in tensors]
    plain = torch.autograd.grad(out, wrt, grad.detach(), retain_graph=True)
    recorded = torch.autograd.grad(out, wrt, grad, create_graph=True)
    assert not any(g.requires_grad for g in plain)
    assert all(g.requires_grad for g in recorded)
    for ours, theirs in zip(recorded, plain, strict=True):
        torch.testing.assert_close(ours, theirs, rtol=0, atol=0)
    try:
        second = torch.autograd.grad(recorded[0].sum(), [*wrt, grad], allow_unused=True)
    except RuntimeError as error:  # an op the backward calls declares no backward itself
        assert "its ops.toml declares no backward" in str(error)
    else:
        assert any(g is not None for g in second)


class SavingContext:
    """What an autograd.Function's ctx gives Autograd: save_for_backward, saved_tensors."""

    def save_for_backward(self, *tensors):
        self.saved_tensors = tensors


@pytest.mark.parametrize(
    ("backward", "saved"), [("grad * out * alpha", 2), ("grad * alpha * 2 * x", 1)]
)
@pytest.mark.parametrize("tensor_first", [True, False])
def test_the_backward_saves_the_output_only_where_it_names_it(backward, saved, tensor_first):
    x_argument = {"name": "x", "type": "Tensor", "default": None}
    alpha_argument = {"name": "alpha", "type": "float", "default": 3.0}
    arguments = [x_argument, alpha_argument] if tensor_first else [alpha_argument, x_argument]
    op = {"name": "scale", "folder": "none", "arguments": arguments, "outputs": 1}
    autograd = custom_ops.Autograd({**op, "backward": backward}, namespace="test_only")
    x = torch.rand(5, dtype=torch.float64) + 1
    out = x * x
    ctx = SavingContext()
    autograd.setup_context(ctx, (x,) if tensor_first else (3.0, x), out)
    assert len(ctx.saved_tensors) == saved
    grads = autograd.backward(ctx, torch.ones_like(out))
    assert len(grads) == 2 and grads[1 if tensor_first else 0] is None
    # What each expression gives, with out = x * x and alpha = 3.
    expected = 2 * 3.0 * x if saved == 1 else 3.0 * out
    torch.testing.assert_close(grads[0 if tensor_first else 1], expected)
