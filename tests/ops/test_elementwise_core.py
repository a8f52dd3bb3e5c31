"""The core's elementwise host function and kernels (every op with a `rule`), tested once:
each vectorized width and alignment, views, broadcasting, Python numbers, calls of more
dimensions than merge, in-place updates, special values, random shapes, and on the GPU
streams, graphs and sizes past 64 MiB and 2^31 elements. Each op's own declaration is
checked by test_declared_ops.py."""

from __future__ import annotations

import pytest
import torch
from conftest import DECLARED
from hypothesis import given, settings
from hypothesis import strategies as st

import cuda_ext_example
from cuda_ext_example import SUPPORTED_DTYPES
from tests.helpers import assert_bitwise_equal, random_tensor

ELEMENTWISE = {name: op for name, op in DECLARED.items() if op.broadcasts}
DTYPES = list(SUPPORTED_DTYPES)
# The vectorized kernel's launch shapes change with the bytes per tensor: 2^20 + 3 is past
# 2 MiB for 4-byte types and up, 3 * 2^20 + 5 past it for every dtype.
SIZES = [7, 1000, 2**20 + 3, 3 * 2**20 + 5]


@pytest.fixture(params=list(ELEMENTWISE), ids=list(ELEMENTWISE))
def elementwise_op(request):
    return ELEMENTWISE[request.param]


def _skip_undeclared(op, dtype):
    if dtype not in op.dtypes:
        pytest.skip(f"{op.__name__} declares {op.declaration['dtypes']}")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("size", SIZES)
def test_every_launch_shape_of_the_vectorized_kernel(device, dtype, size):
    op = DECLARED["my_fast_add"]
    op.check(op.sample((size,), dtype, device))


def test_classic_arange_smoke(op, device):
    a = torch.arange(5, device=device)
    out = op(a, a + 10)
    assert out.dtype == torch.int64
    assert out.tolist() == [10, 12, 14, 16, 18]
    if device == "cuda":
        assert repr(out) == "tensor([10, 12, 14, 16, 18], device='cuda:0')"


def test_torch_ops_namespace_is_the_same_op(any_op, device):
    args = any_op.arguments(100, any_op.dtypes[-1], device)
    raw = getattr(torch.ops.cuda_ext_example, any_op.__name__)
    any_op.check(args, raw)
    any_op.check(args, raw.default)


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.int64, torch.int8], ids=str)
@pytest.mark.parametrize("offset", [1, 2, 3, 5, 8, 15])
def test_unaligned_storage_offsets(elementwise_op, device, dtype, offset):
    # x[offset:] is not 16-byte aligned: the vectorized kernel must still be right.
    op = elementwise_op
    _skip_undeclared(op, dtype)
    n = 1000 + offset
    flats = op.sample((n + 8,), dtype, device)
    tensors = [flat[(offset * (k + 1)) % 8 :][: n - offset] for k, flat in enumerate(flats)]
    tensors[0] = flats[0][offset:][: n - offset]
    assert tensors[0].storage_offset() == offset
    op.check(tensors)


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
def test_non_contiguous_inputs(elementwise_op, device, make_view, dtype):
    op = elementwise_op
    _skip_undeclared(op, dtype)
    tensors = [make_view(t) for t in op.sample((37, 41), dtype, device)]
    if op.mutates and make_view(torch.ones(3, 3)).stride(0) == 0:
        # an expanded tensor cannot be updated in place: test_errors says so
        tensors = [t.contiguous() for t in tensors]
    for out in op.check(tensors)[: op.outputs]:
        assert out.is_contiguous()


@pytest.mark.parametrize("dtype", [torch.float32, torch.int8], ids=str)
def test_calls_of_more_dimensions_than_merge_equal_torchs(device, dtype):
    # Nine dimensions that no merge joins: broadcasts alternating between the inputs, then
    # views whose strides interleave. The kernel reads 8 at most: the call runs on dense
    # copies (in-place inputs worked on in a copy and written back).
    op = DECLARED["my_add"]
    a = op.sample((2, 1, 2, 1, 2, 1, 2, 1, 2), dtype, device)[0]
    b = op.sample((1, 2, 1, 2, 1, 2, 1, 2, 1), dtype, device)[1]
    op.check([a, b])
    c = op.sample((2,) * 9, dtype, device)[0].permute(8, 6, 4, 2, 0, 1, 3, 5, 7)
    op.check([c, b])
    step = DECLARED["my_adamw_step"]
    tensors = [
        t.permute(8, 6, 4, 2, 0, 1, 3, 5, 7) for t in step.sample((2,) * 9, torch.float32, device)
    ]
    ours = step.check(tensors)
    assert len(ours) == 3


@pytest.mark.parametrize(
    "shapes",
    [
        [(4, 1), (1, 5)],
        [(3, 4, 5), (5,)],
        [(2, 1, 6), (3, 1)],
        [(), (7,)],
        [(6, 1, 1, 2), (1, 3, 4, 1)],
        [(0, 3), (1, 3)],
    ],
    ids=str,
)
def test_broadcasting_as_torch_does(elementwise_op, device, shapes):
    # Each input its own shape, cycled over the op's inputs; no expanded copies.
    functional_op = elementwise_op
    if not functional_op.functional:
        pytest.skip("updates its inputs in place: they must have the call's shape")
    dtype = functional_op.dtypes[-1]
    tensors = [
        functional_op.sample(shapes[k % len(shapes)], dtype, device)[k]
        for k in range(functional_op.arity)
    ]
    (out,) = functional_op.check(tensors)
    assert out.shape == torch.broadcast_shapes(*(t.shape for t in tensors))
    assert out.is_contiguous()


