"""Which CPythons install the wheel, decided by the tag logic installers use (`packaging.tags`,
which pip vendors and calls for `pip download --python-version --abi --platform`): every
CPython 3 from the floor on, free-threaded builds included, for the tags of the wheel itself.
No network and no other interpreter: docs/SUPPORT.md's table shows pip's real resolution."""

from __future__ import annotations

import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet
from packaging.tags import Tag, compatible_tags, cpython_tags, parse_tag

from buildtools import config

ROOT = Path(__file__).resolve().parents[2]
# A glibc 2.17 .. 2.39 x86_64 machine (manylinux2014 is the alias of manylinux_2_17).
PLATFORMS = [f"manylinux_2_{m}_x86_64" for m in range(39, 16, -1)] + [
    "manylinux2014_x86_64",
    "linux_x86_64",
]
# (version, ABI) of the CPythons a user may have: the GIL builds and the free-threaded ones.
PYTHONS = [((3, minor), f"cp3{minor}") for minor in range(10, 16)] + [
    ((3, 13), "cp313t"),
    ((3, 14), "cp314t"),
    ((3, 15), "cp315t"),
]

pytestmark = pytest.mark.wheel


def accepted(version: tuple[int, int], abi: str) -> set[Tag]:
    """The tags an installer accepts for that CPython on PLATFORMS, most specific first (the
    order does not matter here)."""
    interpreter = f"cp{version[0]}{version[1]}"
    return {
        *cpython_tags(version, abis=[abi], platforms=PLATFORMS),
        *compatible_tags(version, interpreter=interpreter, platforms=PLATFORMS),
    }


@pytest.fixture(scope="module")
def wheel_tags() -> tuple[set[Tag], str]:
    """The repaired wheel's tags (WHEEL's Tag lines) and its Requires-Python."""
    (wheel,) = sorted((ROOT / "wheelhouse").glob("*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        info = {Path(n).name: zf.read(n).decode() for n in zf.namelist() if ".dist-info/" in n}
    lines = Parser().parsestr(info["WHEEL"]).get_all("Tag")
    requires = Parser().parsestr(info["METADATA"])["Requires-Python"]
    return {tag for line in lines for tag in parse_tag(line.strip())}, requires


@pytest.mark.parametrize(("version", "abi"), PYTHONS, ids=[abi for _, abi in PYTHONS])
def test_every_cpython_from_the_floor_on_installs_the_wheel(wheel_tags, version, abi):
    tags, requires = wheel_tags
    assert tags & accepted(version, abi), (abi, sorted(map(str, tags)))
    assert f"{version[0]}.{version[1]}" in SpecifierSet(requires)


@pytest.mark.parametrize("abi", ["cp313t", "cp314t"])
def test_an_abi3_wheel_would_not_install_on_a_free_threaded_cpython(abi):
    # Why the wheel is py3-none: the same wheel tagged cp310-abi3 is refused there (and
    # taken by the GIL build of the same version).
    version = (3, int(abi[3:5]))
    abi3 = Tag("cp310", "abi3", "manylinux2014_x86_64")
    assert abi3 not in accepted(version, abi)
    assert abi3 in accepted(version, abi.removesuffix("t"))


def test_below_the_floor_only_requires_python_refuses():
    # The tags would fit 3.9; METADATA's Requires-Python is what keeps it off.
    tag = Tag("py3", "none", "manylinux2014_x86_64")
    assert tag in accepted((3, 9), "cp39")
    floor = config.load(dev_spec="").requires_python
    assert "3.9" not in SpecifierSet(floor) and "3.10" in SpecifierSet(floor)
