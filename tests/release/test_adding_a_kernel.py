"""docs/ADDING_A_KERNEL.md, run: its four files (a row sum: kernels, host function,
declaration, tests) written into a fresh clone exactly as the page shows them, then the clone
builds, repairs, passes every release gate and the op's tests (its own and the declared-op
tests of test_declared_ops.py), and doctor and the smoke test check it. The recipe is the
doc's, so the doc cannot go stale.

Slow (a whole wheel build): marked `release`. The clone reuses this venv's tools."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.clones import clone_with_doc_files, doc_files, make

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "ADDING_A_KERNEL.md"
pytestmark = pytest.mark.release


def recipe_files() -> dict[str, str]:
    return doc_files(DOC)


def test_the_recipe_is_kernels_a_host_function_a_declaration_and_tests():
    files = recipe_files()
    names = sorted(Path(p).name if p.startswith("ops/") else "tests" for p in files)
    assert names == ["host.h", "kernels.cuh", "ops.toml", "tests"], files.keys()


@pytest.fixture(scope="module")
def recipe_clone(tmp_path_factory):
    return clone_with_doc_files(tmp_path_factory.mktemp("kernel-recipe"), DOC)


def test_recipe_op_passes_every_gate_and_its_tests(recipe_clone):
    python = recipe_clone / ".venv" / "bin" / "python"
    (wheel,) = (recipe_clone / "wheelhouse").glob("*.whl")
    gates = subprocess.run(
        [python, "-m", "scripts.release", "gates", wheel],
        cwd=recipe_clone, capture_output=True, text=True,
    )  # fmt: skip
    assert gates.returncode == 0, (gates.stdout + gates.stderr)[-4000:]
    installed = make(recipe_clone, "install")
    assert installed.returncode == 0, (installed.stdout + installed.stderr)[-4000:]
    args = ["tests/ops/test_my_row_sum.py", "tests/ops/test_declared_ops.py", "-k", "my_row_sum",
            "-p", "no:cacheprovider"]  # fmt: skip
    run = subprocess.run(
        [python, "-P", "-m", "pytest", *args], cwd=recipe_clone, capture_output=True, text=True
    )
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-4000:]
    assert int(re.search(r"(\d+) passed", out).group(1)) >= 10, out[-2000:]
    for command in ("doctor", "smoke-test"):
        run = subprocess.run(
            [python, "-P", "-m", "cuda_ext_example", command],
            cwd=recipe_clone, capture_output=True, text=True,
        )  # fmt: skip
        out = run.stdout + run.stderr
        assert run.returncode == 0 and "my_row_sum" in out, out[-4000:]
