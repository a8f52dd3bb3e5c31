"""The device-code cache changes no byte: two fresh clones of one commit build the same dev
wheel (SASS for sm_90 only, to keep it to a minute), one taking its programs from the cache
this checkout's own build filled, the other compiling every program (the cache off)."""

from __future__ import annotations

import re
import shutil

import pytest

from buildtools import device_cache
from scripts.release.artifacts import sha256
from tests.clones import clone_with_tools, make

pytestmark = pytest.mark.release


def test_a_wheel_is_the_same_bytes_with_and_without_the_cache(tmp_path, monkeypatch):
    if shutil.which("git") is None:
        pytest.skip("needs git")
    if device_cache.default_root() is None:
        pytest.skip("the device-code cache is off here (CEE_DEVICE_CODE_CACHE=off)")
    wheels = []
    for cache in (None, "off"):
        if cache:
            monkeypatch.setenv("CEE_DEVICE_CODE_CACHE", cache)
        repo = clone_with_tools(tmp_path / f"clone-{len(wheels)}")
        run = make(repo, "wheel", "ARCHS=90")
        out = run.stdout + run.stderr
        assert run.returncode == 0, out[-4000:]
        (wheel,) = (repo / "dist").glob("*.whl")
        wheels.append((wheel, out))
    # Every program from the cache: this checkout's build (make test's) compiled each of them.
    (hits,) = re.findall(r"(\d+) from the cache .*, 0 compiled", wheels[0][1])
    assert int(hits) > 0, wheels[0][1][-2000:]
    assert "from the cache" not in wheels[1][1]
    assert sha256(wheels[0][0]) == sha256(wheels[1][0]), wheels[0][0].name
