"""`python -m cuda_ext_example doctor`: its verdicts on simulated machines, and a real run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from cuda_ext_example import BUILD_INFO, OP_NAMES
from cuda_ext_example.doctor import (
    FAIL,
    OK,
    WARN,
    Environment,
    Gpu,
    judge,
    judge_gpu,
    judge_launch_shapes,
)

SASS = BUILD_INFO["sass_archs"]


def env(**overrides) -> Environment:
    base = dict(
        python=(3, 12),
        torch_version="2.11.0+cu130",
        torch_cuda="13.0",
        driver=13000,
        gpus=[Gpu(0, "NVIDIA H100", (9, 0))],
    )
    base.update(overrides)
    return Environment(**base)


def levels(findings, topic_start: str) -> list[str]:
    return [f.level for f in findings if f.topic.startswith(topic_start)]


def test_healthy_machine_has_no_problem():
    findings = judge(env(), BUILD_INFO)
    assert FAIL not in [f.level for f in findings]
    assert levels(findings, "cuda:0") == [OK, OK]  # its code, its launch shapes


def test_launch_shapes_say_which_table_a_gpu_takes():
    tables = BUILD_INFO["launch_shapes"]["tables"]  # what this wheel was built with
    measured = next(name for name in tables if name != "default")
    finding = judge_launch_shapes(Gpu(1, measured, (9, 0)), tables)
    assert (finding.level, finding.topic) == (OK, "cuda:1 launch shapes")
    assert finding.message == f"measured on this GPU ({tables[measured]})"
    other = judge_launch_shapes(Gpu(0, "NVIDIA GeForce RTX 4090", (8, 9)), tables)
    assert other.message.startswith("the default table: no table was measured on a NVIDIA "
                                    "GeForce RTX 4090")  # fmt: skip
    assert measured in other.message and "python -m lab.tune measure" in other.message
    # judge() asks it for every GPU, by the name torch reports.
    findings = judge(env(gpus=[Gpu(0, measured, (9, 0))]), BUILD_INFO)
    assert [f.message for f in findings if f.topic == "cuda:0 launch shapes"] == [finding.message]


@pytest.mark.parametrize("free_threaded", [False, True])
@pytest.mark.parametrize("python", [(3, 10), (3, 14), (3, 15)])
def test_every_cpython_from_the_floor_on_is_ok_free_threaded_too(python, free_threaded):
    (finding,) = [f for f in judge(env(python=python, free_threaded=free_threaded), BUILD_INFO)
                  if f.topic == "python"]  # fmt: skip
    assert finding.level == OK
    assert finding.message.startswith(f"{python[0]}.{python[1]}" + "t" * free_threaded + " (")
    assert "py3-none: its library uses no CPython API" in finding.message
    assert "needs CPython >= 3.10" in finding.message


def test_python_below_the_packages_floor_fails():
    (finding,) = [f for f in judge(env(python=(3, 9)), BUILD_INFO) if f.topic == "python"]
    assert (finding.level, finding.message) == (FAIL, "3.9; the package needs CPython >= 3.10")


def test_old_torch_fails_with_the_version_needed():
    findings = judge(env(torch_version="2.8.0"), BUILD_INFO)
    (torch_finding,) = [f for f in findings if f.topic == "torch"]
    assert torch_finding.level == FAIL
    assert "2.8.0 is older than 2.9" in torch_finding.message
    assert "pip install -U 'torch>=2.9'" in torch_finding.message


def test_missing_torch_fails():
    findings = judge(env(torch_version=None, torch_cuda=None), BUILD_INFO)
    assert levels(findings, "torch") == [FAIL]


def test_driver_older_than_cuda_12_fails():
    findings = judge(env(driver=11080, torch_cuda="12.8"), BUILD_INFO)
    (driver,) = [f for f in findings if f.topic == "driver"]
    assert driver.level == FAIL
    assert "CUDA 11.8 driver" in driver.message
    assert "need a driver for CUDA >= 12.0 (>= 525.60.13)" in driver.message


@pytest.mark.parametrize("driver", [12000, 12040, 12080])  # R525, R550 (Colab's T4s), R570
def test_cuda_12_drivers_below_580_run_every_sass_gpu(driver):
    gpus = [Gpu(0, "Tesla T4", (7, 5)), Gpu(1, "NVIDIA A100", (8, 0)), Gpu(2, "H100", (9, 0))]
    findings = judge(env(driver=driver, gpus=gpus, torch_cuda="12.6"), BUILD_INFO)
    assert FAIL not in [f.level for f in findings]
    assert levels(findings, "cuda:") == [OK] * 6  # each GPU's code and launch shapes
    # Only the PTX path (a GPU newer than the wheel) would need CUDA 12.9's driver.
    (warning,) = [f for f in findings if f.topic == "driver" and f.level == WARN]
    assert "CUDA 12.9 PTX" in warning.message


def test_driver_of_cuda_12_9_or_newer_has_no_warning():
    findings = judge(env(driver=12090, torch_cuda="12.8"), BUILD_INFO)
    (driver,) = [f for f in findings if f.topic == "driver"]
    assert driver.level == OK
    assert "the wheel's CUDA 12.9 device code needs >= 12.0" in driver.message


@pytest.mark.parametrize("driver", [12020, 12080])  # R535, R570
def test_cuda_13_torch_on_a_cuda_12_driver_is_torchs_own_problem(driver):
    findings = judge(env(driver=driver, torch_cuda="13.0"), BUILD_INFO)
    (problem,) = [f for f in findings if f.topic == "torch vs driver"]
    assert problem.level == FAIL
    needs = "torch is built with CUDA 13.0, which needs a driver for CUDA >= 13.0 (>= 580.65.06)"
    assert needs in problem.message
    assert f"this driver supports CUDA 12.{driver % 1000 // 10}" in problem.message
    assert "pip install torch --index-url https://download.pytorch.org/whl/cu128" in (
        problem.message
    )
    # our own kernels would run there: the driver and GPU lines say so apart
    assert levels(findings, "driver") == [OK, WARN]
    assert levels(findings, "cuda:0") == [OK, OK]


@pytest.mark.parametrize(
    ("torch_cuda", "driver"), [("12.6", 12020), ("12.8", 13000), ("13.0", 13000), (None, 12020)]
)
def test_torch_cuda_within_the_drivers_reach_is_no_problem(torch_cuda, driver):
    findings = judge(env(driver=driver, torch_cuda=torch_cuda), BUILD_INFO)
    assert not [f for f in findings if f.topic == "torch vs driver"]


def test_torch_cuda_on_a_driver_too_old_for_any_torch_says_update():
    findings = judge(env(driver=11040, torch_cuda="12.8"), BUILD_INFO)
    (problem,) = [f for f in findings if f.topic == "torch vs driver"]
    assert problem.message.endswith("update the NVIDIA driver")
    assert "index-url" not in problem.message


def test_new_gpu_needs_a_driver_that_knows_the_ptx():
    future = Gpu(0, "future GPU", (13, 0))
    old = judge_gpu(future, SASS, "compute_120", driver=12080, device_cuda="12.9")
    assert old.level == FAIL and "cannot JIT-compile" in old.message
    new = judge_gpu(future, SASS, "compute_120", driver=13000, device_cuda="12.9")
    assert new.level == WARN


def test_no_driver_is_a_cpu_only_warning():
    findings = judge(env(driver=None, gpus=[], torch_cuda=None), BUILD_INFO)
    assert FAIL not in [f.level for f in findings]
    assert levels(findings, "driver") == [WARN]


@pytest.mark.parametrize(
    ("capability", "level", "words"),
    [
        ((9, 0), OK, "SASS sm_90 in the wheel"),
        ((8, 6), OK, "SASS sm_86"),
        ((10, 1), OK, "runs the wheel's sm_100 SASS"),  # Thor (CUDA 12.9): same major
        ((8, 7), OK, "runs the wheel's sm_86 SASS"),  # Orin
        ((13, 0), WARN, "JIT-compiles the wheel's compute_120 PTX"),  # a future GPU
        ((7, 0), OK, "SASS sm_70 in the wheel"),  # V100: torch's CUDA 12 builds run it
        ((6, 1), OK, "runs the wheel's sm_60 SASS"),  # GTX 1080
        ((5, 2), OK, "runs the wheel's sm_50 SASS"),  # GTX 980, torch cu126 runs it
        ((3, 7), FAIL, "NOT COVERED: this wheel has no code for sm_37"),  # K80: no CUDA 12
    ],
)
def test_gpu_verdicts(capability, level, words):
    finding = judge_gpu(Gpu(0, "GPU", capability), SASS, "compute_120")
    assert finding.level == level
    assert words in finding.message


def test_uncovered_gpu_is_said_plainly():
    finding = judge_gpu(Gpu(0, "Tesla K80", (3, 7)), SASS, "compute_120")
    assert finding.topic == "cuda:0 Tesla K80 (sm_37)"
    assert "cannot run on this GPU (the CPU kernels still do)" in finding.message
    assert f"The wheel has SASS {', '.join(SASS)} and PTX compute_120" in finding.message


def test_every_torch_cuda_12_arch_is_covered():
    # torch.cuda.get_arch_list() of 2.11.0+cu126 and 2.10.0/2.11.0+cu128 (pytorch#182250).
    torch_cu12 = ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]
    for arch in torch_cu12:
        cc = int(arch[3:])
        finding = judge_gpu(Gpu(0, "GPU", (cc // 10, cc % 10)), SASS, "compute_120")
        assert finding.level == OK and f"SASS {arch} in the wheel" in finding.message


def test_import_error_is_reported():
    findings = judge(env(), BUILD_INFO) + judge(
        env(load_error="undefined symbol: torch_foo"), BUILD_INFO
    )
    assert [f.message for f in findings if f.topic == "import"] == ["undefined symbol: torch_foo"]


def _with_sitecustomize(tmp_path) -> dict:
    """PYTHONPATH with tmp_path (its sitecustomize.py) first, keeping the rest."""
    rest = os.environ.get("PYTHONPATH", "")
    return {"PYTHONPATH": os.pathsep.join(p for p in (str(tmp_path), rest) if p)}


def _doctor(tmp_path, extra_env=None):
    return subprocess.run(
        [sys.executable, "-m", "cuda_ext_example", "doctor"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, **(extra_env or {})},
    )


def test_doctor_on_this_machine(tmp_path):
    run = _doctor(tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    ops = " ".join(OP_NAMES)  # every declared op, each against its torch reference
    assert f"[  ok] run on cpu: {ops} match their references" in run.stdout
    assert f"SASS {' '.join(BUILD_INFO['sass_archs'])}" in run.stdout
    assert "device code by NVRTC 12.0 + 12.9" in run.stdout
    assert "compiled by: NVRTC 12.0: sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90;" in run.stdout
    assert "NVRTC 12.9: sm_100 sm_120 compute_120" in run.stdout
    assert "verdict: ready" in run.stdout
    for i in range(torch.cuda.device_count()):
        assert f"run on cuda:{i}: {ops} match their references" in run.stdout


def test_doctor_explains_an_old_torch(tmp_path):
    # torch pretends to be 2.8 from interpreter start: the import of the ops fails,
    # and doctor (which must still run) says why and exits non-zero.
    (tmp_path / "sitecustomize.py").write_text("import torch\ntorch.__version__ = '2.8.0'\n")
    run = _doctor(tmp_path, _with_sitecustomize(tmp_path))
    assert run.returncode == 1, run.stdout + run.stderr
    assert "[FAIL] torch: 2.8.0 is older than 2.9" in run.stdout
    assert "[FAIL] import: cuda_ext_example needs torch>=2.9" in run.stdout
    assert "verdict: will NOT run as is" in run.stdout


def test_plain_import_still_raises_under_old_torch(tmp_path):
    (tmp_path / "sitecustomize.py").write_text("import torch\ntorch.__version__ = '2.8.0'\n")
    run = subprocess.run(
        [sys.executable, "-c", "import cuda_ext_example"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, **_with_sitecustomize(tmp_path)},
    )
    assert run.returncode == 1
    assert "ImportError: cuda_ext_example needs torch>=2.9" in run.stderr


def test_doctor_on_an_unbuilt_source_tree(tmp_path):
    # The checkout's src/ first on the path: no build record, no compiled ops. doctor
    # must say so, not end in a traceback.
    root = Path(__file__).resolve().parents[2]
    run = _doctor(tmp_path, {"PYTHONPATH": str(root / "src")})
    assert "Traceback" not in run.stderr, run.stderr
    assert run.returncode == 1, run.stdout + run.stderr
    assert "[FAIL] build: this cuda_ext_example is an unbuilt source tree" in run.stdout
    assert "make install" in run.stdout


def test_unbuilt_record_is_judged_without_a_traceback():
    findings = judge(env(), {})
    assert [f.topic for f in findings if f.level == FAIL] == ["build"]


def test_a_build_of_uncommitted_changes_says_when_it_was_made(monkeypatch):
    """A clean build carries its commit's time (same commit, same bytes); a dirty one is of
    no commit, so a fresh build must not look as old as its last commit."""
    import time

    from buildtools.build_ext import build_time
    from cuda_ext_example.doctor import built_from

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    assert build_time(dirty=False) == 1700000000
    assert abs(build_time(dirty=True) - time.time()) < 60
    record = {"git_commit": "0123456789abcdef", "build_time_utc": "2026-11-23T12:00:00+00:00"}
    clean = built_from({**record, "git_dirty": False})
    dirty = built_from({**record, "git_dirty": True})
    assert clean == "built from commit 0123456789ab (commit time 2026-11-23T12:00:00+00:00)"
    assert dirty == "built 2026-11-23T12:00:00+00:00 from uncommitted changes on 0123456789ab"


def test_command_line_help_and_bad_arguments(monkeypatch, capsys):
    # `doctor --help` and `smoke-test --help` ran the whole command and a stray argument was
    # ignored; --help went to stderr; an unknown command was not named.
    from cuda_ext_example import __main__ as cli
    from cuda_ext_example import doctor, smoke_test

    monkeypatch.setattr(doctor, "main", lambda: pytest.fail("doctor ran"))
    monkeypatch.setattr(smoke_test, "main", lambda: pytest.fail("smoke-test ran"))
    for command in ("doctor", "smoke-test"):
        with pytest.raises(SystemExit) as exit_help:
            cli.main([command, "--help"])
        assert exit_help.value.code == 0
        assert f"usage: python -m cuda_ext_example {command}" in capsys.readouterr().out
        with pytest.raises(SystemExit) as exit_stray:
            cli.main([command, "/some/wheel.whl"])
        assert exit_stray.value.code == 2
        assert "unrecognized arguments: /some/wheel.whl" in capsys.readouterr().err
    assert cli.main(["--help"]) == 0
    assert capsys.readouterr().out.startswith("python -m cuda_ext_example COMMAND")
    assert cli.main(["bogus"]) == 2
    assert capsys.readouterr().err.startswith("python -m cuda_ext_example: unknown command 'bogus'")


def test_inspect_points_to_the_repository_tool_in_one_line(capsys):
    # inspect reads binaries with the repository's tools (scripts/inspect/), which the
    # wheel does not ship: the old command names the new one.
    from cuda_ext_example import __main__ as cli

    assert cli.main(["inspect", "/some/wheel.whl"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith("python -m cuda_ext_example: inspect is a repository tool now: ")
    assert "python -m scripts.inspect WHEEL_OR_SO" in err
