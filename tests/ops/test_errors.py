"""Bad input raises a clear Python exception naming the op and the problem."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import DECLARED

import cuda_ext_example
from cuda_ext_example._loader import check_torch_version, version_tuple


def _name(op) -> str:
    return f"cuda_ext_example.{op.__name__}"


def test_shapes_that_do_not_broadcast(op, device):
    a = torch.ones(3, device=device)
    with pytest.raises(RuntimeError, match=r"my_(fast_)?add: the shapes do not broadcast"):
        op(a, torch.ones(4, device=device))
    with pytest.raises(RuntimeError, match=r"a \[2, 3\] and b \[3, 2\] differ at dimension -1"):
        op(torch.ones(2, 3, device=device), torch.ones(3, 2, device=device))
    with pytest.raises(RuntimeError, match=r"must match the size of tensor b \(2\) at"):
        torch.add(torch.ones(2, 3), torch.ones(3, 2))  # torch refuses the same, in its words


def test_in_place_rules(device):
    op = DECLARED["my_adamw_step"]
    param, m, v, g = op.sample((4, 3), torch.float32, device)
    step = cuda_ext_example.my_adamw_step
    with pytest.raises(
        RuntimeError,
        match=r"my_adamw_step: exp_avg is updated in place, so it "
        r"must have the call's shape \[4, 3\], got \[3\]",
    ):
        step(param, m[0], v, g, lr=1e-3, step=1)
    with pytest.raises(
        RuntimeError,
        match=r"param is updated in place but several of its "
        r"elements share memory",
    ):
        step(param[:1].expand(4, 3), m, v, g, lr=1e-3, step=1)
    flat = torch.zeros(13, device=device)
    with pytest.raises(
        RuntimeError,
        match=r"param is updated in place and partly overlaps "
        r"exp_avg",
    ):
        step(flat[:12].view(4, 3), flat[1:].view(4, 3), v, g, lr=1e-3, step=1)
    before = param.clone()
    step(param, m, v, g.expand(4, 3), lr=1e-3, step=1)  # a read input may broadcast
    assert not torch.equal(param, before)


def test_dtype_mismatch(op, device):
    with pytest.raises(
        RuntimeError,
        match=rf"{_name(op)}: expected both tensors to have the same dtype, "
        r"got a torch.int64 and b torch.float32",
    ):
        op(torch.arange(3, device=device), torch.ones(3, device=device))


@pytest.mark.parametrize("dtype", [torch.bool, torch.complex64, torch.uint16], ids=str)
def test_unsupported_dtype(op, device, dtype):
    a = torch.zeros(3, dtype=dtype, device=device)
    with pytest.raises(RuntimeError, match=rf"{_name(op)}: unsupported dtype {dtype}"):
        op(a, a)


def test_not_a_tensor(op):
    with pytest.raises(
        TypeError, match=rf"{_name(op)}: b must be a torch.Tensor or a Python number, got list"
    ):
        op(torch.ones(3), [1.0, 2.0, 3.0])


def test_a_scalar_the_dtype_cannot_hold(device):
    op = DECLARED["my_leaky_relu"]
    x = torch.ones(3, device=device)
    with pytest.raises(
        RuntimeError,
        match=r"my_leaky_relu: negative_slope=1e\+300|"
        r"negative_slope=1000000.*does not fit float",
    ):
        op(x, 1e300)


def test_sparse_layout(op):
    a = torch.ones(3).to_sparse()
    with pytest.raises((RuntimeError, NotImplementedError), match="my_"):
        op(a, a)


def test_fake_tensor_checks_match_the_kernel(op):
    # Under torch.compile the fake kernel checks; its words are the kernel's.
    a = torch.ones(3, device="meta")
    with pytest.raises(RuntimeError, match=rf"{_name(op)}: the shapes do not broadcast"):
        op(a, torch.ones(4, device="meta"))
    with pytest.raises(
        RuntimeError, match=rf"{_name(op)}: expected both tensors on the same device"
    ):
        op(a, torch.ones(3))
    assert op(a, a).device.type == "meta"


def _first_line(run) -> str:
    with pytest.raises(RuntimeError) as caught:
        run()
    return str(caught.value).splitlines()[0]


@pytest.mark.parametrize("case", ["shape", "dtype", "unsupported dtype"])
def test_fake_tensors_get_the_real_kernels_words(any_op, case):
    """FakeTensorMode (torch.compile, torch.export) runs the op's Meta kernel, which states
    the same rules as the real kernel in the same words: compared message for message."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    if case != "unsupported dtype" and any_op.arity == 1:
        pytest.skip("one input: no mismatch to make")
    inputs = {
        "shape": [torch.ones(3), torch.ones(4)],
        "dtype": [torch.ones(3), torch.ones(3, dtype=torch.float64)],
        "unsupported dtype": [torch.ones(3, dtype=torch.bool)] * 2,
    }[case][: any_op.arity] + [torch.ones(3)] * max(0, any_op.arity - 2)
    real = _first_line(lambda: any_op(*inputs, *any_op.scalars))
    with FakeTensorMode() as mode:
        fakes = [mode.from_tensor(t) for t in inputs]
        fake = _first_line(lambda: any_op(*fakes, *any_op.scalars))
    assert real.startswith(f"cuda_ext_example.{any_op.__name__}: ")
    assert fake == real


