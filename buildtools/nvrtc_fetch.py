"""NVRTC of an older CUDA than the build requirements' (12.0 next to 12.9), fetched pinned.

The SASS of the archs CUDA 12.0 knows comes from NVRTC 12.0 (pyproject.toml
[tool.cuda_ext_example.sass-archs]). PyPI has it, but as `nvidia-cuda-nvrtc-cu12==12.0.76`,
the same distribution as the 12.9 build requirement: both cannot be installed into one
environment. So, like buildtools/cross.py with torch's aarch64 wheel, the build downloads
the wheels of requirements/nvrtc-<cuda>.txt with `pip download --no-deps --require-hashes`
(every file checked against the hash written there) into build/nvrtc-<cuda>/ and unpacks
them there. It works the same for `make wheel` and for an sdist build (the requirements
file ships in the sdist); pip's own configuration decides the index, as for any install.
"""

from __future__ import annotations

import platform
import subprocess
import sys
import zipfile
from pathlib import Path

from . import config

REQUIREMENTS = config.ROOT / "requirements"
CACHE = config.ROOT / "build"
# PyPI publishes NVRTC 12.0 for these build hosts only (manylinux1_x86_64): the compiler
# runs on the build machine, whatever CPU the wheel is for.
HOSTS = ("x86_64",)


class FetchError(RuntimeError):
    pass


def requirements_file(cuda: str) -> Path:
    return REQUIREMENTS / f"nvrtc-{cuda}.txt"


def root(cuda: str) -> Path:
    """Where the unpacked wheels live: root/nvidia/cuda_nvrtc/lib/libnvrtc.so.12, ..."""
    return CACHE / f"nvrtc-{cuda}" / "root"


def _download(cuda: str, dest: Path) -> list[Path]:
    req = requirements_file(cuda)
    if not req.exists():
        raise FetchError(
            f"no {req.relative_to(config.ROOT)}: NVRTC {cuda} is not a build requirement and "
            "has no pinned download; declare its archs under a CUDA that has one"
        )
    if platform.machine() not in HOSTS:
        raise FetchError(
            f"NVRTC {cuda} from PyPI runs on {', '.join(HOSTS)} build hosts only, this is "
            f"{platform.machine()}: build on x86_64 (make wheel ARCH={platform.machine()} "
            "cross-builds this CPU's wheel)"
        )
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--require-hashes",
           "--only-binary=:all:", "-d", str(dest), "-r", str(req)]  # fmt: skip
    print("+", " ".join(cmd), flush=True)
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        raise FetchError(
            f"pip download of NVRTC {cuda} ({req.name}) failed:\n"
            f"{(result.stdout + result.stderr).strip()}"
        )
    return sorted(dest.glob("*.whl"))


def fetch(cuda: str) -> Path:
    """The unpacked NVRTC <cuda> and its headers (downloaded once per checkout)."""
    target = root(cuda)
    marker = target / ".complete"
    if marker.exists():
        return target
    wheels = _download(cuda, CACHE / f"nvrtc-{cuda}" / "wheels")
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as zf:
            zf.extractall(target)
    for lib in target.glob("nvidia/*/lib/*.so*"):
        lib.chmod(0o755)  # zip entries carry no mode bits here
    marker.write_text("\n".join(w.name for w in wheels) + "\n")
    return target
