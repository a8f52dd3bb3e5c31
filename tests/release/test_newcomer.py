"""A newcomer's path through a fresh clone: the README's main command, then the
know-your-binary targets, all from the repository root, with no system CUDA.

One build serves the whole test: `make release` (build, auditwheel show + repair,
gates, upload to a local pypiserver, pip install into a fresh venv, smoke test, the
Colab notebook), then `make inspect` (doctor, then the PTX and symbols). Where root and
unshare allow, /usr/local is hidden (no /usr/local/cuda) and nvcc is off PATH: the
device code must come from the pinned PyPI NVRTC alone. (The README's second command,
`make test`, runs in a fresh clone of its own: test_pypi_only.py.)
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import zipfile

import pytest

from buildtools import declarations
from tests.clones import (
    ROOT,
    clone_with_tools,
    make,
    readme_commands,
)

pytestmark = pytest.mark.release


@pytest.fixture(scope="module")
def released_clone(tmp_path_factory):
    """A fresh clone after the README's `make release` (with the notebook)."""
    if shutil.which("git") is None:
        pytest.skip("needs git")
    hide = shutil.which("unshare") is not None and os.geteuid() == 0
    clone = clone_with_tools(tmp_path_factory.mktemp("newcomer"))
    run = make(clone, "release", "RELEASE_ARGS=--notebook", hide_cuda=hide)
    return clone, hide, run.returncode, run.stdout + run.stderr


def test_fresh_clone_release_then_inspect(released_clone):
    clone, hide, returncode, log = released_clone
    assert readme_commands()[0] == "make release"
    assert returncode == 0, log[-6000:]
    assert "Traceback" not in log
    steps = ["build wheel and sdist"]
    for cpu in ("x86_64", "aarch64"):
        steps += [f"auditwheel show ({cpu})", f"auditwheel repair ({cpu})", f"gates ({cpu})"]
    steps += ["keep the Windows wheel (win_amd64)", "gates (win_amd64)"]
    steps += ["twine check --strict (sdist)", "SHA256SUMS", "upload",
              "verify: the index serves the built bytes",
              "prove: fresh venv, pip install cuda_ext_example, smoke test"]  # fmt: skip
    for step in steps:
        assert f"<== {step}: ok" in log, step
    assert "device code: NVRTC 12.0 + 12.9, sm_50" in log
    assert "local index: http://127.0.0.1:" in log
    assert "Successfully installed cuda_ext_example" in log
    assert log.count("SMOKE TEST PASSED") >= 2  # in the notebook and in the smoke test
    # The smoke test of the index install checks every declared op against its reference.
    for dtype in ("float32", "int64", "bfloat16"):
        names = ", ".join(cuda_ext_example_ops(dtype))
        assert f"{names} torch.{dtype} n=1000003: ok" in log
    if hide:
        assert "/usr/local/cuda" not in log  # no include path or compiler from a toolkit
    wheels = sorted(p.name for p in (clone / "build" / "release" / "wheelhouse").glob("*.whl"))
    assert len(wheels) == 3
    assert "py3-none-manylinux2014_aarch64" in wheels[0]
    assert "py3-none-manylinux2014_x86_64" in wheels[1]
    assert wheels[2] == "cuda_ext_example-0.1.0-py3-none-win_amd64.whl"

    run = make(clone, "inspect", "ARGS=--ptx --symbols", hide_cuda=hide)
    out = run.stdout + run.stderr
    assert "Traceback" not in out, out[-4000:]
    assert run.returncode == 0, out[-4000:]
    assert "device code by NVRTC 12.0 + 12.9" in out  # doctor read the installed wheel's record
    ops = " ".join(cuda_ext_example_ops())
    assert f"[  ok] run on cpu: {ops} match their references" in out
    assert "verdict: ready" in out
    assert "cubins from CUDA 12.0: sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90" in out
    assert "cubins from CUDA 12.9: sm_100 sm_120" in out  # inspect --ptx
    assert "ld.global.nc.v4" in out
    assert "defined dynamic symbols (T): 6\n  T cee_device_library" in out  # --symbols


