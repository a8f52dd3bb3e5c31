"""The ops behave as real torch ops, tested once for the core: torch.compile of an in-place
op, the op in compiled graphs, traces, exports and modes, autograd, the Python function's
fast route below the autograd kernel and the public route without it, and the errors of a
call's Python arguments. Each op's opcheck, compile, gradients and transforms:
test_declared_ops.py."""

from __future__ import annotations

import collections
import subprocess
import sys

import pytest
import torch
from conftest import DECLARED

import cuda_ext_example
from tests.helpers import assert_bitwise_equal, random_tensor


def overload(op):
    return getattr(torch.ops.cuda_ext_example, op.__name__).default


def test_torch_compile_of_an_in_place_op(device):
    # Functionalization turns the mutation into a functional op and writes the results
    # back: the compiled step must update the caller's tensors as the eager one does.
    torch._dynamo.reset()
    op = DECLARED["my_adamw_step"]
    eager = op.sample((1000,), torch.float32, device)
    compiled = [t.clone() for t in eager]

    def step(param, exp_avg, exp_avg_sq, grad):
        op(param, exp_avg, exp_avg_sq, grad * 2, *op.scalars)
        return param.sum()

    want = step(*eager)
    got = torch.compile(step, fullgraph=True)(*compiled)
    for e, c in zip(eager, compiled, strict=True):
        assert_bitwise_equal(c, e)
    torch.testing.assert_close(got, want)  # a sum: inductor adds in its own order


def test_compiled_graph_contains_the_op(any_op):
    torch._dynamo.reset()
    seen = []

    def backend(gm, example_inputs):
        seen.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
        return gm.forward

    compiled = torch.compile(lambda *x: any_op(*x, *any_op.scalars), backend=backend,
                             fullgraph=True)  # fmt: skip
    dtype = torch.float32 if torch.float32 in any_op.dtypes else any_op.dtypes[0]
    compiled(*any_op.arguments(4, dtype, "cpu")[: any_op.arity])
    assert any(t.startswith(f"cuda_ext_example.{any_op.__name__}") for t in seen), seen


def test_an_in_place_op_under_grad_says_it_has_no_derivative(device):
    op = DECLARED["my_adamw_step"]
    tensors = op.sample((8,), torch.float32, device)
    tensors[3].requires_grad_()  # the gradient input of a graph being built
    with pytest.raises(RuntimeError, match=r"my_adamw_step: has no derivative .*in place"):
        op(*tensors, *op.scalars)
    with torch.no_grad():  # as an optimizer steps
        op(*tensors, *op.scalars)


def test_scalars_by_keyword_and_default(device):
    x = random_tensor((100,), torch.float32, device)
    leaky = cuda_ext_example.my_leaky_relu
    ref = torch.nn.functional.leaky_relu
    assert_bitwise_equal(leaky(x), ref(x))  # the declared default, 0.01
    assert_bitwise_equal(leaky(x, negative_slope=0.3), ref(x, 0.3))
    assert_bitwise_equal(torch.ops.cuda_ext_example.my_leaky_relu(x, 0.3), ref(x, 0.3))
    assert "negative_slope=0.01" in str(torch.ops.cuda_ext_example.my_leaky_relu.default._schema)
    x.requires_grad_()
    leaky(x, 0.3).sum().backward()
    assert_bitwise_equal(x.grad, torch.where(x > 0, 1.0, 0.3))


def test_autograd(op, device):
    a = random_tensor((33,), torch.float64, device).requires_grad_()
    b = random_tensor((33,), torch.float64, device).requires_grad_()
    out = op(a, b)
    assert out.requires_grad
    grad = random_tensor((33,), torch.float64, device)
    out.backward(grad)
    assert_bitwise_equal(a.grad, grad)
    assert_bitwise_equal(b.grad, grad)
    assert torch.autograd.gradcheck(op, (a.detach().requires_grad_(), b.detach().requires_grad_()))


def test_autograd_one_input_requires_grad(op, device):
    a = random_tensor((8,), torch.float32, device).requires_grad_()
    b = random_tensor((8,), torch.float32, device)
    op(a, b).sum().backward()
    assert_bitwise_equal(a.grad, torch.ones_like(a))


def test_no_grad_and_inference_mode(op, device):
    a = random_tensor((8,), torch.float32, device).requires_grad_()
    b = random_tensor((8,), torch.float32, device)
    with torch.no_grad():
        assert not op(a, b).requires_grad
    with torch.inference_mode():
        assert_bitwise_equal(op(a, b), torch.add(a.detach(), b))


def _ops_run(call) -> dict[str, int]:
    """The torch ops a call ran through the dispatcher, as the profiler names them, counted."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        call()
    return dict(
        collections.Counter(
            e.name for e in prof.events() if e.name.startswith("cuda_ext_example::")
        )
    )


def _autograd_kernel_runs(call) -> int:
    """How many times the ops' Python autograd kernel ran during `call`."""
    runs = []

    def profile(frame, event, arg):
        code = frame.f_code
        if event == "call" and code.co_name == "kernel" and code.co_filename == ops_file:
            runs.append(1)

    ops_file = cuda_ext_example.ops.__file__
    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return len(runs)


