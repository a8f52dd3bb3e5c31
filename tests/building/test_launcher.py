"""The launcher asks the driver only for what CUDA 12.0 (driver >= 525.60.13) has.

csrc/launcher.cpp lists every entry point with the version of its ABI (the N of
cudaTypedefs.h's PFN_name_vN) and asks cuGetProcAddress for CUDA 12.0 behaviour,
which returns, per name, the newest ABI at or below 12.0. So each listed name must
exist at 12.0 and the listed N must be exactly that newest ABI (else the pointer
would be called with the wrong signature)."""

from __future__ import annotations

import re
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAUNCHER = ROOT / "csrc" / "launcher.cpp"
HARNESS = ROOT / "csrc" / "harness.cpp"
DRIVER_API = 12000


def launcher_entry_points() -> dict[str, int]:
    text = LAUNCHER.read_text()
    block = re.search(r"#define CEE_DRIVER_ENTRY_POINTS\(X\)((?:.*\\\n)*.*)", text).group(1)
    return {name: int(v) for name, v in re.findall(r"X\((cu\w+), (\d+)\)", block)}


def harness_entry_points() -> dict[str, int]:
    # (PFN_cuMemAlloc_v3020)entry_point("cuMemAlloc")
    text = HARNESS.read_text()
    return {
        name: int(v)
        for pfn, v, name in re.findall(r"\(PFN_(cu\w+)_v(\d+)\)entry_point\(\s*\"(cu\w+)\"\)", text)
        if pfn == name
    }


def typedefs_header() -> Path | None:
    """CUDA 12.0's own cudaTypedefs.h (nvidia-cuda-runtime-cu12==12.0.107, which the build
    fetches with NVRTC 12.0 into build/), else the 12.9 build requirement's."""
    fetched = ROOT / "build" / "nvrtc-12.0" / "root" / "nvidia" / "cuda_runtime" / "include"
    paths = sysconfig.get_paths()
    for base in (fetched, *(Path(p) / "nvidia" / "cuda_runtime" / "include" for p in
                            (paths["purelib"], paths["platlib"]))):  # fmt: skip
        if (base / "cudaTypedefs.h").exists():
            return base / "cudaTypedefs.h"
    return None


@pytest.fixture(scope="module")
def abi_versions() -> dict[str, list[int]]:
    """{'cuLaunchKernel': [4000, 7000], ...} from cudaTypedefs.h."""
    header = typedefs_header()
    if header is None:
        pytest.skip("cudaTypedefs.h (nvidia-cuda-runtime-cu12) not installed")
    versions: dict[str, list[int]] = {}
    typedef = r"typedef \w+ ?\(CUDAAPI \*PFN_(cu\w+?)_v(\d+)\)"
    for name, v in re.findall(typedef, header.read_text()):
        versions.setdefault(name, []).append(int(v))
    return versions


def test_lists_are_complete():
    entry = launcher_entry_points()
    assert {"cuInit", "cuLibraryLoadData", "cuLibraryGetKernel", "cuLaunchKernel"} <= set(entry)
    # The kernels are resolved per device before the first launch (csrc/launcher.cpp says why).
    assert {"cuKernelGetFunction", "cuThreadExchangeStreamCaptureMode"} <= set(entry)
    harness = harness_entry_points()
    assert {"cuMemAlloc", "cuMemcpyDtoH"} <= set(harness)
    assert len(harness) == len(re.findall(r"entry_point\(\s*\"", HARNESS.read_text()))
    # Every driver call in the launcher goes through the list.
    called = set(re.findall(r"\.(cu[A-Z]\w+)\(", LAUNCHER.read_text()))
    assert called <= set(entry), called - set(entry)


@pytest.mark.parametrize("source", ["launcher", "harness"])
def test_entry_points_exist_in_cuda_12_0(abi_versions, source):
    entry = launcher_entry_points() if source == "launcher" else harness_entry_points()
    for name, declared in entry.items():
        at_12_0 = [v for v in abi_versions.get(name, []) if v <= DRIVER_API]
        assert at_12_0, f"{name} is not in the CUDA 12.0 driver API"
        assert declared == max(at_12_0), (
            f"{name}: cuGetProcAddress(..., {DRIVER_API}) returns the v{max(at_12_0)} ABI, "
            f"the source declares v{declared}"
        )