def test_same_commit_same_bytes(released_clone, windows_wheel, tmp_path):
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
    with zipfile.ZipFile(ours) as wheel:
        record = json.loads(wheel.read("cuda_ext_example/_build_info.json"))
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=ROOT, check=True
    ).stdout.strip()
    with zipfile.ZipFile(windows_wheel) as wheel:
        windows_record = json.loads(wheel.read("cuda_ext_example/_build_info.json"))
    for built in (record, windows_record):
        # make wheel rebuilds when a source changes, not for a new commit of the same sources.
        if built["git_dirty"] or built["git_commit"] != head:
            pytest.skip("this checkout's wheels were built from another source than HEAD")
    (ours_repaired,) = (ROOT / "wheelhouse").glob("*.whl")
    _, ours_sdist = pipeline.build_wheel_and_sdist(ours, tmp_path)
    (theirs,) = (clone / "dist").glob("*.whl")
    (theirs_repaired,) = (clone / "build" / "release" / "wheelhouse").glob("*x86_64*.whl")
    (theirs_sdist,) = (clone / "build" / "release" / "dist").glob("*.tar.gz")
    # The Windows wheel as this checkout's make wheel ARCH=win_amd64 built it, and as the
    # clone's release kept it: zig's COFF link is reproducible (no timestamp, no paths).
    (theirs_windows,) = (clone / "build" / "release" / "wheelhouse").glob("*win_amd64.whl")
    from scripts.release.artifacts import read_sha256sums, sha256

    pairs = (ours, theirs), (ours_repaired, theirs_repaired), (ours_sdist, theirs_sdist)
    for a, b in (*pairs, (windows_wheel, theirs_windows)):
        assert a.name == b.name
        assert sha256(a) == sha256(b), f"{a.name} differs between two builds of one commit"
    sums = read_sha256sums(clone / "build" / "release" / "SHA256SUMS")
    released = [*(clone / "build" / "release" / "wheelhouse").glob("*.whl"), theirs_sdist]
    assert sums == {p.name: sha256(p) for p in released}


def test_every_wheel_embeds_the_same_device_code(released_clone):
    """The aarch64 and Windows wheels differ from the x86_64 one only in their host code."""
    clone, _, returncode, log = released_clone
    assert returncode == 0, log[-3000:]
    from scripts.inspect import binary_info, pe_info

    fatbins = {}
    for wheel in (clone / "build" / "release" / "wheelhouse").glob("*.whl"):
        with binary_info.extension_in(wheel) as so:
            fatbins[wheel.name] = binary_info.section_data(so, binary_info.fatbin_section(so))
            if wheel.name.endswith("win_amd64.whl"):
                assert pe_info.cpu(so.read_bytes()) == "amd64"
                continue
            elf = binary_info._elf(so)
            machine = elf.header["e_machine"]
            elf.stream.close()
        assert machine == ("EM_AARCH64" if "aarch64" in wheel.name else "EM_X86_64")
    (x86,) = [f for name, f in fatbins.items() if "x86_64" in name]
    (arm,) = [f for name, f in fatbins.items() if "aarch64" in name]
    (windows,) = [f for name, f in fatbins.items() if "win_amd64" in name]
    assert x86 is not None and x86.count(b"\x7fELF") >= 9
    assert x86 == arm == windows


def test_know_your_binary_targets_reuse_the_installed_wheel(released_clone):
    """A second `make inspect` answers at once: no repair, no reinstall, no build."""
    clone_dir, hide, returncode, log = released_clone
    assert returncode == 0, log[-3000:]
    first = make(clone_dir, "inspect", hide_cuda=hide)
    assert first.returncode == 0, (first.stdout + first.stderr)[-3000:]
    again = make(clone_dir, "inspect", hide_cuda=hide)
    out = again.stdout + again.stderr
    assert again.returncode == 0, out[-3000:]
    assert "verdict: ready" in out
    for step in ("auditwheel", "pip install", "build --wheel", "setup:"):
        assert step not in out, f"`make inspect` ran {step!r} again:\n{out[-3000:]}"


def cuda_ext_example_ops(dtype: str | None = None) -> list[str]:
    """The declared ops (that take `dtype`), sorted: what doctor and the smoke test name."""
    return [op.name for op in declarations.load().ops if dtype is None or dtype in op.dtypes]
