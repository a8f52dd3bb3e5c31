"""A newcomer's path through a fresh clone: the README's main command, then the
know-your-binary targets, all from the repository root, with no system CUDA.

One build serves the whole test: `make release` (build, auditwheel show + repair,
gates, upload to a local pypiserver, pip install into a fresh venv, smoke test, the
Colab notebook), then `make doctor`, `make ptx`, `make symbols`. Where root and
unshare allow, /usr/local is hidden (no /usr/local/cuda) and nvcc is off PATH: the
device code must come from the pinned PyPI NVRTC alone. (`make test`, the README's
second command, is what runs this file: it is not run again from here.)
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.release


def readme_main_command() -> str:
    block = re.search(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)
    return block.splitlines()[0].split("#")[0].strip()


def clone_with_tools(tmp_path: Path) -> Path:
    """A fresh clone whose .venv reuses this venv's installed tools (a .pth file), so the
    test needs no download; the clone installs its own wheel into its own .venv."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", ROOT, clone], check=True)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", clone / ".venv"], check=True)
    purelib = Path(sysconfig.get_paths()["purelib"])
    (site,) = (clone / ".venv" / "lib").glob("python3*/site-packages")
    (site / "project-tools.pth").write_text(f"{purelib}\n")
    (clone / ".venv" / ".installed").touch()  # make's venv stamp: tools are there
    return clone


def make(clone: Path, *targets: str, hide_cuda: bool) -> subprocess.CompletedProcess:
    tools = str(Path(sys.executable).parent)  # auditwheel, twine, pre-commit, ...
    path = [tools] + [p for p in os.environ["PATH"].split(os.pathsep) if p != tools]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUDA", "VIRTUAL_ENV"))}
    command = shlex.join(["make", "-C", str(clone), *targets])
    if hide_cuda:
        path = [p for p in path if not p.startswith("/usr/local")]
        command = (
            "mount -t tmpfs none /usr/local && test ! -e /usr/local/cuda && "
            f"! command -v nvcc && ! command -v ptxas && {command}"
        )
        cmd = ["unshare", "-m", "--propagation", "private", "sh", "-c", command]
    else:
        cmd = ["sh", "-c", command]
    return subprocess.run(
        cmd, capture_output=True, text=True, env={**env, "PATH": os.pathsep.join(path)}
    )


@pytest.fixture(scope="module")
def released_clone(tmp_path_factory):
    """A fresh clone after the README's `make release` (with the notebook)."""
    if shutil.which("git") is None:
        pytest.skip("needs git")
    hide = shutil.which("unshare") is not None and os.geteuid() == 0
    clone = clone_with_tools(tmp_path_factory.mktemp("newcomer"))
    run = make(clone, "release", "RELEASE_ARGS=--notebook", hide_cuda=hide)
    return clone, hide, run.returncode, run.stdout + run.stderr


def test_fresh_clone_release_then_doctor_ptx_symbols(released_clone):
    clone, hide, returncode, log = released_clone
    assert readme_main_command() == "make release"
    assert returncode == 0, log[-6000:]
    assert "Traceback" not in log
    steps = ["build wheel and sdist"]
    for cpu in ("x86_64", "aarch64"):
        steps += [f"auditwheel show ({cpu})", f"auditwheel repair ({cpu})", f"gates ({cpu})"]
    steps += ["twine check --strict (sdist)", "SHA256SUMS", "upload",
              "verify: the index serves the built bytes",
              "prove: fresh venv, pip install cuda_ext_example, smoke test"]  # fmt: skip
    for step in steps:
        assert f"<== {step}: ok" in log, step
    assert "device code: NVRTC 12.9, sm_75" in log
    assert "local index: http://127.0.0.1:" in log
    assert "Successfully installed cuda_ext_example" in log
    assert log.count("SMOKE TEST PASSED") >= 2  # in the notebook and in the smoke test
    if hide:
        assert "/usr/local/cuda" not in log  # no include path or compiler from a toolkit
    wheels = sorted(p.name for p in (clone / "build" / "release" / "wheelhouse").glob("*.whl"))
    assert len(wheels) == 2
    assert "cp310-abi3-manylinux2014_aarch64" in wheels[0]
    assert "cp310-abi3-manylinux2014_x86_64" in wheels[1]

    run = make(clone, "doctor", "ptx", "symbols", hide_cuda=hide)
    out = run.stdout + run.stderr
    assert "Traceback" not in out, out[-4000:]
    assert run.returncode == 0, out[-4000:]
    assert "device code by NVRTC 12.9" in out  # doctor read the installed wheel's record
    assert "[  ok] run on cpu: my_add and my_fast_add match torch" in out
    assert "verdict: ready" in out
    assert "cubins from CUDA 12.9: sm_75 sm_80" in out  # make ptx
    assert "ld.global.nc.v4" in out
    assert "defined dynamic symbols (T): 1\n  T PyInit__C" in out  # make symbols


def test_same_commit_same_bytes(released_clone, tmp_path):
    """Two fresh clones of one commit, at other paths and other times (this checkout,
    built by `make test`, and the newcomer's), give identical wheel, repaired wheel and
    sdist."""
    clone, _, returncode, log = released_clone
    assert returncode == 0, log[-3000:]
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        capture_output=True, text=True, cwd=ROOT, check=True,
    ).stdout.strip()  # fmt: skip
    if dirty:
        pytest.skip("this checkout has uncommitted changes: its build is another source")
    from scripts.release import pipeline

    (ours,) = (ROOT / "dist").glob("*.whl")
    (ours_repaired,) = (ROOT / "wheelhouse").glob("*.whl")
    _, ours_sdist = pipeline.build_wheel_and_sdist(ours, tmp_path)
    (theirs,) = (clone / "dist").glob("*.whl")
    (theirs_repaired,) = (clone / "build" / "release" / "wheelhouse").glob("*x86_64*.whl")
    (theirs_sdist,) = (clone / "build" / "release" / "dist").glob("*.tar.gz")
    from scripts.release.artifacts import read_sha256sums, sha256

    for a, b in ((ours, theirs), (ours_repaired, theirs_repaired), (ours_sdist, theirs_sdist)):
        assert a.name == b.name
        assert sha256(a) == sha256(b), f"{a.name} differs between two builds of one commit"
    sums = read_sha256sums(clone / "build" / "release" / "SHA256SUMS")
    released = [*(clone / "build" / "release" / "wheelhouse").glob("*.whl"), theirs_sdist]
    assert sums == {p.name: sha256(p) for p in released}


def test_both_cpus_wheels_embed_the_same_device_code(released_clone):
    """The aarch64 wheel differs from the x86_64 one only in its host code."""
    clone, _, returncode, log = released_clone
    assert returncode == 0, log[-3000:]
    from cuda_ext_example import binary_info

    fatbins = {}
    for wheel in (clone / "build" / "release" / "wheelhouse").glob("*.whl"):
        with binary_info.extension_in(wheel) as so:
            fatbins[wheel.name] = binary_info.section_data(so, ".nv_fatbin")
            elf = binary_info._elf(so)
            machine = elf.header["e_machine"]
            elf.stream.close()
        assert machine == ("EM_AARCH64" if "aarch64" in wheel.name else "EM_X86_64")
    (x86,) = [f for name, f in fatbins.items() if "x86_64" in name]
    (arm,) = [f for name, f in fatbins.items() if "aarch64" in name]
    assert x86 is not None and x86.count(b"\x7fELF") >= 9
    assert x86 == arm
