"""The ways people install: `uv pip install`, the sdist (`pip install --no-binary`), and a
platform the build cannot serve, which must be told so at once."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from buildtools.platform_check import WHEELS, unsupported_reason
from scripts.release import pipeline
from scripts.release.local_index import local_index
from scripts.release.simple_index import project_files
from tests.clones import pip_config

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.release


@pytest.mark.parametrize(
    ("system", "machine"),
    [("Windows", "AMD64"), ("Darwin", "arm64"), ("Linux", "i686"), ("Linux", "armv7l")],
)
def test_unsupported_platform_is_told_at_once(system, machine):
    reason = unsupported_reason(system, machine)
    assert f"cannot be built on {system} {machine}" in reason
    assert WHEELS in reason
    assert unsupported_reason("Linux", "x86_64") is None


def test_platform_message_matches_the_declared_floors():
    # platform_check runs first in setup.py and depends on nothing, so its message is
    # spelt out; it must say what pyproject.toml declares.
    from buildtools import config

    cfg = config.load(dev_spec="")
    assert cfg.wheel_tag("x86_64") in WHEELS and cfg.wheel_tag("win_amd64") in WHEELS
    floor = cfg.requires_python.removeprefix(">=")
    assert f"every CPython >= {floor}, free-threaded too, glibc >= {cfg.glibc}" in WHEELS


def test_build_requirements_install_nothing_large_elsewhere():
    # On another platform setup.py must run (and refuse) before torch, zig or CUDA
    # packages are installed into the build environment.
    tomllib = pytest.importorskip("tomllib")

    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    heavy = [r for r in requires if re.match(r"(torch|ziglang|nvidia-)", r)]
    assert len(heavy) == 6
    marker = "sys_platform == 'linux' and platform_machine in 'x86_64 aarch64'"
    assert all(marker in r for r in heavy)


def torch_pin() -> str:
    """This torch as a requirement, by its public version (2.13.0, not 2.13.0+cu130)."""
    import torch

    return f"torch=={torch.__version__.split('+')[0]}"


def local_torch_wheels() -> list[str]:
    """A speed-up, never a need: a local folder that pip's configuration takes wheels from
    and that holds this torch's wheel. Without one, torch comes from PyPI like a user's."""
    version = torch_pin().split("==")[1]
    for folder in pip_config().get("find-links", []):
        if list(Path(folder).glob(f"torch-{version}*.whl")):
            return [folder]
    return []


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The repaired wheel and a fresh sdist, on a local pypiserver."""
    (wheel,) = (ROOT / "wheelhouse").glob("*.whl")
    out = tmp_path_factory.mktemp("artifacts")
    _, sdist = pipeline.build_wheel_and_sdist(wheel, out)
    index = tmp_path_factory.mktemp("index")
    shutil.copy(wheel, index)
    shutil.copy(sdist, index)
    with local_index(index, out / "pypiserver.log") as base:
        yield base + "simple/"


def smoke_test(python: Path) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        run = subprocess.run(
            [python, "-m", "cuda_ext_example", "smoke-test"],
            capture_output=True,
            text=True,
            cwd=tmp,
        )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "SMOKE TEST PASSED" in run.stdout
    return run.stdout


def test_uv_pip_install_from_the_index(served, tmp_path):
    uv = shutil.which("uv") or str(Path(sys.executable).parent / "uv")
    if not Path(uv).exists():
        pytest.skip("uv not installed (requirements/dev.in)")
    venv = tmp_path / "uv-venv"
    subprocess.run([uv, "venv", "-q", "--python", sys.executable, venv], check=True)
    python = venv / "bin" / "python"
    # torch first, as the README says (from PyPI, or a local wheel folder if pip's
    # configuration has one), then the package from the index alone.
    links = [a for folder in local_torch_wheels() for a in ("--find-links", folder)]
    run = subprocess.run(
        [uv, "pip", "install", "--python", python, *links, torch_pin()],
        capture_output=True, text=True,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    run = subprocess.run(
        [uv, "pip", "install", "--python", python, "--index-url", served, "cuda_ext_example"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert "+ cuda-ext-example==" in run.stderr  # uv's own report of what it installed
    smoke_test(python)


def test_sdist_builds_and_passes_the_smoke_test(served, tmp_path):
    """`pip install --no-binary cuda_ext_example`: the sdist from the index built in pip's
    isolated build environment (torch held to ours, the rest from PyPI), then the smoke test."""
    python = pipeline.make_venv(tmp_path / "venv")
    constraints = tmp_path / "constraints.txt"
    constraints.write_text(torch_pin() + "\n")
    env = dict(os.environ, PIP_CONSTRAINT=str(constraints))
    if local_torch_wheels():
        env["PIP_FIND_LINKS"] = " ".join(local_torch_wheels())
    run = subprocess.run(
        [python, "-m", "pip", "install", "--disable-pip-version-check", "-q", torch_pin()],
        capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    # The index's sdist by its URL: built in pip's isolated environment, whose build
    # requirements come from PyPI as any user's would.
    (sdist_url,) = [
        u for n, u in project_files(served, "cuda_ext_example").items() if n.endswith(".tar.gz")
    ]
    run = subprocess.run(
        [python, "-m", "pip", "install", "--disable-pip-version-check", "--no-binary",
         "cuda_ext_example", sdist_url],
        capture_output=True, text=True, env=env,
    )  # fmt: skip
    log = run.stdout + run.stderr
    assert run.returncode == 0, log[-5000:]
    assert "Successfully built cuda_ext_example" in log or "Successfully installed" in log
    smoke_test(python)