def test_python_numbers_where_declared(any_op, device):
    numbers = any_op.numbers
    if not numbers:
        with pytest.raises(TypeError, match=rf"{any_op.__name__}: \w+ must be a torch.Tensor,"):
            any_op(*[2] * any_op.arity, *any_op.scalars)
        return
    for dtype, number in [(torch.float32, 0.1), (torch.int64, 3), (torch.float16, 0.5)]:
        if dtype not in any_op.dtypes:
            continue
        tensors = any_op.sample((17,), dtype, device)
        for k, name in enumerate(any_op.inputs):
            if name not in numbers:
                continue
            args = list(tensors)
            args[k] = number
            any_op.check(args)


def test_python_numbers_that_torch_would_promote_are_refused(op, device):
    ints = torch.arange(4, device=device)
    with pytest.raises(TypeError, match=r"my_(fast_)?add: b=2.5 is a float and the tensors are"):
        op(ints, 2.5)
    halves = torch.ones(4, device=device, dtype=torch.float16)
    with pytest.raises(TypeError, match=r"b=0.1 is not exactly a torch.float16"):
        op(halves, 0.1)
    with pytest.raises(TypeError, match=r"b=1000: value cannot be converted"):
        op(torch.ones(4, dtype=torch.int8, device=device), 1000)


@pytest.mark.parametrize("shape", [(), (0,), (0, 3), (2, 0, 5), (1, 1, 1)], ids=str)
def test_empty_and_zero_dim(elementwise_op, device, shape):
    results = elementwise_op.check(elementwise_op.sample(shape, elementwise_op.dtypes[-1], device))
    assert all(r.shape == torch.Size(shape) for r in results)


def test_special_float_values(elementwise_op, device):
    any_op = elementwise_op
    values = [0.0, -0.0, float("inf"), -float("inf"), 1e-45, 3.4e38, -3.4e38, 65504.0]
    a = torch.tensor(values, device=device)
    tensors = [a.roll(k) for k in range(any_op.arity)]
    # An op equal within a tolerance computes another formula than torch's, and at infinity
    # or overflow two formulas may part (inf - inf); torch's own CPU and CUDA kernels do.
    bitwise = not any_op.declaration["tolerance"]
    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
        if dtype in any_op.dtypes and bitwise:
            any_op.check([t.to(dtype) for t in tensors])
    nan = torch.tensor([float("nan")], device=device)
    results = any_op.results([nan.clone() for _ in range(any_op.arity)])
    assert all(torch.isnan(r).all() for r in results)


@settings(max_examples=60, deadline=None)
@given(
    shape=st.lists(st.integers(0, 9), min_size=0, max_size=4),
    dtype=st.sampled_from(DTYPES),
    op_name=st.sampled_from(list(ELEMENTWISE)),
    offset=st.integers(0, 7),
    transpose=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
)
def test_random_shapes_hypothesis(shape, dtype, op_name, offset, transpose, seed):
    op = ELEMENTWISE[op_name]
    if dtype not in op.dtypes:
        dtype = op.dtypes[0]
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    numel = 1
    for s in shape:
        numel *= s
    for device in devices:
        flats = op.sample((numel + offset,), dtype, device, seed)
        tensors = [flat[offset:].view(shape) for flat in flats]
        if transpose and len(shape) >= 2:
            tensors = [t.transpose(0, -1) for t in tensors]
        op.check(tensors)


# ------------------------------------------------------------------- GPU only


@pytest.mark.gpu
def test_runs_on_current_stream_under_graph_capture(any_op):
    # Capture forbids launching on the legacy default stream: a kernel that
    # ignored torch's current stream would fail capture or miss the replay.
    op = any_op
    if not op.functional:
        pytest.skip("test_in_place_update_under_graph_capture")
    dtype = torch.float32 if torch.float32 in op.dtypes else op.dtypes[0]
    inputs = op.arguments(4099, dtype, "cuda")[: op.arity]
    op(*inputs, *op.scalars)  # warm up outside capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = op(*inputs, *op.scalars)
    new_first = op.arguments(4099, dtype, "cuda", seed=1)[0]
    inputs[0].copy_(new_first)
    graph.replay()
    torch.cuda.synchronize()
    (expected,) = op.expected(inputs)
    from cuda_ext_example.op_checks import difference

    assert difference(op.declaration, (out,), (expected,)) is None


@pytest.mark.gpu
def test_in_place_update_under_graph_capture():
    # The in-place op replays on the same tensors: each replay is one more step.
    op = DECLARED["my_adamw_step"]
    tensors = op.sample((4099,), torch.float32, "cuda")
    start = [t.clone() for t in tensors]
    op(*[t.clone() for t in tensors], *op.scalars)  # warm up outside capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        op(*tensors, *op.scalars)
    for t, s in zip(tensors, start, strict=True):
        t.copy_(s)
    graph.replay()
    torch.cuda.synchronize()
    op.check(start)  # what one direct call makes of the same start
    expected = op.expected(start)
    from cuda_ext_example.op_checks import difference

    assert difference(op.declaration, tuple(tensors[:3]), expected) is None


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
def test_over_64_mib_per_tensor(elementwise_op, dtype, offset):
    # Past 64 MiB per tensor the vectorized kernel switches to 8-byte accesses
    # (pyproject.toml elementwise): exercise that path with a tail, and its alignment
    # fallbacks.
    any_op = elementwise_op
    _skip_undeclared(any_op, dtype)
    n = (64 << 20) // torch.empty((), dtype=dtype).element_size() + 7
    inputs = [t[offset:] for t in any_op.sample((n + offset,), dtype, "cuda")]
    assert inputs[0].numel() * inputs[0].element_size() > 64 << 20
    any_op.check(inputs)


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
