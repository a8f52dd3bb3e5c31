"""The README's test command in a fresh clone that sees PyPI alone: this machine's local
package mirrors hidden and pip's configuration off, as on a user's machine."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time

import pytest

from scripts import setup_venv
from tests.clones import clone, local_package_sources, pypi_only, pypi_only_env, readme_commands

pytestmark = pytest.mark.release

# Inside, the op and doctor tests only: the set-up, build, repair and install are all there,
# and the rest of the suite runs outside, with the same lock (inside, this file would run
# itself again, and CI has a time budget).
NESTED_PYTEST_ARGS = "tests/ops/test_declared_ops.py tests/tools/test_doctor.py -p no:cacheprovider"
# The second run shows what is reused (venv, wheel): a few tests say that it still works.
SECOND_PYTEST_ARGS = "tests/tools/test_doctor.py -p no:cacheprovider"


@pytest.fixture(scope="module")
def pypi_only_runs(tmp_path_factory):
    """Two runs of the README's test command in one fresh clone, where every local
    package mirror that pip's configuration names is hidden and pip's configuration is
    off: (clone, first run, second run, the set-up log's mtime between them)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("git") is None:
        pytest.skip("needs root, unshare and git to hide this machine's package mirrors")
    repo = clone(tmp_path_factory.mktemp("pypi-only") / "clone")
    # A second venv of torch and its CUDA libraries beside this one: the set-up's own
    # check says whether this disk holds it (a full disk is the machine's limit, not a
    # fault of the README's command, which the set-up reports in one line: test_setup).
    problem = setup_venv.free_space_problem(repo / ".venv")
    if problem:
        pytest.skip(f"no room for a second venv from PyPI: {problem}")
    # pip's cache would keep a second copy of the 3 GB download on this machine's disk.
    env = {**pypi_only_env(), "PIP_NO_CACHE_DIR": "1"}

    def run(pytest_args: str):
        command = f'cd {repo} && {readme_commands()[1]} PYTEST_ARGS="{pytest_args}"'
        return subprocess.run(pypi_only(command), capture_output=True, text=True, env=env)

    first = run(NESTED_PYTEST_ARGS)
    setup_log = repo / "build" / "venv-setup.log"
    mtime = setup_log.stat().st_mtime if setup_log.exists() else None
    time.sleep(1)
    yield repo, first, run(SECOND_PYTEST_ARGS), mtime
    shutil.rmtree(repo / ".venv", ignore_errors=True)  # 5.8 GB the later tests may need


def test_readme_test_command_works_from_pypi_alone(pypi_only_runs):
    repo, first, _, _ = pypi_only_runs
    out = first.stdout + first.stderr
    assert first.returncode == 0, out[-6000:]
    assert readme_commands()[1] == "make test"
    assert "setup: installing requirements/dev.lock" in out
    setup_log = (repo / "build" / "venv-setup.log").read_text()
    assert "Successfully installed" in setup_log
    # pip looked at PyPI and nothing else: no extra index, no find-links, no mirror.
    assert "Looking in indexes" not in setup_log, setup_log[:2000]
    assert "Looking in links" not in setup_log, setup_log[:2000]
    for source in local_package_sources():
        assert str(source) not in setup_log
    torch_version = subprocess.run(
        [repo / ".venv" / "bin" / "python", "-c",
         "import importlib.metadata as m; print(m.version('torch'))"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert "+" not in torch_version  # PyPI's torch, not a local build such as +cpu
    (summary,) = re.findall(r"^=+ (.* in [\d.]+s.*) =+$", first.stdout, re.M)
    assert re.match(r"\d+ passed", summary) and "failed" not in summary, summary


def test_second_run_reuses_the_venv(pypi_only_runs):
    repo, first, second, setup_mtime = pypi_only_runs
    assert first.returncode == 0, (first.stdout + first.stderr)[-3000:]
    out = second.stdout + second.stderr
    assert second.returncode == 0, out[-3000:]
    assert "setup:" not in out  # make's venv stamp is newer than the lock: no pip at all
    assert (repo / "build" / "venv-setup.log").stat().st_mtime == setup_mtime
    assert "auditwheel" not in out and "Successfully installed" not in out  # nor a rebuild
    assert re.search(r"^=+ \d+ passed.* in [\d.]+s.* =+$", second.stdout, re.M), out[-2000:]
