"""The device-code cache changes no byte: two fresh clones of one commit build the same dev
wheel (SASS for sm_90 only, to keep it to a minute), one compiling every program (the cache
off), the other taking them from the cache."""

from __future__ import annotations

import shutil

import pytest

from scripts.release.artifacts import sha256
from tests.clones import clone_with_tools, make

pytestmark = pytest.mark.release


def test_a_wheel_is_the_same_bytes_with_and_without_the_cache(tmp_path, monkeypatch):
    if shutil.which("git") is None:
        pytest.skip("needs git")
    wheels = []
    for cache in ("off", str(tmp_path / "cache"), str(tmp_path / "cache")):
        # The second build fills the cache, the third takes every program from it.
        monkeypatch.setenv("CEE_DEVICE_CODE_CACHE", cache)
        repo = clone_with_tools(tmp_path / f"clone-{len(wheels)}")
        run = make(repo, "wheel", "ARCHS=90")
        out = run.stdout + run.stderr
        assert run.returncode == 0, out[-4000:]
        (wheel,) = (repo / "dist").glob("*.whl")
        wheels.append((wheel, out))
    assert "from the cache" not in wheels[0][1]
    assert ", 0 from the cache" in wheels[1][1]
    assert " 0 compiled" in wheels[2][1]
    digests = {sha256(wheel) for wheel, _ in wheels}
    assert len(digests) == 1, [wheel.name for wheel, _ in wheels]
