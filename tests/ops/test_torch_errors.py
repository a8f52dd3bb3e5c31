"""A torch call that fails inside an op surfaces torch's own exception: its type and its
words, as torch's own ops raise them, and the process goes on."""

from __future__ import annotations

import multiprocessing

import pytest
import torch

import cuda_ext_example
from cuda_ext_example._loader import version_tuple

# 2**60 elements of float32 (4 EiB, past any address space, so no allocator overcommits it)
# that take no memory until an op packs or copies them.
HUGE = 2**60


def huge_inputs(device: str, arity: int) -> tuple[torch.Tensor, ...]:
    return tuple(torch.zeros(1, device=device).expand(HUGE) for _ in range(arity))


def torch_own_error(device: str) -> BaseException:
    """What torch itself raises for the same allocation."""
    with pytest.raises(Exception) as caught:
        torch.empty(HUGE, device=device)
    return caught.value


def same_words(ours: str, torchs: str) -> bool:
    """Equal up to the memory figures that move between two calls (CUDA's message says how
    much the process has in use): compared up to the first of them."""
    return ours.split(" GiB is free")[0] == torchs.split(" GiB is free")[0]


def call_routes(op_name: str):
    """The two ways users call an op: the Python function and torch.ops."""
    return {
        "python function": getattr(cuda_ext_example, op_name),
        "torch.ops": getattr(torch.ops.cuda_ext_example, op_name),
    }


@pytest.mark.parametrize("route", ["python function", "torch.ops"])
def test_out_of_memory_is_torchs_own(functional_op, device, route):
    # The output of a huge broadcast call (the inputs are expanded views: no memory).
    any_op = functional_op
    if not any_op.broadcasts:
        pytest.skip("its inputs must be as large as its output")
    expected = torch_own_error(device)
    if device == "cuda":  # torch's CPU allocator raises a plain RuntimeError
        assert isinstance(expected, torch.OutOfMemoryError)
    call = call_routes(any_op.__name__)[route]
    with pytest.raises(RuntimeError) as caught:
        call(*huge_inputs(device, any_op.arity), *any_op.scalars)
    assert type(caught.value) is type(expected)
    assert same_words(str(caught.value), str(expected))
    # the op's own words stay in the chain: which op and which torch call failed
    assert f"cuda_ext_example.{any_op.__name__}: torch call failed (" in str(caught.value.__cause__)
    # and the process goes on
    any_op.check([torch.ones(8, device=device)] * any_op.arity)


@pytest.mark.skipif(
    version_tuple(torch.__version__) < (2, 13),
    reason="torch < 2.13 does not hand its message to extensions",
)
def test_torch_words_reach_callers_below_python(device):
    """Under inference_mode torch.ops skips the Python autograd kernel: no Python
    re-raise, but torch's own message still comes through the C++ side."""
    expected = str(torch_own_error(device)).splitlines()[0]
    with torch.inference_mode(), pytest.raises(RuntimeError) as caught:
        torch.ops.cuda_ext_example.my_add(*huge_inputs(device, 2))
    assert "torch call failed (allocating the output)" in str(caught.value)
    assert expected in str(caught.value)


def test_other_runtime_errors_pass_unchanged(op):
    with pytest.raises(RuntimeError, match="the shapes do not broadcast") as caught:
        op(torch.ones(3), torch.ones(4))
    assert type(caught.value) is RuntimeError
    assert caught.value.__cause__ is None


def _child_calls(function, queue, a, b) -> None:
    try:
        function(a, b)
        queue.put(("no error", ""))
    except BaseException as error:  # report whatever it was to the parent
        queue.put((type(error).__name__, str(error).splitlines()[0]))


def error_in_forked_child(function, a, b) -> tuple[str, str]:
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_child_calls, args=(function, queue, a, b))
    child.start()
    result = queue.get(timeout=120)
    child.join(timeout=60)
    return result


@pytest.mark.gpu
def test_forked_child_gets_torchs_cuda_error():
    # this process has used CUDA (the inputs were made before the fork): its child cannot
    a, b = torch.ones(4, device="cuda"), torch.ones(4, device="cuda")
    expected = error_in_forked_child(torch.add, a, b)
    assert expected[0] != "no error"
    assert error_in_forked_child(cuda_ext_example.my_fast_add, a, b) == expected
    assert error_in_forked_child(torch.ops.cuda_ext_example.my_fast_add, a, b) == expected
