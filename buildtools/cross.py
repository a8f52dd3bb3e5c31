"""Building for another CPU or system (aarch64 on an x86_64 machine, or x86_64 on an aarch64
one; Windows x86_64, `win_amd64`, from Linux): what differs is only the host library. zig
cross-compiles and links it; the device code (the fatbin) is the same bytes for every target.
What the link needs of torch, its headers and libtorch_cpu.so (torch_cpu.lib, the import
library of torch_cpu.dll, for Windows), comes from torch's wheel for that target, fetched at
the lock's version and hash and used for linking only. The Windows DLL uses torch's C shims
only (the LibTorch stable ABI is a C ABI), so zig's MinGW target links against torch's MSVC
import library. (Only x86_64 -> aarch64 and -> win_amd64 have run.)
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from . import config

# torch's wheels for other targets and their link files (about 550 MB, fetched once).
CACHE = config.shared_cache("CEE_CROSS_CACHE", "cross-torch")
LOCK = config.ROOT / "requirements" / "dev.lock"
# Where torch publishes its wheels for each CPU (pip --platform matches tags exactly); every CPU
# `make release` builds, whichever CPU it runs on.
WHEEL_PLATFORMS = {
    "x86_64": ["manylinux_2_28_x86_64", "manylinux2014_x86_64"],
    "aarch64": ["manylinux_2_28_aarch64", "manylinux2014_aarch64"],
    config.WINDOWS: [config.WINDOWS],
}
LINK_ONLY = {
    "linux": ("torch/lib/libtorch_cpu.so", "torch/lib/libc10.so"),
    "windows": ("torch/lib/torch_cpu.lib",),
}


def is_windows(target: str) -> bool:
    return target == config.WINDOWS


def link_only(target: str) -> tuple[str, ...]:
    return LINK_ONLY["windows" if is_windows(target) else "linux"]


def zig_target(target: str, glibc: str) -> str:
    """zig's target triple: x86_64-linux-gnu.2.17, or x86_64-windows-gnu (MinGW: its own
    C++ runtime linked in, the Universal C Runtime of every Windows 10 and later)."""
    return "x86_64-windows-gnu" if is_windows(target) else f"{target}-linux-gnu.{glibc}"


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
    platforms = [a for p in WHEEL_PLATFORMS[arch] for a in ("--platform", p)]
    py = f"{sys.version_info.major}{sys.version_info.minor}"
    # Into a folder of its own, then renamed into place: two builds at once never see half
    # a wheel, and pip's hash check has passed before the wheel is there to be found.
    with tempfile.TemporaryDirectory(dir=dest, prefix=".download-") as fetched:
        pinned = Path(fetched) / "torch.txt"
        pinned.write_text(requirement + "\n")
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
             "--require-hashes", *platforms, "--python-version", py, "--implementation", "cp",
             "-d", fetched, "-r", pinned],
            check=True,
        )  # fmt: skip
        (wheel,) = sorted(Path(fetched).glob(f"torch-{version}-*{arch}*.whl"))
        os.replace(wheel, dest / wheel.name)
    return dest / wheel.name


def torch_paths(arch: str) -> tuple[Path, Path]:
    """(include dir, lib dir) of torch for `arch`: headers and the libraries to link."""
    wheel = torch_wheel(arch)
    root = CACHE / wheel.stem
    needed = link_only(arch)
    if not root.exists():
        # Extracted beside it, then renamed into place whole (a build killed halfway leaves
        # no folder that looks complete; of two builds at once, the second keeps the first's).
        scratch = tempfile.mkdtemp(dir=CACHE, prefix=".extract-")
        try:
            with zipfile.ZipFile(wheel) as zf:
                for name in zf.namelist():
                    if name.startswith("torch/include/") or name in needed:
                        zf.extract(name, scratch)
            os.rename(scratch, root)
        except OSError:
            if not root.exists():
                raise
        finally:
            shutil.rmtree(scratch, ignore_errors=True)  # nothing left where the rename took it
    return root / "torch" / "include", root / "torch" / "lib"
