"""`make cpp`: the torch-free harness runs the product's fatbin through the product's
launcher. On a GPU it checks its own results and explains a missing arch; without a
GPU (or with a driver that is too old, faked here) it says what is needed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
HARNESS = ROOT / "build" / "cpp" / "cee_harness"
WRONG_ARCH = ROOT / "build" / "cpp" / "cee_harness_sm75"  # SASS sm_75 only, no PTX
CC = shutil.which("cc") or shutil.which("gcc")
# The harness is built on first use (about a minute on two cores) unless `make cpp` built it.
pytestmark = pytest.mark.slow


def built(exe: Path, *args: str) -> Path:
    """The harness from `make cpp` (carried to a GPU machine prebuilt), or built now."""
    if not exe.exists():
        run = subprocess.run(
            ["make", "-s", "-C", ROOT, "cpp", f"CPP_OUT={exe}", f"CPP_ARGS={' '.join(args)}"],
            capture_output=True,
            text=True,
        )
        if run.returncode != 0:
            pytest.fail(
                f"{exe.relative_to(ROOT)} is missing and `make cpp` could not build it here "
                f"(exit {run.returncode}): build it where the set-up works (make cpp "
                f"CPP_OUT={exe.relative_to(ROOT)} CPP_ARGS='{' '.join(args)}') and bring "
                f"build/cpp along.\n{run.stdout[-2000:]}{run.stderr[-2000:]}"
            )
    return exe


@pytest.mark.gpu
def test_harness_all_dtypes_correct():
    run = subprocess.run([built(HARNESS)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "OK: 0 wrong elements" in run.stdout
    assert "(NVRTC 12.0 + 12.9)" in run.stdout  # it ran the wheel's device code


@pytest.mark.gpu
def test_harness_reports_missing_architecture():
    major, minor = torch.cuda.get_device_capability()
    if major == 7:
        pytest.skip("sm_75 SASS runs on this GPU")
    exe = built(WRONG_ARCH, "--sass", "75", "--no-ptx")
    run = subprocess.run([exe, "1000"], capture_output=True, text=True)
    assert run.returncode != 0 and run.returncode != 1, run.stdout + run.stderr
    name = torch.cuda.get_device_name(0)
    assert (
        f"has no GPU code for cuda:0 ({name}, compute capability {major}.{minor}, "
        f"sm_{major}{minor})" in run.stderr
    ), run.stderr
    assert "CUDA_ERROR_NO_BINARY_FOR_GPU" in run.stderr


# ------------------------------------------------ no driver, or one too old


def fake_driver(tmp_path: Path, body: str) -> dict:
    """A libcuda.so.1 of our own, first on the library path."""
    if CC is None:
        pytest.skip("needs a C compiler")
    src = tmp_path / "fake_cuda.c"
    src.write_text(textwrap.dedent(body))
    subprocess.run([CC, "-shared", "-fPIC", src, "-o", tmp_path / "libcuda.so.1"], check=True)
    return {**os.environ, "LD_LIBRARY_PATH": str(tmp_path)}


def run_harness(env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([built(HARNESS), "1000"], capture_output=True, text=True, env=env)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has an NVIDIA driver")
def test_no_driver_is_a_clear_error():
    if any(Path(d, "libcuda.so.1").exists() for d in ("/usr/lib64", "/usr/lib/x86_64-linux-gnu")):
        pytest.skip("libcuda.so.1 is installed")
    run = run_harness()
    assert run.returncode == 2
    assert "cannot load the NVIDIA driver library libcuda.so.1" in run.stderr
    assert "driver >= 525.60.13" in run.stderr


def test_driver_older_than_cuda_12_is_a_clear_error(tmp_path):
    # An R470 driver (CUDA 11.4): it has cuDriverGetVersion but no cuGetProcAddress_v2.
    env = fake_driver(tmp_path, "int cuDriverGetVersion(int *v) { *v = 11040; return 0; }")
    run = run_harness(env)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "the NVIDIA driver supports CUDA 11.4" in run.stderr
    assert "need a driver for CUDA >= 12.0 (>= 525.60.13)" in run.stderr


def test_missing_entry_point_is_named(tmp_path):
    # A driver that answers cuGetProcAddress for nothing: the first name is reported.
    env = fake_driver(
        tmp_path,
        """
        int cuDriverGetVersion(int *v) { *v = 12000; return 0; }
        int cuGetProcAddress_v2(const char *s, void **fn, int v, unsigned long long f, int *found)
        { *fn = 0; *found = 1; return 500; }
        """,
    )
    run = run_harness(env)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "the NVIDIA driver has no cuInit for CUDA 12.0" in run.stderr


# A driver of our own that answers every entry point: cuGetProcAddress_v2 hands out the
# functions below by name and a success-returning no-op for the rest (memory, copies).
# The macros pick what the fake answers at each step: the cuDriverGetVersion status,
# cuInit's, cuLibraryLoadData's and cuKernelGetFunction's. The GPU is a Tesla K80
# (sm_37), which CUDA 12 has no code for.
FAKE_CUDA_12 = """
#include <string.h>
typedef int CUresult;
static CUresult ok(void) { return 0; }
static CUresult init(unsigned flags) { return INIT_STATUS; }
static CUresult attribute(int *v, int attrib, int dev) { *v = attrib == 75 ? 3 : 7; return 0; }
static CUresult device_name(char *name, int len, int dev) {
  strncpy(name, "Tesla K80", len); return 0; }
