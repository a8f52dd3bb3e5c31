"""Finds the host toolchain: zig (PyPI) and torch's headers and libtorch_cpu.so."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path


class ToolchainError(RuntimeError):
    pass


def zig_command() -> list[str]:
    try:
        import ziglang  # noqa: F401
    except ImportError as exc:
        raise ToolchainError("zig is needed to link for glibc 2.17: pip install ziglang") from exc
    return [sys.executable, "-m", "ziglang"]


def torch_paths() -> tuple[Path, Path]:
    """(include dir, lib dir) of the torch the build runs with, found without importing it."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise ToolchainError("torch is needed at build time for its headers: pip install torch")
    root = Path(next(iter(spec.submodule_search_locations)))
    return root / "include", root / "lib"
