"""The build record says honestly what a wheel was built from, and every op in one list."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from buildtools import declarations
from buildtools.build_ext import declared_record, git_state

# What the record says of each op (the Python side is made from it), and of each argument.
OP_KEYS = ["name", "folder", "schema", "arguments", "outputs", "dtypes", "reference",
           "tolerance", "samples", "backward", "jvp", "broadcasts", "no_grad_twin", "kernel",
           "checks", "doc"]  # fmt: skip
ARGUMENT_KEYS = ["name", "type", "default", "sample", "mutable", "number"]


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


def test_the_record_lists_every_op_of_both_kinds_alike(cfg):
    decl = declarations.load()
    record = json.loads(json.dumps(declared_record(cfg, "x86_64", decl)))  # as written
    assert "custom_ops" not in record
    assert [op["name"] for op in record["ops"]] == [op.name for op in decl.ops]
    for op in record["ops"]:
        assert list(op) == OP_KEYS, op["name"]
        assert all(list(argument) == ARGUMENT_KEYS for argument in op["arguments"]), op["name"]
    ops = {op["name"]: op for op in record["ops"]}
    # an op with a rule (the core's kernel, broadcasting) and one with its own kernels
    assert (ops["my_fast_add"]["kernel"], ops["my_fast_add"]["broadcasts"]) == ("vectorized", True)
    assert (ops["my_rms_norm"]["kernel"], ops["my_rms_norm"]["broadcasts"]) == (None, False)
    assert ops["my_rms_norm"]["checks"] == ["eps >= 0"]
    assert ops["my_rms_norm"]["outputs"] == ["out"]
    assert ops["my_rms_norm_backward"]["outputs"] == ["dx", "dweight"]
    assert record["device_libraries"] == decl.libraries