static CUresult error_name(CUresult e, const char **s) {
  *s = e == 209 ? "CUDA_ERROR_NO_BINARY_FOR_GPU" : e == 34 ? "CUDA_ERROR_STUB_LIBRARY" : "?";
  return 0; }
static CUresult error_string(CUresult e, const char **s) { *s = "from the fake"; return 0; }
static CUresult load(void **lib) { *lib = (void *)1; return LOAD_STATUS; }
static CUresult kernel(void **k, void *lib, const char *name) { *k = (void *)2; return 0; }
static CUresult function(void **f, void *k) { *f = (void *)3; return FUNCTION_STATUS; }
int cuDriverGetVersion(int *v) { *v = 12000; return VERSION_STATUS; }
int cuGetProcAddress_v2(const char *s, void **fn, int v, unsigned long long f, int *found) {
  static const struct { const char *name; void *fn; } table[] = {
    {"cuInit", (void *)init}, {"cuDeviceGetAttribute", (void *)attribute},
    {"cuDeviceGetName", (void *)device_name}, {"cuGetErrorName", (void *)error_name},
    {"cuGetErrorString", (void *)error_string}, {"cuLibraryLoadData", (void *)load},
    {"cuLibraryGetKernel", (void *)kernel}, {"cuKernelGetFunction", (void *)function}};
  *fn = (void *)ok;
  for (unsigned i = 0; i < sizeof table / sizeof table[0]; ++i)
    if (!strcmp(s, table[i].name)) *fn = table[i].fn;
  *found = 0;
  return 0;
}
"""


def fake_cuda_12(tmp_path: Path, **statuses: int) -> dict:
    steps = {"VERSION_STATUS": 0, "INIT_STATUS": 0, "LOAD_STATUS": 0, "FUNCTION_STATUS": 0}
    steps.update(statuses)
    defines = "".join(f"#define {name} {value}\n" for name, value in steps.items())
    return fake_driver(tmp_path, defines + FAKE_CUDA_12)


@pytest.mark.parametrize("step", ["INIT_STATUS", "VERSION_STATUS"])
def test_toolkit_stub_is_named_with_the_fix(tmp_path, step):
    # The toolkit's lib64/stubs/libcuda.so.1 answers CUDA_ERROR_STUB_LIBRARY (34): from
    # cuInit (and, to be safe, from cuDriverGetVersion), at the first CUDA call.
    run = run_harness(fake_cuda_12(tmp_path, **{step: 34}))
    assert run.returncode == 2, run.stdout + run.stderr
    message = run.stderr.strip()
    assert f"({tmp_path}/libcuda.so.1) is the CUDA toolkit's stub library" in message
    assert "CUDA_ERROR_STUB_LIBRARY" in message
    assert f"Remove {tmp_path} from LD_LIBRARY_PATH" in message
    assert "install an NVIDIA driver >= 525.60.13" in message


@pytest.mark.parametrize("step", ["LOAD_STATUS", "FUNCTION_STATUS"])
def test_gpu_without_code_is_named_with_the_archs(tmp_path, step):
    # CUDA_ERROR_NO_BINARY_FOR_GPU (209) from loading the library (eager loading) or from
    # resolving the kernels for the device (lazy loading): the same error, naming the GPU,
    # its arch and the archs the binary carries.
    run = run_harness(fake_cuda_12(tmp_path, **{step: 209}))
    assert run.returncode == 2, run.stdout + run.stderr
    message = run.stderr.strip()
    assert "has no GPU code for cuda:0 (Tesla K80, compute capability 3.7, sm_37)" in message
    assert "The wheel carries SASS sm_50 sm_60 sm_70" in message
    assert "CUDA_ERROR_NO_BINARY_FOR_GPU" in message
    assert "python -m cuda_ext_example doctor" in message


def test_fake_driver_runs_through_when_it_has_code(tmp_path):
    # The same fake answering success everywhere: the harness gets past loading and
    # launching (then finds the fake computed nothing): the failures above are the steps'.
    run = run_harness(fake_cuda_12(tmp_path))
    assert "has no GPU code" not in run.stderr and "stub" not in run.stderr
    assert "device code SASS sm_50" in run.stdout


@pytest.mark.release  # compiles: needs the build's NVRTC (a GPU machine's suite has none)
def test_make_cpp_with_an_unknown_arch_says_so_in_one_line(tmp_path):
    # CPP_ARGS="--sass 999" (a typo of the Makefile's own example) ended in the NVRTC pool's
    # traceback; now the compiler's message, after what was being built, and exit 1.
    run = subprocess.run(
        [sys.executable, "-m", "buildtools.harness", "--sass", "999", "--no-ptx",
         "--out", str(tmp_path / "harness")],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "CEE_DEVICE_CODE_CACHE": str(tmp_path / "device-code-cache")},
    )  # fmt: skip
    assert run.returncode == 1
    assert "Traceback" not in run.stderr
    assert run.stderr.startswith("make cpp: NVRTC 12.9, sm_999, op ")
    assert "invalid value for --gpu-architecture" in run.stderr
