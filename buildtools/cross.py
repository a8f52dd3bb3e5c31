"""Building for another CPU (aarch64 on an x86_64 machine, or x86_64 on an aarch64 one):
what differs is only the host library. zig cross-compiles and links it; the device code (the
fatbin) is the same bytes for every CPU. What the link needs of torch, its headers and
libtorch_cpu.so, comes from torch's wheel for that CPU, fetched at the lock's version and
hash and used for linking only. (Only x86_64 -> aarch64 has run: no aarch64 machine here.)
"""

from __future__ import annotations

import platform
import subprocess
import sys
import zipfile
from pathlib import Path

from . import config

CACHE = config.ROOT / "build" / "cross"
LOCK = config.ROOT / "requirements" / "dev.lock"
# Where torch publishes its wheels for each CPU (pip --platform matches tags exactly); every CPU
# `make release` builds, whichever CPU it runs on.
WHEEL_PLATFORMS = {
    "x86_64": ["manylinux_2_28_x86_64", "manylinux2014_x86_64"],
    "aarch64": ["manylinux_2_28_aarch64", "manylinux2014_aarch64"],
}
LINK_ONLY = ("torch/lib/libtorch_cpu.so", "torch/lib/libc10.so")


def host_arch() -> str:
    return platform.machine()


def target_arch() -> str:
    """$CEE_TARGET_ARCH (make wheel ARCH=aarch64), else this machine's CPU."""
    import os

    return os.environ.get("CEE_TARGET_ARCH") or host_arch()


def locked_requirement(name: str, lock: Path = LOCK) -> str:
    """`name`'s entry in the lock, hashes included (a requirements line pip can check)."""
    lines = lock.read_text().splitlines()
    for i, line in enumerate(lines):
        if line.startswith(f"{name}=="):
            entry = [line]
            while entry[-1].endswith("\\"):  # continued on the next line
                entry.append(lines[i + len(entry)])
            return "\n".join(entry)
    raise RuntimeError(f"{lock} pins no {name}: run make lock")


def torch_wheel(arch: str) -> Path:
    """torch's wheel for `arch` at the lock's version and hash (fetched once): headers and
    libraries to link against, from PyPI or whatever index pip is configured with."""
    requirement = locked_requirement("torch")
    version = requirement.split("==")[1].split()[0]
    dest = CACHE / "wheels"
    found = sorted(dest.glob(f"torch-{version}-*{arch}*.whl"))
    if found:
        return found[-1]
    dest.mkdir(parents=True, exist_ok=True)
    pinned = dest / "torch.txt"
    pinned.write_text(requirement + "\n")
    platforms = [a for p in WHEEL_PLATFORMS[arch] for a in ("--platform", p)]
    py = f"{sys.version_info.major}{sys.version_info.minor}"
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
         "--require-hashes", *platforms, "--python-version", py, "--implementation", "cp",
         "-d", dest, "-r", pinned],
        check=True,
    )  # fmt: skip
    (wheel,) = sorted(dest.glob(f"torch-{version}-*{arch}*.whl"))
    return wheel


def torch_paths(arch: str) -> tuple[Path, Path]:
    """(include dir, lib dir) of torch for `arch`: headers and the libraries to link."""
    wheel = torch_wheel(arch)
    root = CACHE / wheel.stem
    if not (root / LINK_ONLY[0]).exists():
        with zipfile.ZipFile(wheel) as zf:
            for name in zf.namelist():
                if name.startswith("torch/include/") or name in LINK_ONLY:
                    zf.extract(name, root)
    return root / "torch" / "include", root / "torch" / "lib"
