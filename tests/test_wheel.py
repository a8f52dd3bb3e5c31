"""The built, repaired wheel itself: tags, metadata, ELF facts and device code."""

from __future__ import annotations

import re
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

from cuda_ext_example import BUILD_INFO, binary_info

# What the extension may link against: the release gate's allowlist (torch's CPU
# library and the glibc parts manylinux2014 guarantees; no libstdc++, no CUDA runtime).
from scripts.release.gates import ALLOWED_NEEDED, LOADERS

ROOT = Path(__file__).resolve().parent.parent
WHEELHOUSE = ROOT / "wheelhouse"

pytestmark = pytest.mark.wheel


@pytest.fixture(scope="module")
def wheel() -> Path:
    wheels = sorted(WHEELHOUSE.glob("*.whl"))
    assert len(wheels) == 1, f"expected exactly one repaired wheel in {WHEELHOUSE}, found {wheels}"
    return wheels[0]


@pytest.fixture(scope="module")
def extension(wheel):
    with binary_info.extension_in(wheel) as so:
        yield so


def _dist_info(wheel: Path, name: str) -> str:
    with zipfile.ZipFile(wheel) as zf:
        (path,) = [n for n in zf.namelist() if n.endswith(f".dist-info/{name}")]
        return zf.read(path).decode()


def test_one_abi3_manylinux2014_wheel(wheel):
    tags = [
        line.split(": ", 1)[1]
        for line in _dist_info(wheel, "WHEEL").splitlines()
        if line.startswith("Tag:")
    ]
    assert "cp310-abi3-manylinux2014_x86_64" in tags
    assert all(t.startswith("cp310-abi3-") for t in tags), tags
    assert "cp310-abi3-manylinux2014_x86_64" in wheel.name.replace(".manylinux_2_17_x86_64", "")


def test_metadata_requires_torch_and_python(wheel):
    meta = Parser().parsestr(_dist_info(wheel, "METADATA"))
    requires = meta.get_all("Requires-Dist")
    assert [r for r in requires if "extra ==" not in r] == [f"torch>={BUILD_INFO['torch_target']}"]
    assert any(r.startswith("pyelftools") and 'extra == "tools"' in r for r in requires)
    assert meta["Requires-Python"] == ">=3.10"
    assert meta["Name"] == "cuda_ext_example"


def test_glibc_floor_and_no_libstdcxx(extension):
    newest = binary_info.newest_version(extension, "GLIBC_")
    assert newest is not None
    assert binary_info.version_key(newest) <= (2, 17), newest
    assert binary_info.newest_version(extension, "GLIBCXX_") is None
    assert binary_info.newest_version(extension, "CXXABI_") is None


def test_needed_libraries_allowlist(extension):
    needed = binary_info.needed_libraries(extension)
    assert "libtorch_cpu.so" in needed
    allowed = ALLOWED_NEEDED | {LOADERS["x86_64"]}
    assert set(needed) <= allowed, set(needed) - allowed


def test_nothing_grafted(wheel):
    with zipfile.ZipFile(wheel) as zf:
        shared = [n for n in zf.namelist() if ".so" in Path(n).name]
    assert shared == ["cuda_ext_example/_C.abi3.so"]


def test_exports_only_module_init(extension):
    assert binary_info.exported_symbols(extension) == ["PyInit__C"]


def test_imports_only_stable_torch_shims_and_limited_python(extension):
    undefined = binary_info.undefined_symbols(extension)
    assert not [s for s in undefined if s.startswith("_Z")], "mangled C++ symbols imported"
    python = [s for s in undefined if s.startswith("Py")]
    assert python == ["PyModule_Create2"]
    assert "aoti_torch_check" in undefined


def test_device_code_matches_build_record(extension):
    code = binary_info.device_code(extension)
    assert code["sass"] == BUILD_INFO["sass_archs"]
    assert code["ptx"] == [BUILD_INFO["ptx_arch"].replace("compute_", "sm_")]
    # every arch torch's CUDA 12 builds run on (cu126 and cu128), and sm_89, sm_103, sm_121
    for arch in ("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90"):
        assert arch in code["sass"]
    for arch in ("sm_100", "sm_103", "sm_120", "sm_121"):
        assert arch in code["sass"]


