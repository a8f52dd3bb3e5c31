"""lab/gpu, a built wheel on a GPU machine: which tests `suite -- ARGS` runs, the facts
its logs and benchmark files start with, and its refusals of bad input."""

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from lab.gpu import __main__ as gpu_main
from lab.gpu.__main__ import missing_test_tools, pytest_targets
from lab.gpu.facts import measured_gpu, package_line
from lab.gpu.preflight import missing_modules
from tests.clones import typed_make_env

ROOT = Path(__file__).resolve().parents[2]


def test_suite_runs_every_test_unless_tests_are_named():
    assert pytest_targets([]) == ["tests"]
    assert pytest_targets(["-k", "launch_shape", "-x"]) == ["tests"]  # options only


def test_named_tests_run_alone():
    assert pytest_targets(["tests/building/test_wheel.py", "tests/tools/test_inspect.py"]) == []
    assert pytest_targets(["tests/building/test_wheel.py::test_wheel_size", "-x"]) == []
    assert pytest_targets(["lab/tests/test_tuning.py", "-q"]) == []  # the lab's too
    assert pytest_targets(["nowhere/test_wheel.py"]) == ["tests"]  # not a file here


def test_a_wheel_built_from_uncommitted_changes_says_so():
    record = {"git_commit": "83ec0f08d2e0ffff", "device_compiler": "NVRTC 12.9"}
    assert package_line("0.1.0", record) == "0.1.0 (83ec0f08d2e0, device code by NVRTC 12.9)"
    dirty = package_line("0.1.0", dict(record, git_dirty=True))
    assert dirty == "0.1.0 (83ec0f08d2e0+dirty, device code by NVRTC 12.9)"


def test_a_benchmark_names_the_gpu_it_measured():
    # On a 2x H200 machine the file was named nvidia-h200-nvidia-h200-DATE from the list.
    machine = {"GPU": "NVIDIA H200, NVIDIA H100", "driver": "580"}
    facts = measured_gpu(machine, ["NVIDIA H200", "NVIDIA H100"], 1)
    assert facts["GPU"] == "NVIDIA H100"
    assert facts["measured"] == "cuda:1 of 2 GPUs (NVIDIA H200, NVIDIA H100)"
    assert machine["GPU"] == "NVIDIA H200, NVIDIA H100"  # the machine's facts stay as they were
    one = measured_gpu({"GPU": "NVIDIA H100"}, ["NVIDIA H100"], 0)
    assert one == {"GPU": "NVIDIA H100"}  # one GPU: no extra line


def test_benchmark_facts_name_the_current_device(monkeypatch):
    import torch

    from lab.gpu import facts

    names = ["NVIDIA H200", "NVIDIA H100"]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: len(names))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=None: names[i])
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    monkeypatch.setattr(facts, "driver_version", lambda: "580")
    assert facts.machine_facts()["GPU"] == "NVIDIA H200, NVIDIA H100"  # a log's header: all
    measured = facts.benchmark_facts()
    assert measured["GPU"] == "NVIDIA H100"
    assert measured["measured"] == "cuda:1 of 2 GPUs (NVIDIA H200, NVIDIA H100)"


def test_suite_names_the_test_tools_a_machine_lacks():
    env = dict(os.environ)
    assert missing_test_tools(env) == []  # pyelftools is in the dev lock
    tools = {"elftools": "pyelftools", "no_such_module_cee": "no-such-dist"}
    assert missing_test_tools(env, tools) == ["no-such-dist"]


def test_preflight_finds_what_an_interpreter_lacks_without_importing_it():
    assert missing_modules(["json", "no_such_module_cee", "no_such_pkg_cee.sub"]) == [
        "no_such_module_cee",
        "no_such_pkg_cee.sub",
    ]


