"""my_rms_norm and its backward: what the declared-op tests (test_declared_ops.py) do not
reach. Shapes of every kind (rows, any hidden size, views), eps, the errors, and on the GPU
the registers-or-not kernel paths and CUDA graph capture, each against torch's own
F.rms_norm and its autograd."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import cuda_ext_example
from cuda_ext_example.ops import DECLARATIONS

TOLERANCE = DECLARATIONS["my_rms_norm"]["tolerance"]
BACKWARD_TOLERANCE = DECLARATIONS["my_rms_norm_backward"]["tolerance"]


def tol(dtype, table=TOLERANCE):
    return table[str(dtype).removeprefix("torch.")]


def torch_rms_norm(x, weight, eps=1e-6):
    return F.rms_norm(x, (x.shape[-1],), weight, eps)


def forward_and_backward(function, x, weight, grad, eps=1e-6):
    x = x.detach().clone().requires_grad_()
    weight = weight.detach().clone().requires_grad_()
    y = function(x, weight, eps)
    y.backward(grad)
    return y.detach(), x.grad, weight.grad


def check(x, weight, eps=1e-6, grad=None):
    """Forward, dx and dweight of ours against torch's, within the declared tolerances."""
    grad = torch.randn_like(x) if grad is None else grad
    ours = forward_and_backward(cuda_ext_example.my_rms_norm, x, weight, grad, eps)
    theirs = forward_and_backward(torch_rms_norm, x, weight, grad, eps)
    torch.testing.assert_close(ours[0], theirs[0], **tol(x.dtype))
    for got, want in zip(ours[1:], theirs[1:], strict=True):
        torch.testing.assert_close(got, want, **tol(x.dtype, BACKWARD_TOLERANCE))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (2, 3, 8), (37, 1000), (5, 4096), (4, 1027)])
def test_shapes_and_dtypes_against_torch(device, dtype, shape):
    x = torch.randn(shape, device=device, dtype=dtype)
    weight = (torch.rand(shape[-1], device=device) + 0.5).to(dtype)
    check(x, weight)


def test_views_read_as_they_are(device):
    weight = torch.rand(64, device=device) + 0.5
    transposed = torch.randn(64, 12, device=device).t()
    sliced = torch.randn(12, 128, device=device)[:, 32:96]  # rows 128 apart: read in place
    strided = torch.randn(12, 128, device=device)[:, ::2]
    for x in (transposed, sliced, strided, torch.randn(3, 4, 64, device=device)[:, 1]):
        check(x, weight)
    # An expanded gradient, as sum() gives: stride 0.
    x = torch.randn(12, 64, device=device)
    check(x, weight, grad=torch.ones(1, 1, device=device).expand(12, 64))


def test_eps_is_the_callers(device):
    x = torch.randn(4, 32, device=device) * 1e-3  # mean(x^2) ~ 1e-6: eps matters
    weight = torch.rand(32, device=device) + 0.5
    for eps in (0.0, 1e-6, 1e-2):
        torch.testing.assert_close(
            cuda_ext_example.my_rms_norm(x, weight, eps=eps), torch_rms_norm(x, weight, eps)
        )


def test_many_rows_sum_into_dweight(device):
    # dweight is a reduction over every row (on the GPU: per block, then across blocks).
    x = torch.randn(3000, 96, device=device, dtype=torch.float64)
    weight = torch.rand(96, device=device, dtype=torch.float64) + 0.5
    check(x, weight)


def test_empty_inputs(device):
    weight = torch.rand(8, device=device)
    y = cuda_ext_example.my_rms_norm(torch.randn(0, 8, device=device), weight)
    assert y.shape == (0, 8)
    dx, dweight = cuda_ext_example.my_rms_norm_backward(
        torch.randn(0, 8, device=device), torch.randn(0, 8, device=device), weight, 1e-6
    )
    assert dx.shape == (0, 8) and torch.equal(dweight, torch.zeros_like(weight))


@pytest.mark.parametrize(
    ("x", "weight", "eps", "message"),
    [
        (torch.randn(4, 8), torch.randn(7), 1e-6, r"weight has shape \[7\]; it must be \[8\]"),
        (torch.randn(4, 8), torch.randn(2, 8), 1e-6, r"weight has shape \[2, 8\]"),
        (torch.randn(()), torch.randn(1), 1e-6, "x must have at least one dimension"),
        (
            torch.randn(4, 8),
            torch.randn(8).double(),
            1e-6,
            "x is torch.float32 and weight torch.float64",
        ),
        (torch.randn(4, 8), torch.randn(8), -1.0, "eps >= 0 must hold, got eps=-1"),
        (
            torch.randn(4, 8).int(),
            torch.randn(8).int(),
            1e-6,
            "x is torch.int32; supported: torch.float16",
        ),
    ],
)
def test_bad_input_is_named(x, weight, eps, message):
    with pytest.raises(RuntimeError, match=f"cuda_ext_example.my_rms_norm: {message}"):
        cuda_ext_example.my_rms_norm(x, weight, eps)


