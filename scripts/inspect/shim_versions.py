"""Which torch release first exports each LibTorch stable-ABI shim function.

Read from torch's own headers (torch/csrc/stable/c/shim.h and the AOTI shim),
where each newer shim is declared under
``#if TORCH_FEATURE_VERSION >= TORCH_VERSION_2_XX_0``. Declarations outside any
such guard predate the versioned stable ABI (torch <= 2.9).
"""

from __future__ import annotations

import re
from pathlib import Path

SHIM_HEADERS = (
    "torch/csrc/stable/c/shim.h",
    "torch/csrc/inductor/aoti_torch/c/shim.h",
)
BASELINE = (2, 9)  # unguarded declarations: available in every torch the stable ABI supports

_GUARD = re.compile(r"#if\s+TORCH_FEATURE_VERSION\s*>=\s*TORCH_VERSION_(\d+)_(\d+)_\d+")
_DECL = re.compile(r"AOTI_TORCH_EXPORT\s+[\w\s\*]*?\b(\w+)\s*\(")


def _versions_in(text: str) -> dict[str, tuple[int, int]]:
    found: dict[str, tuple[int, int]] = {}
    stack: list[tuple[int, int] | None] = []  # one entry per open #if*
    pending = ""  # text since the last preprocessor line
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            _collect(pending, stack, found)
            pending = ""
            if stripped.startswith("#if"):
                guard = _GUARD.match(stripped)
                stack.append((int(guard.group(1)), int(guard.group(2))) if guard else None)
            elif stripped.startswith("#endif") and stack:
                stack.pop()
        else:
            pending += line + "\n"
    _collect(pending, stack, found)
    return found


def _collect(chunk: str, stack, found) -> None:
    versions = [v for v in stack if v is not None]
    version = max(versions) if versions else BASELINE
    for name in _DECL.findall(chunk):
        found.setdefault(name, version)


def shim_versions(torch_include: Path) -> dict[str, tuple[int, int]]:
    """{symbol: (major, minor) of the first torch that has it} from torch's headers."""
    versions: dict[str, tuple[int, int]] = {}
    for header in SHIM_HEADERS:
        path = Path(torch_include) / header
        for name, version in _versions_in(path.read_text()).items():
            versions.setdefault(name, version)
    return versions


def torch_shims(symbols: list[str]) -> list[str]:
    """The torch stable-ABI shim functions among a binary's imported symbols."""
    return [s for s in symbols if s.startswith(("aoti_torch_", "torch_"))]


def format_version(version: tuple[int, int]) -> str:
    return f"<={version[0]}.{version[1]}" if version == BASELINE else f"{version[0]}.{version[1]}"
