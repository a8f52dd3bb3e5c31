"""Bad input to the release's commands (python -m scripts.release): one line naming the
command, the problem and the fix, a nonzero exit, no traceback; and the cheap checks come
before slow work (pip, venvs, the network)."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_module(*args, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", *map(str, args)],
        cwd=ROOT, capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip


def refused(run: subprocess.CompletedProcess, prog: str) -> str:
    """The one line of a refusal (asserted to be one, with no traceback)."""
    assert run.returncode != 0, run.stdout + run.stderr
    assert "Traceback" not in run.stderr, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith(f"{prog}: "), lines[0]
    return lines[0]


def closed_port_url() -> str:
    """A URL of 127.0.0.1 where nothing listens (a port just freed): never the internet."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/simple/"


# ------------------------------------------------------------------ scripts.release


@pytest.mark.release
@pytest.mark.parametrize(
    ("wheel", "said"),
    [("README.md", "README.md: not a wheel"), ("tests", "tests: not a file")],
)
def test_gates_refuse_a_file_that_is_no_wheel_in_the_pipelines_block(wheel, said):
    # README.md ended in zipfile.BadZipFile, which the pipeline step did not catch.
    run = run_module("scripts.release", "gates", wheel)
    assert run.returncode == 1
    assert "Traceback" not in run.stderr, run.stderr
    assert "<== FAILED: gates" in run.stderr
    assert f"[wheel] {said}" in run.stderr
    assert "how to fix: pass the repaired wheel" in run.stderr


@pytest.mark.release
@pytest.mark.parametrize(
    ("sums", "said"),
    [
        ("/nonexistent", "cannot read /nonexistent: No such file or directory"),
        ("tests", "cannot read tests: Is a directory"),
        ("README.md", "README.md line 1 is not '<sha256>  <file name>'"),
        ("/dev/null", "/dev/null lists no files"),
    ],
)
def test_verify_reads_the_sums_file_before_the_index(sums, said):
    # The index (a closed port) was contacted first: URLError; then FileNotFoundError or a
    # ValueError from unpacking README.md's lines.
    line = refused(
        run_module("scripts.release", "verify", sums, "--index", closed_port_url()),
        "scripts.release verify",
    )
    assert said in line
    assert "pass the SHA256SUMS the release wrote" in line


@pytest.mark.release
def test_verify_names_an_index_it_cannot_reach(tmp_path):
    sums = tmp_path / "SHA256SUMS"
    sums.write_text(f"{'0' * 64}  cuda_ext_example-0.1.0-py3-none-linux_x86_64.whl\n")
    url = closed_port_url()
    line = refused(
        run_module("scripts.release", "verify", sums, "--index", url), "scripts.release verify"
    )
    assert f"cannot read the index {url}" in line and "Connection refused" in line


@pytest.mark.release
@pytest.mark.parametrize(
    ("command", "said"),
    [
        (["repair", "README.md"], "README.md: not a wheel"),
        (["prove", "/nonexistent.whl"], "/nonexistent.whl: no such file"),
        (["release", "--wheel", "/nonexistent.whl", "--repository", "none"], "no such file"),
    ],
)
def test_release_commands_check_the_given_files_first(command, said, tmp_path):
    # prove and release ended in FileNotFoundError (release after building the sdist).
    out = ["--dest" if command[0] == "repair" else "--out", tmp_path / "out"]
    run = run_module("scripts.release", *command, *out)
    assert said in refused(run, f"scripts.release {command[0]}")
    assert not (tmp_path / "out").exists()  # nothing started
