"""The built, repaired wheel itself: every release gate on it (the gates say what a
wheel must be; tests/release/test_gates.py shows each refuses its fault), then what no gate says:
tags, metadata, symbols, size, the launcher's driver entry points."""

from __future__ import annotations

import re
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

from buildtools import config
from buildtools.toolchain import torch_paths
from cuda_ext_example import BUILD_INFO
from scripts.inspect import binary_info
from scripts.release import gates

ROOT = Path(__file__).resolve().parents[2]
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


# The gates that need only the wheel, torch and this repository (the others run tools of
# requirements/dev.lock: twine, check-wheel-contents, torch-abi-audit; the release runs
# them, and tests/release/test_gates.py).
TOOL_GATES = ("twine", "check-wheel-contents", "torch-abi-audit")
GATES = dict(gates.all_gates(config.load(dev_spec=""), torch_paths()[0]))


@pytest.mark.parametrize("name", [n for n in GATES if not n.startswith(TOOL_GATES)])
def test_the_wheel_passes_the_release_gate(wheel, name):
    GATES[name](wheel)  # raises GateFailure with the fault and its fix


def test_one_py3_none_manylinux2014_wheel(wheel):
    tags = [
        line.split(": ", 1)[1]
        for line in _dist_info(wheel, "WHEEL").splitlines()
        if line.startswith("Tag:")
    ]
    assert sorted(tags) == ["py3-none-manylinux2014_x86_64", "py3-none-manylinux_2_17_x86_64"]
    assert wheel.name.endswith("-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl")


def test_metadata_requires_torch_and_python(wheel):
    meta = Parser().parsestr(_dist_info(wheel, "METADATA"))
    requires = meta.get_all("Requires-Dist")
    assert requires == [f"torch>={BUILD_INFO['torch_target']}"]  # and no extras
    assert meta.get_all("Provides-Extra") is None
    assert meta["Requires-Python"] == ">=3.10"
    assert meta["Name"] == "cuda_ext_example"


def test_the_package_is_what_a_user_of_the_ops_needs(wheel):
    # The ops (one Python face for every op: ops.py), their loader, doctor and the smoke test;
    # inspect's readers and the JIT loader are repository tools (scripts/inspect/, scripts/jit/).
    # The ops' reference functions (ops/<rule>/reference.py) ride along for doctor.
    with zipfile.ZipFile(wheel) as zf:
        modules = {n.split("/", 1)[1] for n in zf.namelist() if n.endswith(".py")}
    references = {f"op_references/{p.parent.name}.py" for p in ROOT.glob("ops/*/reference.py")}
    assert references and modules == {
        "__init__.py", "__main__.py", "_build_info.py", "_launch_shapes.py", "_loader.py",
        "doctor.py", "fast_path.py", "op_checks.py", "ops.py", "smoke_test.py",
        "torch_errors.py", "op_references/__init__.py", *references,
    }  # fmt: skip


def test_the_one_binary_is_the_library_under_a_name_no_importer_takes(wheel):
    import importlib.machinery

    with zipfile.ZipFile(wheel) as zf:
        binaries = [n for n in zf.namelist() if zf.read(n)[:4] == b"\x7fELF"]
    assert binaries == [f"cuda_ext_example/{BUILD_INFO['library']}"]
    name = BUILD_INFO["library"]
    assert not name.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)), name
    assert not gates.EXTENSION_MODULE_NAME.fullmatch(name)


def test_exports_only_the_hooks(extension):
    assert binary_info.exported_symbols(extension) == [
        "cee_device_library", "cee_device_library_count", "cee_force_launch_shape",
        "cee_launch_shape", "cee_vector_shape", "cee_vector_shape_count",
    ]  # fmt: skip


def test_imports_only_stable_torch_shims_and_no_python(extension):
    undefined = binary_info.undefined_symbols(extension)
    assert not [s for s in undefined if s.startswith("_Z")], "mangled C++ symbols imported"
    assert not [s for s in undefined if "Py" in s], "CPython symbols imported"
    assert b"Python.h" not in extension.read_bytes()
    assert "aoti_torch_check" in undefined


def test_wheel_size(wheel, extension):
    # Budgets, from what the wheel measured (2026-11-27): about 700 kB of host code beside
    # the fatbin, and little else. Well past them means something unintended rode along
    # (debug info, a grafted library, a second copy of the device code), not a new op:
    # the device code grows with the ops and is the fatbin's own business.
    from elftools.elf.elffile import ELFFile

    with extension.open("rb") as f:
        sections = {s.name: s["sh_size"] for s in ELFFile(f).iter_sections()}
    host = extension.stat().st_size - sections[".nv_fatbin"]
    with zipfile.ZipFile(wheel) as zf:
        # The library is libcuda_ext_example.so.1 (the build record's "library"), no *.so.
        library = f"cuda_ext_example/{BUILD_INFO['library']}"
        others = sum(i.compress_size for i in zf.infolist() if i.filename != library)
    print(
        f"\n{wheel.name}: {wheel.stat().st_size / 1e6:.1f} MB; host code {host / 1e3:.0f} kB,"
        f" fatbin {sections['.nv_fatbin'] / 1e6:.1f} MB, the rest {others / 1e3:.0f} kB"
    )
    assert host < 1_500_000, host
    assert others < 200_000, others


def test_no_cuda_runtime_inside(extension):
    data = extension.read_bytes()
    assert b"cudart" not in data
    runtime_names = set(re.findall(rb"\bcuda[A-Z]\w+", data))  # cudaMalloc, cudaLaunchKernel, ...
    assert not runtime_names, runtime_names
    imported = binary_info.undefined_symbols(extension)
    assert not [s for s in imported if s.startswith("cu")], imported


def test_driver_entry_points_are_the_launchers(extension):
    # The names the .so hands to the driver: exactly the launcher's list (checked
    # against CUDA 12.0 in test_launcher.py) and the two it dlsyms first.
    names = {n.decode() for n in re.findall(rb"\bcu[A-Z]\w+", extension.read_bytes())}
    from test_launcher import launcher_entry_points

    assert names == set(launcher_entry_points()) | {"cuDriverGetVersion", "cuGetProcAddress_v2"}
