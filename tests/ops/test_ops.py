"""Every declared op against its torch reference (ops.toml): every dtype, size, offset and
layout, bitwise; the add's own classic smoke test."""

from __future__ import annotations

import pytest
import torch
from conftest import DECLARED
from hypothesis import given, settings
from hypothesis import strategies as st

import cuda_ext_example
from cuda_ext_example import SUPPORTED_DTYPES
from tests.helpers import assert_bitwise_equal, random_tensor

DTYPES = list(SUPPORTED_DTYPES)
# 2^20 + 3 is past 2 MiB per tensor for 4-byte types and up: the 4-vectors-per-thread
# vector shape; 3 * 2^20 + 5 is past it for every dtype (pyproject.toml elementwise).
SIZES = [0, 1, 7, 33, 1000, 2**20 + 3, 3 * 2**20 + 5]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("size", SIZES)
def test_matches_reference(any_op, device, dtype, size):
    inputs = [random_tensor((size,), dtype, device) for _ in range(any_op.arity)]
    assert_bitwise_equal(any_op(*inputs), any_op.reference(*inputs))


def test_classic_arange_smoke(op, device):
    a = torch.arange(5, device=device)
    out = op(a, a + 10)
    assert out.dtype == torch.int64
    assert out.tolist() == [10, 12, 14, 16, 18]
    if device == "cuda":
        assert repr(out) == "tensor([10, 12, 14, 16, 18], device='cuda:0')"


def test_torch_ops_namespace_is_the_same_op(any_op, device):
    inputs = [random_tensor((100,), torch.float32, device) for _ in range(any_op.arity)]
    raw = getattr(torch.ops.cuda_ext_example, any_op.__name__)
    assert_bitwise_equal(raw(*inputs), any_op.reference(*inputs))
    assert_bitwise_equal(raw.default(*inputs), any_op.reference(*inputs))


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.int64, torch.int8], ids=str)
@pytest.mark.parametrize("offset", [1, 2, 3, 5, 8, 15])
def test_unaligned_storage_offsets(any_op, device, dtype, offset):
    # x[offset:] is not 16-byte aligned: the vectorized kernel must still be right.
    n = 1000 + offset
    a = random_tensor((n,), dtype, device)[offset:]
    b = random_tensor((n,), dtype, device)[offset // 2 :][: n - offset]
    assert a.storage_offset() == offset
    inputs = [a, b, a.flip(0)][: any_op.arity]
    assert_bitwise_equal(any_op(*inputs), any_op.reference(*inputs))


@pytest.mark.parametrize(
    "make_view",
    [
        pytest.param(lambda t: t.t(), id="transpose"),
        pytest.param(lambda t: t[:, ::3], id="strided-columns"),
        pytest.param(lambda t: t[1:, 2:], id="offset-2d"),
        pytest.param(lambda t: t[:1].expand(t.shape[0], -1), id="expanded"),
    ],
)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float64, torch.int32], ids=str)
def test_non_contiguous_inputs(any_op, device, make_view, dtype):
    inputs = [make_view(random_tensor((37, 41), dtype, device)) for _ in range(any_op.arity)]
    out = any_op(*inputs)
    assert out.is_contiguous()
    assert_bitwise_equal(out, any_op.reference(*inputs))


@pytest.mark.parametrize("shape", [(), (0,), (0, 3), (2, 0, 5), (1, 1, 1)], ids=str)
def test_empty_and_zero_dim(any_op, device, shape):
    inputs = [random_tensor(shape, torch.float32, device) for _ in range(any_op.arity)]
    out = any_op(*inputs)
    assert out.shape == torch.Size(shape)
    assert_bitwise_equal(out, any_op.reference(*inputs))


def test_output_is_a_new_tensor(any_op, device):
    inputs = [random_tensor((64,), torch.float32, device) for _ in range(any_op.arity)]
    before = [t.clone() for t in inputs]
    out = any_op(*inputs)
    assert out.data_ptr() not in [t.data_ptr() for t in inputs]
    for t, was in zip(inputs, before, strict=True):
        assert_bitwise_equal(t, was)


def test_special_float_values(any_op, device):
    values = [0.0, -0.0, float("inf"), -float("inf"), 1e-45, 3.4e38, -3.4e38, 65504.0]
    a = torch.tensor(values, device=device)
    inputs = [a, a.flip(0), a.roll(3)][: any_op.arity]
    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
        typed = [t.to(dtype) for t in inputs]
        assert_bitwise_equal(any_op(*typed), any_op.reference(*typed))
    nan = torch.tensor([float("nan")], device=device)
    assert torch.isnan(any_op(*[nan] * any_op.arity)).all()