@pytest.mark.skipif(sys.version_info < (3, 11), reason="tomllib")
def test_build_record_matches_pyproject(wheel):
    import json

    import tomllib

    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["cuda_ext_example"]
    with zipfile.ZipFile(wheel) as zf:
        record = json.loads(zf.read("cuda_ext_example/_build_info.json"))
    declared = {f"sm_{a}": f"NVRTC {cuda}" for cuda, archs in tool["sass-archs"].items()
                for a in archs}  # fmt: skip
    declared[f"compute_{tool['ptx-arch']}"] = f"NVRTC {tool['device-cuda']}"
    assert record["device_compilers"] == declared
    assert sorted(record["sass_archs"]) == sorted(t for t in declared if t.startswith("sm_"))
    assert record["ptx_arch"] == f"compute_{tool['ptx-arch']}"
    assert record["torch_target"] == tool["torch-target"]
    assert record["glibc_floor"] == tool["glibc"]
    assert record["device_compiler"] == "NVRTC 12.0 + 12.9"
    assert record["dev_build"] is False
    assert record["min_driver"] == tool["min-driver"] == "525.60.13"
    assert record == BUILD_INFO  # the installed package is this wheel


def test_wheel_size(wheel, extension):
    # A budget, from what the wheel measured (2026-11-23): about 270 kB of host code, and
    # about 6 kB (compressed, 12 archs of SASS + PTX) per kernel of the launcher's table.
    # Well past it means something unintended rode along (debug info, a grafted library,
    # a second fatbin), not a new op.
    kernels = len(re.findall(rb"cee::elementwise_\w+<", extension.read_bytes()))
    size = wheel.stat().st_size
    print(f"\n{wheel.name}: {size / 1000:.0f} kB, {kernels} kernels")
    assert kernels >= 1
    assert size < 300_000 + 8_000 * kernels, size


def test_no_cuda_runtime_inside(extension):
    data = extension.read_bytes()
    assert b"cudart" not in data
    runtime_names = set(re.findall(rb"\bcuda[A-Z]\w+", data))  # cudaMalloc, cudaLaunchKernel, ...
    assert not runtime_names, runtime_names
    imported = binary_info.undefined_symbols(extension)
    assert not [s for s in imported if s.startswith("cu")], imported


def test_device_code_from_cuda_12(extension):
    # Each cubin from the CUDA the record names for it: sm_50..sm_90 from 12.0.
    toolkits = binary_info.cubin_toolkits(extension)
    assert sorted(toolkits) == sorted(BUILD_INFO["sass_archs"])
    for arch, version in toolkits.items():
        assert BUILD_INFO["device_compilers"][arch] == "NVRTC {}.{}".format(*version)
    assert toolkits["sm_70"] == toolkits["sm_89"] == toolkits["sm_90"] == (12, 0)
    assert toolkits["sm_100"] == toolkits["sm_120"] == (12, 9)
    assert binary_info.ptx_isa_versions(extension) == {"sm_120": (8, 8)}


def test_fatbin_is_uncompressed(extension):
    # Compressed fatbins need driver >= 550; the floor is 525. Uncompressed, every
    # cubin's ELF header and the PTX text are there to see.
    fatbin = binary_info.section_data(extension, ".nv_fatbin")
    assert fatbin is not None, "no .nv_fatbin section"
    assert fatbin.count(b"\x7fELF") == len(BUILD_INFO["sass_archs"])
    assert fatbin.count(b".version 8.8\n.target sm_120") == 1
    assert binary_info.compressed_entries(extension) == []


def test_driver_entry_points_are_the_launchers(extension):
    # The names the .so hands to the driver: exactly the launcher's list (checked
    # against CUDA 12.0 in test_launcher.py) and the two it dlsyms first.
    names = {n.decode() for n in re.findall(rb"\bcu[A-Z]\w+", extension.read_bytes())}
    from test_launcher import launcher_entry_points

    assert names == set(launcher_entry_points()) | {"cuDriverGetVersion", "cuGetProcAddress_v2"}