@pytest.mark.gpu
def test_device_mismatch(op):
    with pytest.raises(
        RuntimeError,
        match=rf"{_name(op)}: expected both tensors on the same device, "
        r"got a on cuda:0 and b on cpu",
    ):
        op(torch.ones(3, device="cuda"), torch.ones(3))


@pytest.mark.gpu
@pytest.mark.multigpu
def test_two_gpus_mismatch(op):
    with pytest.raises(RuntimeError, match="got a on cuda:0 and b on cuda:1"):
        op(torch.ones(3, device="cuda:0"), torch.ones(3, device="cuda:1"))


@pytest.mark.skipif(torch.version.cuda is not None, reason="needs a CPU-only torch build")
def test_cuda_kernel_on_cpu_only_torch(op):
    # A CPU-only torch cannot make CUDA tensors, so send tensors to our CUDA
    # kernel through the dispatcher as a CUDA tensor would go.
    cuda_key = torch._C.DispatchKeySet(torch._C.DispatchKey.CUDA)
    qualified = getattr(torch.ops.cuda_ext_example, op.__name__).default
    with pytest.raises(
        RuntimeError,
        match=rf"{_name(op)}: got CUDA tensors, but the running torch has no CUDA support",
    ):
        qualified.redispatch(cuda_key, torch.ones(3), torch.ones(3))


# A dlopen that answers RTLD_NOLOAD look-ups of libtorch_cuda.so as a CPU-only torch
# would (not loaded): the one thing the extension asks of torch's CUDA build on its own.
NO_TORCH_CUDA_SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <string.h>
void *dlopen(const char *name, int flags) {
  static void *(*real)(const char *, int);
  if (!real) real = (void *(*)(const char *, int))dlsym(RTLD_NEXT, "dlopen");
  if (name && (flags & RTLD_NOLOAD) && strstr(name, "libtorch_cuda.so")) return 0;
  return real(name, flags);
}
"""


@pytest.fixture(scope="module")
def no_torch_cuda_shim(tmp_path_factory) -> Path:
    pytest.importorskip("ziglang", reason="compiles the shim with zig (requirements/build.in)")
    folder = tmp_path_factory.mktemp("shim")
    (folder / "shim.c").write_text(NO_TORCH_CUDA_SHIM)
    subprocess.run(
        [sys.executable, "-m", "ziglang", "cc", "-shared", "-fPIC", "-o",
         folder / "no_torch_cuda.so", folder / "shim.c", "-ldl"],
        check=True,
    )  # fmt: skip
    return folder / "no_torch_cuda.so"


def test_cuda_kernel_where_torch_has_no_cuda_library(op, no_torch_cuda_shim, tmp_path):
    """The CPU-only-torch error under any torch (PyPI's is a CUDA build): the look-up of
    torch's CUDA library fails as it does on a CPU-only torch, in a fresh process."""
    shim = no_torch_cuda_shim
    code = (
        "import torch, cuda_ext_example\n"
        "key = torch._C.DispatchKeySet(torch._C.DispatchKey.CUDA)\n"
        f"op = torch.ops.cuda_ext_example.{op.__name__}.default\n"
        "try:\n    op.redispatch(key, torch.ones(3), torch.ones(3))\n"
        "except RuntimeError as e:\n    print('RUNTIMEERROR', e)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
        env={**os.environ, "LD_PRELOAD": str(shim)},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    expected = f"RUNTIMEERROR {_name(op)}: got CUDA tensors, but the running torch has no CUDA"
    assert expected in run.stdout, run.stdout + run.stderr


def test_error_leaves_process_usable(op, device):
    for _ in range(50):
        with pytest.raises(RuntimeError):
            op(torch.ones(2, device=device), torch.ones(3, device=device))
    assert op(torch.ones(2, device=device), torch.ones(2, device=device)).tolist() == [2.0, 2.0]


@pytest.mark.parametrize(
    ("version", "expected"),
    [("2.10.0", (2, 10)), ("2.11.0+cu130", (2, 11)), ("2.9.1", (2, 9)), ("3.0.0a0", (3, 0))],
)
def test_version_tuple(version, expected):
    assert version_tuple(version) == expected


def test_old_torch_is_refused_with_the_version_needed():
    with pytest.raises(ImportError, match=r"needs torch>=2\.10.*torch 2\.9\.1 is installed"):
        check_torch_version("2.9.1", "2.10")
    check_torch_version("2.10.0", "2.10")  # the minimum itself is fine
    check_torch_version("2.14.1+cu130", "2.9")


def test_import_under_old_torch_raises_importerror(tmp_path):
    # A real import in a fresh interpreter, with torch pretending to be older than the floor.
    code = (
        "import torch; torch.__version__ = '2.8.0'\n"
        "try:\n    import cuda_ext_example\n"
        "except ImportError as e:\n    print('IMPORTERROR', e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    assert "IMPORTERROR cuda_ext_example needs torch>=2.9" in out.stdout, out.stdout + out.stderr
    assert cuda_ext_example.BUILD_INFO["torch_target"] == "2.9"
