"""`python -m scripts.rename NAME` on a fresh clone: the renamed project builds, its repaired wheel
passes every gate, and its ops load under the new name (import name and torch.ops
namespace) in a process that has never seen the old one.

Slow (a whole wheel build): marked `release`. The clone reuses this venv's tools, as the
newcomer test's does, so nothing is downloaded.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from scripts.rename import project_name
from tests.clones import clone_with_tools, make

ROOT = Path(__file__).resolve().parents[2]
OLD = project_name.current_name(ROOT)
NEW = "my_kernels"

pytestmark = pytest.mark.release


@pytest.fixture(scope="module")
def renamed_clone(tmp_path_factory):
    """A fresh clone after `python -m scripts.rename my_kernels` and `make repair`."""
    if shutil.which("git") is None:
        pytest.skip("needs git")
    clone = clone_with_tools(tmp_path_factory.mktemp("rename"))
    renamed = subprocess.run(
        [sys.executable, "-m", "scripts.rename", NEW], cwd=clone, capture_output=True, text=True
    )
    assert renamed.returncode == 0, renamed.stdout + renamed.stderr
    built = make(clone, "repair", hide_cuda=False)
    return clone, renamed.stdout + renamed.stderr, built


def test_rename_leaves_no_old_name_in_tracked_files(renamed_clone):
    clone, log, _ = renamed_clone
    assert f"renamed {OLD} -> {NEW}" in log
    spellings = project_name.spellings(OLD)
    leftover = subprocess.run(
        ["git", "grep", "-n", *(arg for s in spellings for arg in ("-e", s)), "--", ":!LICENSE"],
        cwd=clone, capture_output=True, text=True,
    )  # fmt: skip
    assert leftover.returncode == 1, leftover.stdout[:3000]  # 1: git grep found nothing
    assert (clone / "src" / NEW / "__init__.py").exists()
    assert not (clone / "src" / OLD).exists()
    assert OLD in (clone / "LICENSE").read_text()  # the copyright notice is kept as is
    assert f"torch.ops.{NEW}" in (clone / "README.md").read_text()


def test_renamed_wheel_passes_every_gate(renamed_clone):
    clone, _, built = renamed_clone
    assert built.returncode == 0, (built.stdout + built.stderr)[-6000:]
    (wheel,) = (clone / "wheelhouse").glob("*.whl")
    assert wheel.name.startswith(f"{NEW}-0.1.0-py3-none-manylinux2014_x86_64")
    tools = Path(sys.executable).parent  # twine, ...: the clone's venv reuses ours
    gates = subprocess.run(
        [clone / ".venv" / "bin" / "python", "-m", "scripts.release", "gates", wheel],
        cwd=clone, capture_output=True, text=True,
        env={**os.environ, "PATH": f"{tools}{os.pathsep}{os.environ['PATH']}"},
    )  # fmt: skip
    out = gates.stdout + gates.stderr
    assert gates.returncode == 0, out[-4000:]
    assert "<== gates: ok" in out
    assert "gate ok: build record matches the binary and pyproject.toml" in out


def test_renamed_ops_load_under_the_new_name(renamed_clone, tmp_path):
    clone, _, built = renamed_clone
    assert built.returncode == 0, (built.stdout + built.stderr)[-3000:]
    (wheel,) = (clone / "wheelhouse").glob("*.whl")
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", target, wheel],
        check=True,
    )  # fmt: skip
    code = (
        "import sys, torch\n"
        f"import {NEW}\n"
        f"assert {NEW}.__file__.startswith(sys.argv[1]), {NEW}.__file__\n"
        "a = torch.arange(5)\n"
        f"print({NEW}.my_add(a, a + 10).tolist())\n"
        f"print(torch.ops.{NEW}.my_fast_add(a, a).tolist())\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in ({OLD!r}, {NEW!r})))\n"
        "print(*sorted(torch.ops.loaded_libraries))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code, str(target)],
        cwd=tmp_path, capture_output=True, text=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(target)},
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "[10, 12, 14, 16, 18]"
    assert lines[1] == "[0, 2, 4, 6, 8]"
    assert OLD not in lines[2] and f"'{NEW}._loader'" in lines[2]  # the old package never loaded
    assert lines[3] == str((target / NEW / f"lib{NEW}.so.1").resolve())  # torch loaded the new


def test_rename_refuses_names_that_cannot_be_namespaces():
    for bad in ("My-Kernels", "2kernels", "import", "torch", OLD):
        with pytest.raises(project_name.RenameError, match=f"cannot rename {OLD} to"):
            project_name.check_new_name(bad, OLD)
    project_name.check_new_name(NEW, OLD)  # and a good one passes
