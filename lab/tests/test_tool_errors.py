"""The lab's tools run where they cannot work (no GPU here) or with bad input: one line
that says why, a nonzero exit, no traceback; and the cheap checks come before slow set-ups."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

BAD_ARGUMENTS = {
    # argument errors: argparse's usage and one error line, exit 2, GPU or not
    "coldstart --repeats 0": (["lab.gpu.coldstart", "--repeats", "0"], 2, "--repeats"),
    "profile_trace --size 40": (["lab.gpu.profile_trace", "--size", "40"], 2, "--size"),
    "bench --sizes 40": (["lab.bench", "--sizes", "40"], 2, "--sizes"),
}
NEEDS_A_GPU = {
    "bench": (["lab.bench"], 2, "no CUDA GPU here"),
    "bench --workload square": (["lab.bench", "--workload", "square"], 2, "no CUDA GPU here"),
    "ncu_target": (["lab.gpu.ncu_target"], 1, "needs a CUDA GPU"),
    "sanitizer_target": (["lab.gpu.sanitizer_target"], 1, "needs a CUDA GPU"),
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
    from lab.gpu.coldstart import explain

    assert "fatbin" in explain("first my_add", "NVIDIA H100 80GB HBM3")
    assert "CPU kernel" in explain("first my_add", "cpu") and "fatbin" not in explain(
        "first my_add", "cpu"
    )
    assert explain("import torch", "cpu") == explain("import torch", "NVIDIA H200")


def refused(run: subprocess.CompletedProcess, prog: str) -> str:
    """The one line of a refusal (asserted to be one, with no traceback)."""
    assert run.returncode != 0, run.stdout + run.stderr
    assert "Traceback" not in run.stderr, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith(f"{prog}: "), lines[0]
    return lines[0]


# ------------------------------------------------------------------ lab.tune


@pytest.mark.parametrize(
    ("path", "said"),
    [
        ("/nonexistent.json", "/nonexistent.json: no such file"),  # FileNotFoundError
        ("tuning", "tuning: not a file"),  # IsADirectoryError
        ("README.md", "README.md: not a measurements CSV (no 'shape' column)"),  # KeyError
    ],
)
def test_tune_table_names_a_file_that_is_no_measurements_csv(path, said):
    line = refused(run_module(["lab.tune", "table", str(path)]), "lab.tune table")
    assert said in line
    assert "python -m lab.tune measure" in line


# ------------------------------------------------- tools that run a wheel elsewhere


@pytest.mark.release
@pytest.mark.parametrize("tool", ["aarch64_check", "free_threaded_check", "wine_check"])
@pytest.mark.parametrize(
    ("wheel", "said"),
    [("README.md", "README.md: not a wheel"), ("nope.whl", "nope.whl: no such file")],
)
def test_wheel_checks_refuse_a_wheel_that_is_none_before_their_set_up(tool, wheel, said):
    # The set-up (a CPython build, QEMU, Wine) takes minutes and then failed on the path.
    run = run_module([f"lab.{tool}", "check", wheel])
    assert run.returncode == 2
    assert "Traceback" not in run.stderr, run.stderr
    assert f"python -m lab.{tool}: error: {said}" in run.stderr
