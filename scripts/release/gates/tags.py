"""The wheel's tags: the platform it is for (the gate table runs that platform's gates),
and the py3-none gate: no tag may tie the wheel to one CPython ABI."""

from __future__ import annotations

from pathlib import Path

from buildtools import config

from .failure import GateFailure
from .wheel_metadata import wheel_fields

# The wheel platforms, as their tags end: the Linux CPUs and Windows.
LINUX_CPUS = ("x86_64", "aarch64")
TARGETS = (*LINUX_CPUS, config.WINDOWS)


def wheel_tags(wheel: Path) -> list[str]:
    return [tag.strip() for tag in wheel_fields(wheel).get_all("Tag") or []]


def wheel_arch(wheel: Path) -> str:
    """'x86_64', 'aarch64' or 'win_amd64', from the wheel's tags (repaired or not)."""
    return arch_of(wheel_tags(wheel))


def arch_of(tags: list[str]) -> str:
    archs = {arch for tag in tags for arch in TARGETS if tag.endswith(arch)}
    if len(archs) != 1:
        raise GateFailure(
            "py3-none-tag",
            f"wheel tags {tags} name no single platform of {sorted(TARGETS)}",
            "build with make wheel (ARCH=aarch64 or ARCH=win_amd64 for those wheels)",
        )
    return archs.pop()


def gate_py3_none_tag(wheel: Path, cfg: config.BuildConfig) -> None:
    """py3-none: the library uses no CPython ABI, so the tags must not tie the wheel to one
    (cp311-cp311: that CPython only; cp310-abi3: never a free-threaded one)."""
    tags = wheel_tags(wheel)
    bad = [t for t in tags if not t.startswith(f"{config.PYTHON_TAGS}-")]
    if bad or not tags:
        raise GateFailure(
            "py3-none-tag",
            f"wheel tags {tags} are not all {config.PYTHON_TAGS}: installers take a wheel "
            f"tagged {sorted({'-'.join(t.split('-')[:2]) for t in bad}) or 'nothing'} only "
            "on that CPython ABI (abi3: never on a free-threaded CPython), though the library "
            "uses no CPython API",
            "build with `make wheel`: setup.py's bdist_wheel is buildtools/wheel_tags.py, "
            f"which tags {config.PYTHON_TAGS}; never setuptools' py_limited_api",
        )
    target = arch_of(tags)
    policy = cfg.wheel_tag(target)
    if policy not in tags:
        raise GateFailure(
            "py3-none-tag",
            f"wheel tags {tags} do not include {policy}",
            f"build with make wheel ARCH={target} (setup.py names the platform)"
            if target == config.WINDOWS
            else "repair with python -m scripts.release repair (auditwheel repair to "
            f"{cfg.manylinux_tag(target)})",
        )