@pytest.mark.parametrize("target", ["bench", "jit"])
def test_gpu_make_targets_with_a_python_lacking_torch_say_the_fix_in_one_line(target):
    # A fresh clone has no .venv, so python3 is the system's, often without torch: one line
    # with the fix, no traceback. `-S` hides site-packages here.
    run = subprocess.run(
        ["make", "-s", target, f"PYTHON={sys.executable} -S"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, env=typed_make_env(),
    )  # fmt: skip
    assert run.returncode != 0
    assert "Traceback" not in run.stderr
    lines = [line for line in run.stderr.splitlines() if not line.startswith("make: ***")]
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith(f"make {target}: ")
    assert "cannot import torch" in lines[0] and "run `make install` first" in lines[0]


def fake_wheel(path: Path) -> Path:
    """A zip file with a wheel's name, which pip refuses (no .dist-info)."""
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("x.py", "")
    return path


def gpu_runner(*args, tmp: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "lab.gpu", *map(str, args)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
        env=dict(os.environ, TMPDIR=str(tmp)),  # where its temp folders would stay behind
    )  # fmt: skip


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["suite", "/nonexistent.whl"], "/nonexistent.whl: no such file"),
        (["suite", "README.md"], "README.md: not a wheel"),
        (["tools", "/nonexistent.whl", "OUT"], "/nonexistent.whl: no such file"),
        (["bench", "/nonexistent.whl", "OUT"], "/nonexistent.whl: no such file"),
        (["release-check", "/nonexistent.whl", "OUT"], "/nonexistent.whl: no such file"),
        (["coldstart", "README.md", "--out", "OUT"], "README.md: not a wheel"),
        # Checked before the venv and torch's download.
        (["compat", "torch==0.0.0+cee.cli.test", "/nonexistent.whl"], "no such file"),
    ],
)
def test_gpu_runner_checks_the_wheel_before_pip(args, said, tmp_path):
    # Each ended in CalledProcessError from pip install --target (or pip's "no requirements").
    outdir = tmp_path / "out"
    run = gpu_runner(*[outdir if a == "OUT" else a for a in args], tmp=tmp_path)
    assert run.returncode == 1
    assert "Traceback" not in run.stderr, run.stderr
    assert run.stderr.strip() == run.stderr.strip().splitlines()[0]  # one line
    assert run.stderr.startswith(f"lab.gpu {args[0]}: ") and said in run.stderr
    assert "make wheel" in run.stderr
    assert not outdir.exists() and not list(tmp_path.glob("cee-*"))
    assert not (ROOT / "build" / "compat-torch__0_0_0_cee_cli_test").exists()


def test_gpu_runner_reports_a_failed_pip_in_one_line_and_cleans_up(tmp_path):
    run = gpu_runner("suite", fake_wheel(tmp_path / "x-1-py3-none-any.whl"), tmp=tmp_path)
    assert run.returncode == 1
    assert "Traceback" not in run.stderr, run.stderr
    last = run.stderr.strip().splitlines()[-1]  # pip's own message comes above
    assert last.startswith("lab.gpu suite: pip install --no-index of x-1-py3-none-any.whl")
    assert last.endswith("failed (exit 1; see the output above)")
    assert not list(tmp_path.glob("cee-site-*"))  # the target folder is gone


def test_release_check_without_tool_wheels_names_what_is_missing(tmp_path, monkeypatch, capsys):
    # With an empty tools folder it ran pip with no wheels: CalledProcessError.
    monkeypatch.setitem(gpu_main.RELEASE_TOOLS, "no_such_module_cee", "no-such-dist")
    wheel = fake_wheel(tmp_path / "x-1-py3-none-any.whl")
    (tmp_path / "tools").mkdir()
    args = ["release-check", str(wheel), str(tmp_path / "out"), "--tools", str(tmp_path / "tools")]
    assert gpu_main.main(args) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("lab.gpu release-check: the prove step needs ")
    assert "\n" not in err and "no-such-dist" in err  # (and any real tool this machine lacks)
    assert f"pip download -d {tmp_path / 'tools'} " in err
    assert not (tmp_path / "out").exists()


@pytest.mark.wheel
def test_tools_reads_the_wheel_with_the_checkouts_inspect(good_wheel, tmp_path, monkeypatch):
    # inspect is a repository tool: the tools run calls it from the checkout's root, where
    # it runs with the wheel's environment.
    steps = {}

    def record(log, title, cmd, **kwargs):
        steps[title] = (cmd, kwargs)
        return 0

    monkeypatch.setattr(gpu_main.Log, "run", record)
    monkeypatch.setattr(gpu_main, "nsight_compute", lambda *args: None)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    assert gpu_main.run_tools(good_wheel, tmp_path, env, str(tmp_path)) == 0
    cmd, kwargs = steps["inspect (device code, ELF, shims)"]
    assert cmd == [sys.executable, "-m", "scripts.inspect", good_wheel.resolve()]
    assert kwargs["cwd"] == ROOT
    run = subprocess.run(list(map(str, cmd)), capture_output=True, text=True, **kwargs)
    assert run.returncode == 0, run.stderr
    assert "=> needs torch >= 2.9" in run.stdout