def test_backward_checks_grad():
    x, weight = torch.randn(4, 8), torch.randn(8)
    with pytest.raises(
        RuntimeError, match=r"my_rms_norm_backward: grad has shape \[4, 7\], x \[4, 8\]"
    ):
        cuda_ext_example.my_rms_norm_backward(torch.randn(4, 7), x, weight, 1e-6)


@pytest.mark.gpu
def test_tensors_on_two_devices_are_refused():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    with pytest.raises(RuntimeError, match="x is on cuda:0, weight on cpu"):
        cuda_ext_example.my_rms_norm(torch.randn(4, 8, device="cuda"), torch.randn(8))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("hidden", [1024, 2047, 4095, 4096, 8191, 8192, 16384, 16385, 32768, 70000])
def test_gpu_kernel_paths_against_torch(dtype, hidden):
    # Every path of the kernels: 16-byte packs or single elements (2047, 4095, 8191, 16385),
    # 1, 2, 4 or 8 packs a thread, the forward's row read twice (float32, bfloat16 up to
    # 8192) or held in registers (bfloat16 from 16384: every held instance that ops.toml's
    # `when` compiles), the backward's blocks of up to 1024
    # (2047, 4095, float32 8192 and 16384, bfloat16 16384), its dweight sums alone in
    # registers (bfloat16 32768), or any length (8191, float32 32768, 70000).
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    x = torch.randn(67, hidden, device="cuda", dtype=dtype)
    weight = (torch.rand(hidden, device="cuda") + 0.5).to(dtype)
    check(x, weight)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("hidden", [1, 7, 64, 100, 512, 1000, 1024])
def test_gpu_rows_that_share_a_block_against_torch(dtype, hidden):
    # Rows of 32 threads or fewer share blocks, 256 / row_threads rows each: the last block
    # part-filled (4097 rows), and rows read in place, a stride past their length apart.
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    weight = (torch.rand(hidden, device="cuda") + 0.5).to(dtype)
    for x in (
        torch.randn(4097, hidden, device="cuda", dtype=dtype),
        torch.randn(37, hidden + 8, device="cuda", dtype=dtype)[:, :hidden],
    ):
        check(x, weight)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("hidden", [520, 1024, 2048])
def test_gpu_few_rows_and_many_against_torch(dtype, hidden):
    # Rows too few to fill the GPU twice take a warp each at 8 packs a thread where that
    # covers them (float32 520 and 1024, bfloat16 2048); more rows than twice the 32
    # blocks a multiprocessor holds at most take a block each at fewer packs.
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    multiprocessors = torch.cuda.get_device_properties(0).multi_processor_count
    weight = (torch.rand(hidden, device="cuda") + 0.5).to(dtype)
    for rows in (67, 64 * multiprocessors + 1):
        check(torch.randn(rows, hidden, device="cuda", dtype=dtype), weight)


@pytest.mark.gpu
def test_cuda_graph_capture_forward_and_backward():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    x = torch.randn(64, 512, device="cuda", requires_grad=True)
    weight = torch.rand(512, device="cuda", requires_grad=True)
    grad = torch.randn(64, 512, device="cuda")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm-up, as torch.cuda.graph asks
        cuda_ext_example.my_rms_norm(x, weight).backward(grad)
    torch.cuda.current_stream().wait_stream(stream)
    x.grad = weight.grad = None
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = cuda_ext_example.my_rms_norm(x, weight)
        y.backward(grad)
    with torch.no_grad():
        x.copy_(torch.randn_like(x))
    graph.replay()
    torch.cuda.synchronize()
    want = forward_and_backward(torch_rms_norm, x, weight, grad)
    torch.testing.assert_close(y, want[0], **tol(torch.float32))
    torch.testing.assert_close(x.grad, want[1], **tol(torch.float32, BACKWARD_TOLERANCE))
    torch.testing.assert_close(weight.grad, want[2], **tol(torch.float32, BACKWARD_TOLERANCE))
