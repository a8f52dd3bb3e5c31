"""`make cpp`: the torch-free harness runs the product's fatbin through the product's
launcher. On a GPU it checks its own results and explains a missing arch; without a
GPU (or with a driver that is too old, faked here) it says what is needed."""

from __future__ import annotations

import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
HARNESS = ROOT / "build" / "cpp" / "cee_harness"
WRONG_ARCH = ROOT / "build" / "cpp" / "cee_harness_sm75"  # SASS sm_75 only, no PTX
CC = shutil.which("cc") or shutil.which("gcc")


def built(exe: Path, *args: str) -> Path:
    """The harness from `make cpp` (carried to a GPU machine prebuilt), or built now."""
    if not exe.exists():
        subprocess.run(
            ["make", "-s", "-C", ROOT, "cpp", f"CPP_OUT={exe}", f"CPP_ARGS={' '.join(args)}"],
            check=True,
        )
    return exe


@pytest.mark.gpu
def test_harness_all_dtypes_correct():
    run = subprocess.run([built(HARNESS)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "OK: 0 wrong elements" in run.stdout
    assert "(NVRTC 12.9)" in run.stdout  # it ran the wheel's device code


@pytest.mark.gpu
def test_harness_reports_missing_architecture():
    major, minor = torch.cuda.get_device_capability()
    if major == 7:
        pytest.skip("sm_75 SASS runs on this GPU")
    exe = built(WRONG_ARCH, "--sass", "75", "--no-ptx")
    run = subprocess.run([exe, "1000"], capture_output=True, text=True)
    assert run.returncode != 0 and run.returncode != 1, run.stdout + run.stderr
    assert (
        f"has no GPU code for cuda:0 (compute capability {major}.{minor}, sm_{major}{minor})"
        in run.stderr
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
