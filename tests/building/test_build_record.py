"""The build record says honestly what a wheel was built from."""

from __future__ import annotations

import subprocess
from pathlib import Path

from buildtools.build_ext import git_state


def git(root: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root, check=True,
        capture_output=True,
    )  # fmt: skip


def test_an_uncommitted_or_new_op_file_makes_the_build_dirty(tmp_path):
    (tmp_path / "ops" / "add").mkdir(parents=True)
    (tmp_path / "ops" / "add" / "rule.h").write_text("// a + b\n")
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-qm", "first")
    commit, dirty = git_state(tmp_path)
    assert len(commit) == 40 and not dirty

    (tmp_path / "notes.txt").write_text("not a build input\n")
    assert git_state(tmp_path)[1] is False

    (tmp_path / "ops" / "gelu").mkdir()
    (tmp_path / "ops" / "gelu" / "ops.toml").write_text('rule = "Gelu"\n')  # untracked
    assert git_state(tmp_path)[1] is True

    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "gelu")
    assert git_state(tmp_path)[1] is False
    (tmp_path / "ops" / "add" / "rule.h").write_text("// a - b\n")  # edited, not committed
    assert git_state(tmp_path)[1] is True


def test_outside_a_git_checkout_the_record_says_so(tmp_path):
    commit, dirty = git_state(tmp_path)
    assert commit.startswith("unknown") and dirty is False
