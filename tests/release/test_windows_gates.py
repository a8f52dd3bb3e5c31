"""The Windows wheel (py3-none-win_amd64, its DLL cross-linked by zig against torch's own
import library) against the release gates: the good one passes every gate of its list, and
each fault a Windows DLL can have is refused by the twin of the ELF gate for it, with that
fault's reason and fix: a CUDA runtime import, a torch symbol outside the stable ABI, the
fatbins missing, one library's fatbin missing or short of a target, another binary or the
linker's by-products in the package."""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from buildtools import config, declarations
from buildtools.toolchain import torch_paths
from scripts.inspect import binary_info, pe_info
from scripts.release import gates as release_gates
from scripts.release.gates import pe
from tests.wheel_surgery import nv_fatbin_without, repack, run_gates_until_refused
from tests.windows_dll import compile_dll

pytestmark = pytest.mark.release

DLL = pe.DLL


def replace_dll(wheel, tmp_path, dll):
    """A copy of the Windows wheel with its DLL replaced (RECORD rewritten)."""
    return repack(wheel, tmp_path, add={DLL: dll.read_bytes()})


def test_the_windows_wheel_passes_every_gate_of_its_list(windows_wheel):
    assert windows_wheel.name == "cuda_ext_example-0.1.0-py3-none-win_amd64.whl"
    passed = []
    release_gates.run_gates(windows_wheel, log=lambda msg, **_: passed.append(msg))
    gates = release_gates.all_gates(config.load(dev_spec=""), torch_paths()[0], "win_amd64")
    assert [m for m in passed if "gate ok" in m] == [f"  gate ok: {n}" for n, _ in gates]
    names = [n for n, _ in gates]
    assert "DLL imports and exports" in names and "only the LibTorch stable ABI" in names
    assert not [n for n in names if "ELF" in n or "RPATH" in n]  # the twins instead


def test_the_dll_imports_torch_the_system_and_the_c_runtime_only(windows_wheel):
    with binary_info.extension_in(windows_wheel) as dll:
        imports = pe_info.imports(dll)
        exports = pe_info.exported_symbols(dll)
        fatbin = binary_info.section_data(dll, ".nv_fatb")
        data = dll.read_bytes()
    others = [d for d in imports if d not in ("torch_cpu.dll", "KERNEL32.dll")]
    assert others and all(d.startswith("api-ms-win-crt-") for d in others), others
    assert all(s.startswith(("aoti_torch_", "torch_")) for s in imports["torch_cpu.dll"])
    assert "aoti_torch_check" in imports["torch_cpu.dll"]
    # The driver comes from nvcuda.dll at the first CUDA call, torch's stream from
    # torch_cuda.dll at call time: looked up by name, never imported.
    assert b"nvcuda.dll" in data and b"torch_cuda.dll" in data
    assert exports == release_gates.declared_exports()
    assert fatbin is not None and fatbin[:4] == b"\x50\xed\x55\xba"  # the fatbin's magic


def test_the_windows_wheel_has_the_linux_wheels_device_code(windows_wheel, good_wheel):
    with binary_info.extension_in(windows_wheel) as dll:
        ours = binary_info.device_code(dll), binary_info.cubin_toolkits(dll)
    with binary_info.extension_in(good_wheel) as so:
        linux = binary_info.device_code(so), binary_info.cubin_toolkits(so)
    assert ours == linux


def test_refuses_a_cuda_runtime_import(windows_wheel, tmp_path):
    dll = compile_dll(
        tmp_path,
        """
        __declspec(dllimport) int cudaMalloc(void **, unsigned long long);
        __declspec(dllexport) int FIRST_HOOK(void) { void *p; return cudaMalloc(&p, 1); }
        """,
        {"cudart64_12.dll": ["cudaMalloc"]},
    )
    failure = run_gates_until_refused(replace_dll(windows_wheel, tmp_path, dll))
    assert failure.gate == "dll-imports"
    assert failure.reason.startswith(f"{DLL} imports ['cudart64_12.dll'], which are not on")
    assert "no CUDA runtime" in failure.fix and "nvcuda.dll" in failure.fix