def test_a_plain_call_skips_the_autograd_kernel(op, device):
    # The Python function goes below the op's autograd kernel itself (fast_path.py), where
    # torch.ops' route passes it; both run the op's kernel once.
    a = random_tensor((8,), torch.float32, device)
    name = f"cuda_ext_example::{op.__name__}"
    function = getattr(cuda_ext_example, op.__name__)
    raw = getattr(torch.ops.cuda_ext_example, op.__name__)
    assert _autograd_kernel_runs(lambda: function(a, a)) == 0
    assert _autograd_kernel_runs(lambda: function(a=a, b=a)) == 0  # the schema's names
    assert _autograd_kernel_runs(lambda: raw(a, a)) == 1
    with torch.no_grad():
        assert _autograd_kernel_runs(lambda: function(a, a.clone().requires_grad_())) == 0
    x = a.clone().requires_grad_()
    assert _autograd_kernel_runs(lambda: function(a, x).sum().backward()) == 0
    twin = f"cuda_ext_example::_{op.__name__}_no_grad"
    assert _ops_run(lambda: function(a, a)) == {twin: 1}  # one pass, no autograd kernel
    assert _ops_run(lambda: function(a, x)) == {name: 1}


def test_the_twin_called_directly_under_grad_is_not_silent(op, device):
    # The twin is private and has no autograd kernel: torch's autograd fallback must say so
    # at backward, naming it, rather than leave a gradient out without a word.
    x = random_tensor((8,), torch.float32, device).requires_grad_()
    twin = getattr(torch.ops.cuda_ext_example, f"_{op.__name__}_no_grad")
    with pytest.warns(UserWarning, match=f"_{op.__name__}_no_grad: an autograd kernel"):
        twin(x, x).sum().backward()


def test_a_plain_training_step_passes_the_dispatcher_once_per_op(device):
    # The training Function's forward and backward call each op below autograd: one pass
    # each, with the same outputs and gradients as torch.ops' route.
    op = DECLARED["my_rms_norm"]
    args = op.arguments(33, torch.float32, device)

    def step(function):
        inputs = [a.detach().clone().requires_grad_() if isinstance(a, torch.Tensor) else a
                  for a in args]  # fmt: skip
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as trace:
            out = function(*inputs)
            out.sum().backward()
        passes = collections.Counter(
            e.name for e in trace.events() if e.name.startswith("cuda_ext_example::")
        )
        return out, [a.grad for a in inputs if isinstance(a, torch.Tensor)], passes

    fast_out, fast_grads, fast = step(cuda_ext_example.my_rms_norm)
    public_out, public_grads, public = step(torch.ops.cuda_ext_example.my_rms_norm)
    assert public["cuda_ext_example::my_rms_norm"] == 2
    assert fast == {"cuda_ext_example::my_rms_norm": 1, "cuda_ext_example::my_rms_norm_backward": 1}
    torch.testing.assert_close(fast_out, public_out, rtol=0, atol=0)
    for ours, theirs in zip(fast_grads, public_grads, strict=True):
        torch.testing.assert_close(ours, theirs, rtol=0, atol=0)


def test_tracing_and_function_modes_see_the_public_op(op, device):
    # A trace that recorded a call below autograd would replay without gradients, so every
    # trace and mode must see the public op even in no-grad calls.
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.overrides import TorchFunctionMode

    a = random_tensor((8,), torch.float64, device)
    public = getattr(torch.ops.cuda_ext_example, op.__name__).default
    with torch.no_grad():
        graph = make_fx(op)(a, a).graph
        traced = torch.jit.trace(op, (a, a), check_trace=False)
    assert public in [n.target for n in graph.nodes]
    assert f"cuda_ext_example::{op.__name__}(" in str(traced.graph)
    x = a.clone().requires_grad_()
    traced(x, a).sum().backward()  # the trace replays the public op: its gradient
    assert_bitwise_equal(x.grad, torch.ones_like(x))

    class Log(TorchFunctionMode):
        def __init__(self):
            super().__init__()
            self.funcs = []

        def __torch_function__(self, func, types, args=(), kwargs=None):
            self.funcs.append(func)
            return func(*args, **(kwargs or {}))

    with Log() as log:
        op(a, a)
    ops_seen = [f for f in log.funcs if isinstance(f, torch._ops.OpOverload)]  # not getters
    assert ops_seen == [public]

    class Tagged(torch.Tensor):  # a subclass sees the public op through torch_function
        seen: list = []

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            cls.seen.append(func)
            return super().__torch_function__(func, types, args, kwargs or {})

    op(a.as_subclass(Tagged), a)
    assert Tagged.seen[0] is public


