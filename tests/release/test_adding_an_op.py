"""docs/ADDING_AN_OP.md, run: its three files (an op with scalar arguments and a declared
tolerance) written into a fresh clone exactly as the page shows them, then the clone builds,
repairs, passes every release gate and the new op's tests, and doctor checks it. The recipe
is the doc's, so the doc cannot go stale.

Slow (a whole wheel build): marked `release`. The clone reuses this venv's tools."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.clones import clone_with_doc_files, doc_files, make

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "ADDING_AN_OP.md"
pytestmark = pytest.mark.release


def recipe_files() -> dict[str, str]:
    return doc_files(DOC)


def test_the_recipe_is_a_rule_a_declaration_and_a_test_file():
    files = recipe_files()
    kinds = sorted(Path(p).name if p.startswith("ops/") else "tests" for p in files)
    assert kinds == ["ops.toml", "rule.h", "tests"], files.keys()
    (test_file,) = [p for p in files if not p.startswith("ops/")]
    assert Path(test_file).parent == Path("tests", "ops"), test_file  # each op's own tests


@pytest.fixture(scope="module")
def recipe_clone(tmp_path_factory):
    return clone_with_doc_files(tmp_path_factory.mktemp("recipe"), DOC)


def test_recipe_touches_nothing_but_its_files(recipe_clone):
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=recipe_clone, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    changed = sorted(line[3:] for line in status.splitlines())
    assert changed == sorted(recipe_files()), status


def test_recipe_op_passes_every_gate(recipe_clone):
    (wheel,) = (recipe_clone / "wheelhouse").glob("*.whl")
    gates = subprocess.run(
        [recipe_clone / ".venv" / "bin" / "python", "-m", "scripts.release", "gates", wheel],
        cwd=recipe_clone, capture_output=True, text=True,
    )  # fmt: skip
    out = gates.stdout + gates.stderr
    assert gates.returncode == 0, out[-4000:]
    assert "<== gates: ok" in out


def test_the_authors_loop_builds_installs_and_tests_the_op(recipe_clone):
    # The page's `make op OP=...`: a dev build of the clone (its other ops' device code from
    # the cache), installed, then the op's own tests and its declared-op checks.
    run = make(recipe_clone, "op", "OP=my_softplus")
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-4000:]
    passed = int(re.search(r"(\d+) passed", out).group(1))
    assert passed >= 15, out[-2000:]  # its own two, every size and layout, errors, autograd
    assert "test_my_softplus.py" in out or "my_softplus" in out


def test_doctor_and_the_smoke_test_name_the_recipe_op(recipe_clone):
    installed = make(recipe_clone, "install")  # the repaired wheel (done if the test above ran)
    assert installed.returncode == 0, (installed.stdout + installed.stderr)[-4000:]
    python = recipe_clone / ".venv" / "bin" / "python"
    for command in ("doctor", "smoke-test"):
        run = subprocess.run(
            [python, "-P", "-m", "cuda_ext_example", command],
            cwd=recipe_clone, capture_output=True, text=True,
        )  # fmt: skip
        out = run.stdout + run.stderr
        assert run.returncode == 0, out[-4000:]
        assert "my_softplus" in out, out[-4000:]
