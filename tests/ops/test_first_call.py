"""The first CUDA call of a process, in each place it can happen: the launcher opens
libcuda.so.1 and loads the op's library for the dtype (its fatbin) right there (never at import), so
each case runs in a fresh process with nothing warmed up."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import cuda_ext_example

pytestmark = pytest.mark.gpu

CHECK = """
import torch, cuda_ext_example
from cuda_ext_example import _launch_shapes, my_add, my_fast_add
def check(out, a, b):
    torch.cuda.synchronize()
    assert torch.equal(out, torch.add(a, b)), "wrong result"
def loaded():
    return _launch_shapes.libraries(True)  # the device-code libraries (op_dtype) loaded so far
"""


def run_fresh(code: str, **env) -> str:
    result = subprocess.run(
        [sys.executable, "-P", "-c", CHECK + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@pytest.mark.parametrize("loading", ["default", "LAZY", "EAGER"])
@pytest.mark.parametrize("op", ["my_add", "my_fast_add"])
def test_first_call_inside_graph_capture(op, loading):
    # The launcher loads every kernel for the device (cuKernelGetFunction, in relaxed
    # capture mode) before its first launch, whatever the driver's module loading mode.
    env = {} if loading == "default" else {"CUDA_MODULE_LOADING": loading}
    run_fresh(
        f"""
        a = torch.randn(1 << 20, device="cuda"); b = torch.randn(1 << 20, device="cuda")
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        assert loaded() == []
        with torch.cuda.graph(graph):  # the launcher's first call ever: load + launch
            out = {op}(a, b)
        assert loaded() == ["{op}_float32"], loaded()  # its own library only
        a.copy_(torch.randn(1 << 20, device="cuda"))
        graph.replay()
        check(out, a, b)
        # a new dtype's first call loads its library inside capture too
        x = torch.randn(4099, device="cuda").half(); y = torch.randn(4099, device="cuda").half()
        graph2 = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph2):
            z = {op}(x, y)
        assert loaded() == ["{op}_float16", "{op}_float32"], loaded()
        graph2.replay()
        check(z, x, y)
        """,
        **env,
    )


@pytest.mark.parametrize("op", cuda_ext_example.OP_NAMES)
def test_first_call_loads_its_own_library_only(op):
    # One library (fatbin) per op and dtype, loaded at the first launch of one of its
    # kernels: the first call of an op costs the loading of that op's code for that dtype,
    # however many ops and dtypes there are.
    others = [name for name in cuda_ext_example.OP_NAMES if name != op]
    run_fresh(
        f"""
        from cuda_ext_example.op_checks import check_one
        from cuda_ext_example.ops import DECLARATIONS as EVERY_OP
        def first_dtype(name):
            dtypes = EVERY_OP[name]["dtypes"]
            return "float32" if "float32" in dtypes else dtypes[0]
        def call(name, n):
            dtype = getattr(torch, first_dtype(name))
            problem = check_one(cuda_ext_example, name, "cuda", dtype, n)
            torch.cuda.synchronize()
            return problem
        every = [f"{{name}}_{{d}}" for name in cuda_ext_example.OP_NAMES
                 for d in EVERY_OP[name]["dtypes"]]
        assert sorted(_launch_shapes.libraries()) == sorted(every), _launch_shapes.libraries()
        torch.cuda.synchronize()
        assert loaded() == [], loaded()  # torch's CUDA work loads none of ours
        problem = call("{op}", 4099)
        assert loaded() == [f"{op}_{{first_dtype('{op}')}}"], loaded()
        assert problem is None, problem
        for other in {others!r}:  # each other op's first call loads its own library
            call(other, 10)
            assert f"{{other}}_{{first_dtype(other)}}" in loaded(), (other, loaded())
        firsts = [f"{{name}}_{{first_dtype(name)}}" for name in cuda_ext_example.OP_NAMES]
        assert sorted(loaded()) == sorted(firsts), loaded()
        """
    )


def test_first_call_in_a_side_stream():
    run_fresh(
        """
        a = torch.randn(4099, device="cuda"); b = torch.randn(4099, device="cuda")
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            out = my_fast_add(a, b)
        check(out, a, b)
        """
    )


def test_sass_only_no_ptx_jit():
    # With PTX JIT disabled the driver must find SASS for this GPU in the fatbin.
    run_fresh(
        """
        for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.int64):
            a = (torch.randn(100_003, device="cuda") * 100).to(dtype)
            b = (torch.randn(100_003, device="cuda") * 100).to(dtype)
            check(my_add(a, b), a, b); check(my_fast_add(a, b), a, b)
        """,
        CUDA_DISABLE_PTX_JIT="1",
    )


def test_eager_module_loading():
    run_fresh(
        """
        a = torch.arange(5, device="cuda")
        check(my_add(a, a + 10), a, a + 10)
        """,
        CUDA_MODULE_LOADING="EAGER",
    )


@pytest.mark.multigpu
def test_first_call_on_the_second_gpu():
    # Device 0 is current and has never seen our kernels; the tensors are on cuda:1.
    run_fresh(
        """
        torch.cuda.set_device(0)
        a = torch.randn(100_003, device="cuda:1"); b = torch.randn(100_003, device="cuda:1")
        out = my_fast_add(a, b)
        assert out.device == torch.device("cuda:1") and torch.cuda.current_device() == 0
        check(out, a, b)
        x = torch.randn(1000, device="cuda:0")
        check(my_add(x, x), x, x)
        """
    )


@pytest.mark.multigpu
def test_first_call_on_the_second_gpu_from_a_new_thread():
    # A new thread has no current context: the launcher pushes cuda:1's own.
    run_fresh(
        """
        import threading
        a = torch.randn(4099, device="cuda:1"); b = torch.randn(4099, device="cuda:1")
        result = {}
        t = threading.Thread(target=lambda: result.update(out=my_fast_add(a, b)))
        t.start(); t.join()
        check(result["out"], a, b)
        """
    )
