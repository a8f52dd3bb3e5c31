"""Finds the compilers: nvcc (system toolkit or PyPI), zig (PyPI), torch's headers."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path


class ToolchainError(RuntimeError):
    pass


def _pypi_cuda_root() -> Path | None:
    """site-packages/nvidia/cu13 from the nvidia-cuda-nvcc / -runtime wheels."""
    for base in (sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]):
        root = Path(base) / "nvidia" / "cu13"
        if (root / "bin" / "nvcc").exists():
            return root
    return None


def cuda_root() -> Path:
    """The CUDA 13 toolkit: $CUDA_HOME, nvcc on PATH, /usr/local/cuda, then PyPI."""
    candidates = []
    if os.environ.get("CUDA_HOME"):
        candidates.append(Path(os.environ["CUDA_HOME"]))
    nvcc = shutil.which("nvcc")
    if nvcc:
        candidates.append(Path(nvcc).resolve().parent.parent)
    candidates.append(Path("/usr/local/cuda"))
    pypi = _pypi_cuda_root()
    if pypi:
        candidates.append(pypi)
    for root in candidates:
        if (root / "bin" / "nvcc").exists() and cudart_static(root):
            return root
    raise ToolchainError(
        "no CUDA 13 toolkit found (looked at $CUDA_HOME, nvcc on PATH, /usr/local/cuda and "
        "the PyPI packages). Install one, or: pip install 'nvidia-cuda-nvcc==13.0.*' "
        "'nvidia-cuda-runtime==13.0.*'"
    )


def cudart_static(root: Path) -> Path | None:
    for sub in ("lib64", "lib", "targets/x86_64-linux/lib"):
        lib = root / sub / "libcudart_static.a"
        if lib.exists():
            return lib
    return None


def nvcc_version(nvcc: Path) -> str:
    out = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1]


def zig_command() -> list[str]:
    try:
        import ziglang  # noqa: F401
    except ImportError as exc:
        raise ToolchainError("zig is needed to link for glibc 2.17: pip install ziglang") from exc
    return [sys.executable, "-m", "ziglang"]


def torch_paths() -> tuple[Path, Path]:
    """(include dir, lib dir) of the torch the build runs with, found without importing it."""
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise ToolchainError("torch is needed at build time for its headers: pip install torch")
    root = Path(next(iter(spec.submodule_search_locations)))
    return root / "include", root / "lib"