@settings(max_examples=60, deadline=None)
@given(
    shape=st.lists(st.integers(0, 9), min_size=0, max_size=4),
    dtype=st.sampled_from(DTYPES),
    op_name=st.sampled_from(list(DECLARED)),
    offset=st.integers(0, 7),
    transpose=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
)
def test_random_shapes_hypothesis(shape, dtype, op_name, offset, transpose, seed):
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    gen = torch.Generator().manual_seed(seed)
    numel = 1
    for s in shape:
        numel *= s
    op = DECLARED[op_name]
    for device in devices:
        flats = [random_tensor((numel + offset,), dtype, device, gen) for _ in range(op.arity)]
        inputs = [flat[offset:].view(shape) for flat in flats]
        if transpose and len(shape) >= 2:
            inputs = [t.transpose(0, -1) for t in inputs]
        assert_bitwise_equal(op(*inputs), op.reference(*inputs))


# ------------------------------------------------------------------- GPU only


@pytest.mark.gpu
def test_runs_on_current_stream_under_graph_capture(any_op):
    # Capture forbids launching on the legacy default stream: a kernel that
    # ignored torch's current stream would fail capture or miss the replay.
    inputs = [random_tensor((4099,), torch.float32, "cuda") for _ in range(any_op.arity)]
    any_op(*inputs)  # warm up outside capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = any_op(*inputs)
    new_first = random_tensor((4099,), torch.float32, "cuda")
    inputs[0].copy_(new_first)
    graph.replay()
    torch.cuda.synchronize()
    assert_bitwise_equal(out, any_op.reference(new_first, *inputs[1:]))


@pytest.mark.gpu
def test_side_stream_orders_with_producer(op):
    # The producer of `a` and our op share a side stream that is busy sleeping:
    # only a launch on that stream sees the finished values.
    side = torch.cuda.Stream()
    b = random_tensor((1 << 20,), torch.float32, "cuda")
    src = random_tensor((1 << 20,), torch.float32, "cuda")
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        torch.cuda._sleep(20_000_000)
        a = src * 1
        out = op(a, b)
    side.synchronize()
    assert_bitwise_equal(out, torch.add(src, b))


@pytest.mark.gpu
@pytest.mark.multigpu
def test_tensor_on_second_gpu_while_first_is_current(op):
    torch.cuda.set_device(0)
    a = random_tensor((100_003,), torch.float32, "cuda:1")
    b = random_tensor((100_003,), torch.float32, "cuda:1")
    out = op(a, b)
    assert out.device == torch.device("cuda:1")
    assert torch.cuda.current_device() == 0
    assert_bitwise_equal(out, torch.add(a, b))


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("dtype", "offset"),
    # offset in elements: 16-byte aligned, 8-byte aligned only, 4-byte aligned only
    [(torch.float32, 0), (torch.float32, 2), (torch.float32, 1)]
    + [(torch.bfloat16, 0), (torch.bfloat16, 4), (torch.bfloat16, 2)]
    + [(torch.int8, 0), (torch.int8, 8), (torch.int8, 3)],
    ids=str,
)
def test_over_64_mib_per_tensor(any_op, dtype, offset):
    # Past 64 MiB per tensor the vectorized kernel switches to 8-byte accesses
    # (pyproject.toml elementwise): exercise that path with a tail, and its alignment
    # fallbacks.
    n = (64 << 20) // torch.empty((), dtype=dtype).element_size() + 7
    inputs = [random_tensor((n + offset,), dtype, "cuda")[offset:] for _ in range(any_op.arity)]
    assert inputs[0].numel() * inputs[0].element_size() > 64 << 20
    assert_bitwise_equal(any_op(*inputs), any_op.reference(*inputs))


@pytest.mark.gpu
@pytest.mark.large
def test_more_than_2_pow_31_elements_cuda(op):
    n = 2**31 + 17
    a = torch.empty(n, dtype=torch.int8, device="cuda").random_(-128, 128)
    b = torch.empty(n, dtype=torch.int8, device="cuda").random_(-128, 128)
    out = op(a, b)
    ref = torch.add(a, b)
    assert torch.equal(out[-1000:], ref[-1000:])  # the part a 32-bit index would miss
    assert torch.equal(out, ref)


@pytest.mark.large
@pytest.mark.slow  # 20 s on a two-core CPU
def test_more_than_2_pow_31_elements_cpu():
    n = 2**31 + 17
    chunk = random_tensor((1 << 20,), torch.int8, "cpu")
    a = chunk.repeat(n // chunk.numel() + 1)[:n]
    b = a.flip(0)
    out = cuda_ext_example.my_add(a, b)
    ref = torch.add(a, b)
    assert torch.equal(out[-1000:], ref[-1000:])
    assert torch.equal(out, ref)
