"""`make cpp`: the torch-free harness checks its own results and explains a missing arch."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc"),
]


def build(tmp_path: Path, archs: str) -> Path:
    exe = tmp_path / "cee_harness"
    subprocess.run(
        [
            "make",
            "-s",
            "-C",
            str(ROOT),
            "--always-make",
            f"CPP_ARCHS={archs}",
            f"CPP_OUT={exe}",
            "cpp",
        ],
        check=True,
    )
    return exe


def test_harness_all_dtypes_correct(tmp_path):
    major, minor = torch.cuda.get_device_capability()
    exe = build(tmp_path, f"-gencode arch=compute_{major}{minor},code=sm_{major}{minor}")
    run = subprocess.run([str(exe)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "OK: 0 wrong elements" in run.stdout


def test_harness_reports_missing_architecture(tmp_path):
    major, minor = torch.cuda.get_device_capability()
    other = "75" if major != 7 else "80"  # SASS of another major version cannot run here
    exe = build(tmp_path, f"-gencode arch=compute_{other},code=sm_{other}")
    run = subprocess.run([str(exe), "1000"], capture_output=True, text=True)
    assert run.returncode == 2, run.stdout + run.stderr
    assert (
        f"has no GPU code for cuda:0 (compute capability {major}.{minor}, sm_{major}{minor})"
        in run.stderr
    ), run.stderr
