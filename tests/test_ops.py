"""my_add / my_fast_add against torch.add: every dtype, size, offset and layout, bitwise."""

from __future__ import annotations

import pytest
import torch
from helpers import assert_bitwise_equal, random_tensor
from hypothesis import given, settings
from hypothesis import strategies as st

import cuda_ext_example
from cuda_ext_example import SUPPORTED_DTYPES

DTYPES = list(SUPPORTED_DTYPES)
# 2^20 + 3 is past 2 MiB per tensor for 4-byte types and up: the 4-vectors-per-thread
# shape of my_fast_add; 3 * 2^20 + 5 is past it for every dtype (csrc/add_kernels.cu).
SIZES = [0, 1, 7, 33, 1000, 2**20 + 3, 3 * 2**20 + 5]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("size", SIZES)
def test_matches_torch_add(op, device, dtype, size):
    a = random_tensor((size,), dtype, device)
    b = random_tensor((size,), dtype, device)
    assert_bitwise_equal(op(a, b), torch.add(a, b))


def test_classic_arange_smoke(op, device):
    a = torch.arange(5, device=device)
    out = op(a, a + 10)
    assert out.dtype == torch.int64
    assert out.tolist() == [10, 12, 14, 16, 18]
    if device == "cuda":
        assert repr(out) == "tensor([10, 12, 14, 16, 18], device='cuda:0')"


def test_torch_ops_namespace_is_the_same_op(device):
    a = random_tensor((100,), torch.float32, device)
    b = random_tensor((100,), torch.float32, device)
    assert_bitwise_equal(torch.ops.cuda_ext_example.my_add(a, b), torch.add(a, b))
    assert_bitwise_equal(torch.ops.cuda_ext_example.my_fast_add.default(a, b), torch.add(a, b))


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.int64, torch.int8], ids=str)
@pytest.mark.parametrize("offset", [1, 2, 3, 5, 8, 15])
def test_unaligned_storage_offsets(op, device, dtype, offset):
    # x[offset:] is not 16-byte aligned: the vectorized kernel must still be right.
    n = 1000 + offset
    a = random_tensor((n,), dtype, device)[offset:]
    b = random_tensor((n,), dtype, device)[offset // 2 :][: n - offset]
    assert a.storage_offset() == offset
    assert_bitwise_equal(op(a, b), torch.add(a, b))


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
def test_non_contiguous_inputs(op, device, make_view, dtype):
    a = make_view(random_tensor((37, 41), dtype, device))
    b = make_view(random_tensor((37, 41), dtype, device))
    out = op(a, b)
    assert out.is_contiguous()
    assert_bitwise_equal(out, torch.add(a, b))


@pytest.mark.parametrize("shape", [(), (0,), (0, 3), (2, 0, 5), (1, 1, 1)], ids=str)
def test_empty_and_zero_dim(op, device, shape):
    a = random_tensor(shape, torch.float32, device)
    b = random_tensor(shape, torch.float32, device)
    out = op(a, b)
    assert out.shape == torch.Size(shape)
    assert_bitwise_equal(out, torch.add(a, b))


def test_output_is_a_new_tensor(op, device):
    a = random_tensor((64,), torch.float32, device)
    b = random_tensor((64,), torch.float32, device)
    a_before, b_before = a.clone(), b.clone()
    out = op(a, b)
    assert out.data_ptr() not in (a.data_ptr(), b.data_ptr())
    assert_bitwise_equal(a, a_before)
    assert_bitwise_equal(b, b_before)


def test_special_float_values(op, device):
    values = [0.0, -0.0, float("inf"), -float("inf"), 1e-45, 3.4e38, -3.4e38, 65504.0]
    a = torch.tensor(values, device=device)
    b = torch.tensor(list(reversed(values)), device=device)
    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
        assert_bitwise_equal(op(a.to(dtype), b.to(dtype)), torch.add(a.to(dtype), b.to(dtype)))
    nan = op(torch.tensor([float("nan")], device=device), torch.tensor([1.0], device=device))
    assert torch.isnan(nan).all()


@settings(max_examples=60, deadline=None)
@given(
    shape=st.lists(st.integers(0, 9), min_size=0, max_size=4),
    dtype=st.sampled_from(DTYPES),
    op_name=st.sampled_from(["my_add", "my_fast_add"]),
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
    for device in devices:
        flat_a = random_tensor((numel + offset,), dtype, device, gen)
        flat_b = random_tensor((numel + offset,), dtype, device, gen)
        a = flat_a[offset:].view(shape)
        b = flat_b[offset:].view(shape)
        if transpose and len(shape) >= 2:
            a, b = a.transpose(0, -1), b.transpose(0, -1)
        out = getattr(cuda_ext_example, op_name)(a, b)
        assert_bitwise_equal(out, torch.add(a, b))


# ------------------------------------------------------------------- GPU only


@pytest.mark.gpu
def test_runs_on_current_stream_under_graph_capture(op):
    # Capture forbids launching on the legacy default stream: a kernel that
    # ignored torch's current stream would fail capture or miss the replay.
    a = random_tensor((4099,), torch.float32, "cuda")
    b = random_tensor((4099,), torch.float32, "cuda")
    op(a, b)  # warm up outside capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = op(a, b)
    new_a = random_tensor((4099,), torch.float32, "cuda")
    a.copy_(new_a)
    graph.replay()
    torch.cuda.synchronize()
    assert_bitwise_equal(out, torch.add(new_a, b))


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
def test_over_64_mib_per_tensor(op, dtype, offset):
    # Past 64 MiB per tensor my_fast_add switches to 8-byte accesses
    # (csrc/add_kernels.cu): exercise that path with a tail, and its alignment fallbacks.
    n = (64 << 20) // torch.empty((), dtype=dtype).element_size() + 7
    a = random_tensor((n + offset,), dtype, "cuda")[offset:]
    b = random_tensor((n + offset,), dtype, "cuda")[offset:]
    assert a.numel() * a.element_size() > 64 << 20
    assert_bitwise_equal(op(a, b), torch.add(a, b))


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
def test_more_than_2_pow_31_elements_cpu():
    n = 2**31 + 17
    chunk = random_tensor((1 << 20,), torch.int8, "cpu")
    a = chunk.repeat(n // chunk.numel() + 1)[:n]
    b = a.flip(0)
    out = cuda_ext_example.my_add(a, b)
    ref = torch.add(a, b)
    assert torch.equal(out[-1000:], ref[-1000:])
    assert torch.equal(out, ref)
