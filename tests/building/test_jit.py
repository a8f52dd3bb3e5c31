"""The JIT build (`scripts.jit`, `make jit`) compiles this checkout's csrc/ and ops/
with torch's own toolchain. Here, without a GPU, it is told the GPU is an sm_90: NVRTC
compiles the device image for it and the host code is built and loaded, so a change to the
layout that breaks the JIT fails here; the CPU kernels of every op are then checked (the
GPU side runs in `python -m lab.gpu tools`).

Slow (a host build): marked `release`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.release

CODE = """
import torch
torch.cuda.get_device_capability = lambda *a: (9, 0)
torch.cuda.is_available = lambda: True
from cuda_ext_example.op_checks import mismatches
from scripts import jit
ops = jit.load("csrc")
torch.cuda.is_available = lambda: False  # built: the CPU kernels checked as a CPU machine's
wrong = [w for d in (torch.float32, torch.int64, torch.bfloat16) for w in mismatches(ops, "cpu", d)]
print("namespace", jit.NAMESPACE, "ops", sorted(o for o in dir(ops) if o.startswith("my_")))
print("wrong", wrong)
"""


def test_jit_builds_this_checkout_and_its_cpu_kernels_match(tmp_path):
    run = subprocess.run(
        [sys.executable, "-c", CODE], cwd=ROOT, capture_output=True, text=True, timeout=1200,
        # a fresh build cache and device-code cache
        env={**os.environ, "HOME": str(tmp_path),
             "CEE_DEVICE_CODE_CACHE": str(tmp_path / "device-code-cache")},
    )  # fmt: skip
    assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
    from buildtools import declarations

    names = sorted(op.name for op in declarations.load().ops)
    assert f"namespace cuda_ext_example_jit ops {names}" in run.stdout
    assert "wrong []" in run.stdout


def test_make_jit_without_a_gpu_says_why_in_one_line():
    # `make jit` where no GPU is: one line naming the cause and exit 1, no traceback.
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the command would build")
    run = subprocess.run(
        [sys.executable, "-m", "lab.gpu.jit_check", "csrc"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 1, run.stdout + run.stderr
    assert "Traceback" not in run.stderr
    assert "lab.gpu.jit_check: the JIT build failed: " in run.stderr
    assert "GPU: none found" in run.stderr