def test_refuses_a_torch_symbol_outside_the_stable_abi(windows_wheel, tmp_path):
    # c10::warn as MSVC mangles it, from torch_cpu.dll (a DLL it may import from): tied to
    # one torch build and to MSVC's C++ ABI.
    symbol = "?warn@c10@@YAXXZ"
    dll = compile_dll(
        tmp_path,
        f"""
        extern void cxx_warn(void) __asm__("__imp_{symbol}");
        __declspec(dllexport) int FIRST_HOOK(void) {{ return (int)(long long)&cxx_warn; }}
        """,
        {"torch_cpu.dll": [symbol]},
    )
    assert symbol in pe_info.imports(dll)["torch_cpu.dll"]
    failure = run_gates_until_refused(replace_dll(windows_wheel, tmp_path, dll))
    assert failure.gate == "stable-abi"
    assert f"torch symbols outside the LibTorch stable ABI: {symbol} (from torch_cpu.dll)" \
        in failure.reason  # fmt: skip
    assert "use only the LibTorch stable ABI" in failure.fix


def test_refuses_a_dll_without_its_fatbin(windows_wheel, tmp_path):
    objcopy = shutil.which("objcopy")
    if objcopy is None:
        pytest.skip("needs objcopy (binutils, with its PE support)")
    with binary_info.extension_in(windows_wheel) as dll:
        shutil.copy(dll, tmp_path / "real.dll")
    stripped = tmp_path / "stripped.dll"
    subprocess.run([objcopy, "--remove-section", ".nv_fatb", tmp_path / "real.dll", stripped],
                   check=True)  # fmt: skip
    failure = run_gates_until_refused(replace_dll(windows_wheel, tmp_path, stripped))
    assert failure.gate == "device-code"
    assert failure.reason.startswith(f"{DLL} carries SASS [] and PTX [] (no .nv_fatb section)")
    assert "device_code.S embeds the fatbins in .nv_fatb" in failure.fix


def windows_dll_copy(windows_wheel, tmp_path):
    with binary_info.extension_in(windows_wheel) as dll:
        return Path(shutil.copy(dll, tmp_path / "real.dll"))


def test_the_dll_holds_one_fatbin_per_declared_library(windows_wheel, good_wheel):
    # The launcher loads each op's fatbin for a dtype at that first call: the DLL embeds
    # every library the Linux library does, in the same order, under the same names.
    with binary_info.extension_in(windows_wheel) as dll:
        ours = [f.name for f in binary_info.embedded_fatbins(dll)]
    with binary_info.extension_in(good_wheel) as so:
        linux = [f.name for f in binary_info.embedded_fatbins(so)]
    assert ours == linux == declarations.load().libraries


def test_refuses_a_dll_without_a_librarys_fatbin(windows_wheel, tmp_path):
    dll = nv_fatbin_without(windows_dll_copy(windows_wheel, tmp_path), "my_square_bfloat16")
    left = [n for n in declarations.load().libraries if n != "my_square_bfloat16"]
    assert [f.name for f in binary_info.embedded_fatbins(dll)] == left
    failure = run_gates_until_refused(replace_dll(windows_wheel, tmp_path, dll))
    assert failure.gate == "device-code"
    assert f"{DLL}'s .nv_fatb holds the fatbins {left}" in failure.reason
    assert "no fatbin for ['my_square_bfloat16']" in failure.reason


def test_refuses_a_dll_whose_library_lacks_a_target(windows_wheel, tmp_path):
    dll = nv_fatbin_without(
        windows_dll_copy(windows_wheel, tmp_path), "my_fast_add_float32", "sm_90"
    )
    failure = run_gates_until_refused(replace_dll(windows_wheel, tmp_path, dll))
    assert failure.gate == "device-code"
    assert f"{DLL}: my_fast_add_float32's fatbin carries SASS" in failure.reason
    assert "(missing SASS: ['sm_90'])" in failure.reason
    assert "my_fast_add_float16's" not in failure.reason


@pytest.mark.parametrize(
    ("name", "gate", "said"),
    [
        ("cuda_ext_example/cuda_ext_example.lib", "unexpected-binary", "linker's by-products"),
        ("cuda_ext_example/helper.dll", "unexpected-binary", "unexpected binary"),
    ],
)
def test_refuses_more_than_the_dll(windows_wheel, tmp_path, name, gate, said):
    with binary_info.extension_in(windows_wheel) as dll:
        data = dll.read_bytes()
    failure = run_gates_until_refused(repack(windows_wheel, tmp_path, add={name: data}))
    assert failure.gate == gate
    assert said in failure.reason and name in failure.reason


def test_refuses_a_truncated_dll(windows_wheel, tmp_path):
    with zipfile.ZipFile(windows_wheel) as zf:
        data = zf.read(DLL)
    failure = run_gates_until_refused(repack(windows_wheel, tmp_path, add={DLL: data[:200_000]}))
    assert failure.gate == "dll-readable"
    assert failure.reason.startswith(f"{DLL} is not a readable DLL (truncated: section ")
