"""Reads the build targets declared once in pyproject.toml [tool.cuda_ext_example]."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 builds
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent


def shared_cache(env: str, name: str) -> Path:
    """A cache folder outside the checkout, shared by every clone and rebuild: $env, else
    $XDG_CACHE_HOME/cuda_ext_example/<name> (~/.cache/...)."""
    named = os.environ.get(env)
    if named:
        return Path(named).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "cuda_ext_example" / name


# PEP 600 names a glibc floor manylinux_2_X; the three floors that PEP 513/571/599 named
# before keep those names as aliases. The wheel is tagged with the alias where there is
# one: pip before 20.3 (PEP 600) knows only the alias, so manylinux2014 keeps old pips
# installing it, and auditwheel repair --plat manylinux2014_x86_64 writes both tags
# (...-manylinux2014_x86_64.manylinux_2_17_x86_64.whl).
MANYLINUX_ALIASES = {"2.5": "manylinux1", "2.12": "manylinux2010", "2.17": "manylinux2014"}
# The wheel's Python and ABI tags: the library uses no CPython symbol (torch loads it with
# torch.ops.load_library), so every CPython 3 installs the wheel, free-threaded ones too;
# [project] requires-python sets the floor of the Python code.
PYTHON_TAGS = "py3-none"
# The compiled library's name in the package (src/cuda_ext_example/_loader.py says why), on
# Linux and in the Windows wheel (win_amd64: a DLL, which no importer takes for a module).
LIBRARY = "libcuda_ext_example.so.1"
WINDOWS_LIBRARY = "cuda_ext_example.dll"
# The Windows wheel's platform: cross-built here by zig against torch's own import library.
WINDOWS = "win_amd64"


def library_name(target: str) -> str:
    """The library's file name for a build target ('x86_64', 'aarch64', 'win_amd64')."""
    return WINDOWS_LIBRARY if target == WINDOWS else LIBRARY


@dataclass(frozen=True)
class BuildConfig:
    version: str
    sass_archs: tuple[str, ...]
    ptx_arch: str | None  # None: a dev build without PTX
    torch_target: str
    glibc: str
    requires_python: str  # [project] requires-python: ">=3.10"
    device_cuda: str
    ptx_isa: str
    min_driver: str
    min_driver_cuda: str
    # The CUDA whose NVRTC compiles each SASS arch: {"90": "12.0", "120": "12.9"}.
    sass_cuda: dict[str, str] = field(default_factory=dict)
    dev_build: bool = False  # make wheel ARCHS=...: never released

    def cuda_of(self, target: str) -> str:
        """The CUDA whose NVRTC compiles a target: '12.0' for 'sm_90', device-cuda ('12.9')
        for the PTX ('compute_120')."""
        if target.startswith("sm_"):
            return self.sass_cuda[target[3:]]
        return self.device_cuda

    @property
    def targets(self) -> list[str]:
        """NVRTC targets: sm_XX per SASS arch, then compute_XX for the PTX."""
        ptx = [f"compute_{self.ptx_arch}"] if self.ptx_arch else []
        return [f"sm_{a}" for a in self.sass_archs] + ptx

    @property
    def torch_target_hex(self) -> str:
        """TORCH_TARGET_VERSION as torch/csrc/stable/version.h encodes it."""
        major, minor = (int(x) for x in self.torch_target.split("."))
        return f"0x{(major << 56) | (minor << 48):016x}"

    def manylinux_tag(self, arch: str) -> str:
        """The wheel's platform tag on a CPU, from the glibc floor: 'manylinux2014_x86_64'
        for glibc 2.17, 'manylinux_2_28_aarch64' for 2.28."""
        legacy = MANYLINUX_ALIASES.get(self.glibc)
        if legacy:
            return f"{legacy}_{arch}"
        major, minor = self.glibc.split(".")
        return f"manylinux_{major}_{minor}_{arch}"

    def platform_tag(self, target: str) -> str:
        """The wheel's platform tag for a build target: manylinux_tag for a Linux CPU,
        'win_amd64' for Windows."""
        return WINDOWS if target == WINDOWS else self.manylinux_tag(target)

    def wheel_tag(self, target: str) -> str:
        """The release wheel's tag: 'py3-none-manylinux2014_x86_64', 'py3-none-win_amd64'."""
        return f"{PYTHON_TAGS}-{self.platform_tag(target)}"

    @property
    def arch_summary(self) -> str:
        sass = " ".join(f"sm_{a}" for a in self.sass_archs)
        ptx = f"compute_{self.ptx_arch}" if self.ptx_arch else "none"
        return f"SASS {sass}; PTX {ptx}" + ("; dev build" if self.dev_build else "")


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


