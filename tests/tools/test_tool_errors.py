"""The GPU tools run where they cannot work (no GPU here) or with a bad argument: one line
that says why, a nonzero exit, no traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

BAD_ARGUMENTS = {
    # argument errors: argparse's usage and one error line, exit 2, GPU or not
    "coldstart --repeats 0": (["scripts.gpu.coldstart", "--repeats", "0"], 2, "--repeats"),
    "profile_trace --size 40": (["scripts.gpu.profile_trace", "--size", "40"], 2, "--size"),
    "bench --sizes 40": (["scripts.bench", "--sizes", "40"], 2, "--sizes"),
}
NEEDS_A_GPU = {
    "bench": (["scripts.bench"], 2, "no CUDA GPU here"),
    "bench --workload square": (["scripts.bench", "--workload", "square"], 2, "no CUDA GPU here"),
    "ncu_target": (["scripts.gpu.ncu_target"], 1, "needs a CUDA GPU"),
    "sanitizer_target": (["scripts.gpu.sanitizer_target"], 1, "needs a CUDA GPU"),
}


def run_module(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize("case", sorted(BAD_ARGUMENTS))
def test_a_bad_argument_is_one_line(case):
    args, code, words = BAD_ARGUMENTS[case]
    run = run_module(args)
    assert run.returncode == code, run.stdout + run.stderr
    assert "Traceback" not in run.stderr
    assert words in run.stderr.splitlines()[-1]


@pytest.mark.parametrize("case", sorted(NEEDS_A_GPU))
def test_a_gpu_tool_without_a_gpu_is_one_line(case):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the tool would run")
    args, code, words = NEEDS_A_GPU[case]
    run = run_module(args)
    assert run.returncode == code, run.stdout + run.stderr
    assert "Traceback" not in run.stderr
    assert words in run.stderr and len(run.stderr.strip().splitlines()) == 1, run.stderr


def test_coldstart_tells_cpu_rows_from_gpu_rows():
    # On a machine without a GPU the rows said "libcuda opened, fatbin loaded" of a CPU call.
    from scripts.gpu.coldstart import explain

    assert "fatbin" in explain("first my_add", "NVIDIA H100 80GB HBM3")
    assert "CPU kernel" in explain("first my_add", "cpu") and "fatbin" not in explain(
        "first my_add", "cpu"
    )
    assert explain("import torch", "cpu") == explain("import torch", "NVIDIA H200")
