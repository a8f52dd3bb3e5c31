"""Reads the build targets declared once in pyproject.toml [tool.cuda_ext_example]."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 builds
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class BuildConfig:
    version: str
    sass_archs: tuple[str, ...]
    ptx_arch: str
    torch_target: str
    glibc: str
    python_limited_api: str
    device_cuda: str
    ptx_isa: str
    min_driver: str
    min_driver_cuda: str

    @property
    def torch_target_hex(self) -> str:
        """TORCH_TARGET_VERSION as torch/csrc/stable/version.h encodes it."""
        major, minor = (int(x) for x in self.torch_target.split("."))
        return f"0x{(major << 56) | (minor << 48):016x}"

    @property
    def py_limited_api_hex(self) -> str:
        major, minor = (int(x) for x in self.python_limited_api.split("."))
        return f"0x{major:02X}{minor:02X}0000"

    @property
    def abi_tag(self) -> str:
        """The wheel's Python tag: 'cp310' for python-limited-api 3.10."""
        return "cp" + self.python_limited_api.replace(".", "")

    @property
    def arch_summary(self) -> str:
        sass = " ".join(f"sm_{a}" for a in self.sass_archs)
        return f"SASS {sass}; PTX compute_{self.ptx_arch}"


def source_date_epoch() -> int:
    """The time every artifact carries: $SOURCE_DATE_EPOCH, else the commit's time, so
    that two builds of one commit are the same bytes; now, outside a git checkout."""
    import os
    import subprocess
    import time

    if os.environ.get("SOURCE_DATE_EPOCH"):
        return int(os.environ["SOURCE_DATE_EPOCH"])
    try:
        out = subprocess.run(
            ["git", "log", "-1", "--format=%ct"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
        return int(out)
    except (OSError, ValueError):
        return int(time.time())


def load(pyproject: Path = ROOT / "pyproject.toml") -> BuildConfig:
    data = tomllib.loads(pyproject.read_text())
    tool = data["tool"]["cuda_ext_example"]
    return BuildConfig(
        version=data["project"]["version"],
        sass_archs=tuple(tool["sass-archs"]),
        ptx_arch=tool["ptx-arch"],
        torch_target=tool["torch-target"],
        glibc=tool["glibc"],
        python_limited_api=tool["python-limited-api"],
        device_cuda=tool["device-cuda"],
        ptx_isa=tool["ptx-isa"],
        min_driver=tool["min-driver"],
        min_driver_cuda=tool["min-driver-cuda"],
    )
