"""Building the other CPU's wheel (buildtools/cross.py): `make release` builds every CPU of the
Makefile's CPUS from whichever CPU it runs on, so torch's wheel must be fetchable for each."""

from __future__ import annotations

import re
import subprocess
import zipfile
from pathlib import Path

import pytest

from buildtools import config, cross

ROOT = Path(__file__).resolve().parents[2]


def makefile_cpus() -> list[str]:
    (line,) = re.findall(r"^CPUS := (.+)$", (ROOT / "Makefile").read_text(), re.M)
    return line.split()


def test_every_cpu_the_release_builds_has_torch_wheel_platforms():
    assert set(makefile_cpus()) <= set(cross.WHEEL_PLATFORMS)


@pytest.mark.parametrize("arch", makefile_cpus())
def test_torch_wheel_of_another_cpu_is_asked_of_pip_by_its_platform_tags(
    arch, monkeypatch, tmp_path
):
    version = cross.locked_requirement("torch").split("==")[1].split()[0]
    asked = []

    def fake_pip(cmd, check):
        platforms = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--platform"]
        asked.append(platforms)
        dest = Path(cmd[cmd.index("-d") + 1])
        (dest / f"torch-{version}-cp311-cp311-{platforms[0]}.whl").write_bytes(b"")
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(cross, "CACHE", tmp_path)
    monkeypatch.setattr(cross.subprocess, "run", fake_pip)
    wheel = cross.torch_wheel(arch)
    assert asked == [cross.WHEEL_PLATFORMS[arch]]
    assert all(tag.endswith(arch) for tag in asked[0])
    assert wheel.name.startswith(f"torch-{version}-") and arch in wheel.name


def test_torch_for_linking_is_cached_outside_the_checkout(monkeypatch, tmp_path):
    assert config.shared_cache("CEE_CROSS_CACHE", "cross-torch") == cross.CACHE
    monkeypatch.setenv("CEE_CROSS_CACHE", str(tmp_path / "named"))
    assert config.shared_cache("CEE_CROSS_CACHE", "cross-torch") == tmp_path / "named"
    monkeypatch.delenv("CEE_CROSS_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    expected = tmp_path / "xdg" / "cuda_ext_example" / "cross-torch"
    assert config.shared_cache("CEE_CROSS_CACHE", "cross-torch") == expected


def test_link_files_are_extracted_once_and_whole(monkeypatch, tmp_path):
    """The headers and libtorch come out of torch's wheel into a folder that appears complete
    or not at all; a later build (a fresh clone) takes it without opening the wheel."""
    wheel = tmp_path / "torch-2.9.1-cp311-cp311-manylinux_2_28_aarch64.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for name in ("torch/include/torch/a.h", *cross.link_only("aarch64"), "torch/big.so"):
            zf.writestr(name, name)
    monkeypatch.setattr(cross, "CACHE", tmp_path / "cache")
    (tmp_path / "cache").mkdir()
    monkeypatch.setattr(cross, "torch_wheel", lambda arch: wheel)
    include, lib = cross.torch_paths("aarch64")
    assert (include / "torch" / "a.h").read_text() == "torch/include/torch/a.h"
    assert sorted(p.name for p in lib.iterdir()) == ["libc10.so", "libtorch_cpu.so"]
    assert not (tmp_path / "cache" / wheel.stem / "torch" / "big.so").exists()
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [wheel.stem]  # no scratch left
    wheel.unlink()
    assert cross.torch_paths("aarch64") == (include, lib)