class ConfigError(ValueError):
    pass


def _sass_cuda(table: dict[str, list[str]]) -> dict[str, str]:
    """[tool.cuda_ext_example.sass-archs] {"12.0": ["90", ...]} -> {"90": "12.0", ...}."""
    arch_cuda: dict[str, str] = {}
    for cuda, archs in table.items():
        for arch in archs:
            if arch in arch_cuda:
                raise ConfigError(
                    f"pyproject.toml sass-archs: sm_{arch} is listed under {arch_cuda[arch]} "
                    f"and {cuda}: list each arch under one CUDA"
                )
            arch_cuda[arch] = cuda
    return dict(sorted(arch_cuda.items(), key=lambda item: int(item[0])))


def dev_archs(spec: str, cfg: BuildConfig) -> dict[str, str]:
    """`make wheel ARCHS="90 120"` ($CEE_SASS_ARCHS): {"90": "12.0", "120": "12.9"}, each
    from its declared CUDA; "90@12.9" picks the CUDA (to compare two compilers' code)."""
    archs = {}
    for item in spec.replace(",", " ").split():
        arch, _, cuda = item.removeprefix("sm_").partition("@")
        if not cuda and arch not in cfg.sass_cuda:
            raise ConfigError(
                f"ARCHS: sm_{arch} is not declared in pyproject.toml [tool.cuda_ext_example."
                f'sass-archs]; name its CUDA as "{arch}@12.9"'
            )
        archs[arch] = cuda or cfg.sass_cuda[arch]
    if not archs:
        raise ConfigError(f"ARCHS={spec!r} names no arch; e.g. ARCHS=90")
    return archs


def project(pyproject: Path = ROOT / "pyproject.toml") -> dict:
    """pyproject.toml's [project] table: the name, version and requirements a wheel's
    METADATA must carry."""
    return tomllib.loads(pyproject.read_text())["project"]


def load(pyproject: Path = ROOT / "pyproject.toml", dev_spec: str | None = None) -> BuildConfig:
    """The declared targets; a dev build ($CEE_SASS_ARCHS, `make wheel ARCHS=90`) keeps only
    the SASS it names, without PTX, and is marked as such in the build record."""
    import os

    data = tomllib.loads(pyproject.read_text())
    tool = data["tool"]["cuda_ext_example"]
    sass_cuda = _sass_cuda(tool["sass-archs"])
    cfg = BuildConfig(
        version=data["project"]["version"],
        sass_archs=tuple(sass_cuda),
        sass_cuda=sass_cuda,
        ptx_arch=tool["ptx-arch"],
        torch_target=tool["torch-target"],
        glibc=tool["glibc"],
        requires_python=data["project"]["requires-python"],
        device_cuda=tool["device-cuda"],
        ptx_isa=tool["ptx-isa"],
        min_driver=tool["min-driver"],
        min_driver_cuda=tool["min-driver-cuda"],
    )
    dev_spec = os.environ.get("CEE_SASS_ARCHS", "") if dev_spec is None else dev_spec
    if not dev_spec.strip():
        return cfg
    archs = dev_archs(dev_spec, cfg)
    return replace(cfg, sass_archs=tuple(archs), sass_cuda=archs, ptx_arch=None, dev_build=True)