@pytest.mark.parametrize("strict", [True, False], ids=["strict", "non_strict"])
def test_export_records_the_public_op(op, device, strict):
    # torch.export, strict (dynamo) or not (the model run eagerly on fake tensors under a
    # dispatch mode), must record the public op even in a no-grad call.
    class Model(torch.nn.Module):
        def forward(self, a, b):
            return op(a, b)

    a = random_tensor((8,), torch.float32, device)
    with torch.no_grad():
        program = torch.export.export(Model(), (a, a), strict=strict)
    public = getattr(torch.ops.cuda_ext_example, op.__name__).default
    targets = [n.target for n in program.graph.nodes if n.op == "call_function"]
    assert targets == [public]
    assert_bitwise_equal(program.module()(a, a), torch.add(a, a))


def test_fast_path_still_seen_by_dispatch_modes(op, device):
    # Modes and fake tensors (TLS dispatch keys) must see the public op.
    from torch.utils._python_dispatch import TorchDispatchMode

    class Log(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(str(func))
            return func(*args, **(kwargs or {}))

    a = random_tensor((4,), torch.float32, device)
    with Log() as log:
        out = op(a, a)
    assert log.ops == [f"cuda_ext_example.{op.__name__}.default"]
    assert_bitwise_equal(out, torch.add(a, a))

    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

    with FakeTensorMode() as mode:
        fake = mode.from_tensor(a)
        assert isinstance(op(fake, fake), FakeTensor)


def test_wrapper_type_error_also_when_grad_is_needed(op, device):
    a = random_tensor((3,), torch.float32, device).requires_grad_()
    message = rf"{op.__name__}: b must be a torch.Tensor or a Python number, got list"
    with pytest.raises(TypeError, match=message):
        op(a, [1.0])
    with torch.no_grad(), pytest.raises(TypeError, match="a must be a torch.Tensor"):
        op("1", a)


def test_scalar_type_errors_name_the_argument():
    x = torch.ones(3)
    with pytest.raises(TypeError, match="my_leaky_relu: negative_slope must be a Python float"):
        cuda_ext_example.my_leaky_relu(x, "0.1")
    op = DECLARED["my_adamw_step"]
    tensors = op.sample((3,), torch.float32, "cpu")
    with pytest.raises(TypeError, match="my_adamw_step: step must be a Python int, got float"):
        cuda_ext_example.my_adamw_step(*tensors, lr=1e-3, step=1.5)
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'step'"):
        cuda_ext_example.my_adamw_step(*tensors, lr=1e-3)


def test_public_api():
    assert set(cuda_ext_example.__all__) >= {"my_add", "my_fast_add", "my_square", "__version__"}
    assert set(cuda_ext_example.__all__) >= {"OP_NAMES", "SUPPORTED_DTYPES", "BUILD_INFO"}
    assert (
        tuple(getattr(torch, d) for d in cuda_ext_example.BUILD_INFO["dtypes"])
        == cuda_ext_example.SUPPORTED_DTYPES
    )


def test_every_public_name_exists_where_the_ops_cannot_load(tmp_path):
    # `python -m cuda_ext_example doctor` imports the package where its library cannot load
    # (a torch too old): every name of __all__ must exist then too, or `import *` fails.
    code = (
        "import sys, torch\n"
        "torch.__version__ = '2.0.0'\n"
        "sys.orig_argv = [sys.executable, '-m', 'cuda_ext_example']\n"
        "import cuda_ext_example as c\n"
        "assert c.LOAD_ERROR is not None\n"
        "missing = [n for n in c.__all__ if not hasattr(c, n)]\n"
        "print('MISSING', missing)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=tmp_path, timeout=300)  # fmt: skip
    assert "MISSING []" in run.stdout, run.stdout + run.stderr


def test_public_route_gives_the_same_results_errors_and_gradients(device):
    wrapper = cuda_ext_example.ops.public_route("my_add")
    a = random_tensor((1000,), torch.float32, device)
    b = random_tensor((1000,), torch.float32, device)
    assert_bitwise_equal(wrapper(a, b), torch.add(a, b))
    with pytest.raises(TypeError, match="b must be a torch.Tensor or a Python number"):
        wrapper(a, [1])
    x = a.clone().requires_grad_()
    wrapper(x, b).sum().backward()
    assert_bitwise_equal(x.grad, torch.ones_like(a))
    # torch.func handles the autograd.Function the public route applies
    tangent = torch.func.jvp(lambda t: wrapper(t, t), (a,), (torch.ones_like(a),))[1]
    assert_bitwise_equal(tangent, torch.full_like(a, 2.0))
    batched = torch.func.vmap(wrapper)(a.view(10, 100), b.view(10, 100))
    assert_bitwise_equal(batched, torch.add(a, b).view(10, 100))


def test_fast_path_needs_every_private_api():
    import types

    from cuda_ext_example import fast_path

    assert fast_path.lookup() is not None  # this torch has them all
    assert fast_path.lookup(types.SimpleNamespace()) is None
    assert fast_path.lookup(forward_ad=types.SimpleNamespace()) is None
    # without them: no call below autograd, no torch.func check, every call the Function's
    overload = torch.ops.cuda_ext_example.my_add.default
    assert fast_path.below_autograd(overload, private=None) is None
    assert fast_path.transformed(private=None) is False
    function = object()
    assert fast_path.route(overload, None, function, overload, 2, private=None) is function
