"""The Windows counterparts of the ELF gates (elf.py), for the win_amd64 wheel's DLL: one binary
and whole, what it imports (torch's DLL, the system's and the C runtime's; no CUDA runtime),
what it exports (the hooks of csrc/exports.map), and that every torch symbol it imports is a
C shim of the LibTorch stable ABI. The gates that read no binary format, or read it through
the facts of binaries.py (device code, torch shims, CPython symbols, the build record), serve
both wheels.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

from buildtools import config
from scripts.inspect import pe_info

from . import wheel_files
from .binaries import facts_of, library_of_target
from .failure import GateFailure
from .symbols import declared_exports, known_shims

DLL = library_of_target(config.WINDOWS)
# What the DLL may import: torch's CPU library (from the user's torch), the Windows API and
# the Universal C Runtime (api-ms-win-crt-*, part of every Windows 10 and later). zig links
# the C++ runtime statically: no msvcp140/vcruntime140, no libstdc++ or libgcc DLL.
ALLOWED_DLLS = frozenset({"torch_cpu.dll", "kernel32.dll"})
UCRT_PREFIX = "api-ms-win-crt-"
# torch's own DLLs: a symbol imported from one of these must be a stable C shim.
TORCH_DLLS = frozenset(
    {"torch_cpu.dll", "torch_cuda.dll", "torch.dll", "c10.dll", "c10_cuda.dll", "torch_python.dll"}
)


# What the MinGW linker writes beside a DLL: the import library, its exports file, the
# debug database. None is for users: no one links against the DLL, and a .pdb names paths
# of the build machine.
LINKER_BY_PRODUCTS = (".lib", ".exp", ".pdb", ".a")


def gate_one_dll(wheel: Path) -> None:
    """The Windows wheel carries one binary, the DLL, found by content whatever its name,
    and none of the linker's by-products."""
    with zipfile.ZipFile(wheel) as zf:
        by_products = [n for n in zf.namelist() if n.lower().endswith(LINKER_BY_PRODUCTS)]
    if by_products:
        raise GateFailure(
            "unexpected-binary",
            f"the Windows wheel carries the linker's by-products {by_products} (an import "
            "library or debug database: nobody links against the DLL)",
            "write them outside the package: buildtools/build_ext.py passes --out-implib into "
            "the build's scratch folder and --strip-debug; `make clean`, then make wheel "
            "ARCH=win_amd64",
        )
    for name in wheel_files.binary_names(wheel):
        if name != DLL:
            raise GateFailure(
                "unexpected-binary",
                f"unexpected binary {name} in the Windows wheel (only {DLL} is built)",
                f"ship only {DLL}, which buildtools/build_ext.py builds for ARCH=win_amd64: "
                f"take {name} out of the package (`make clean`, then make wheel "
                "ARCH=win_amd64); code it carries belongs in csrc/, linked into the one DLL",
            )


def gate_dll_readable(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        if DLL not in zf.namelist():
            raise GateFailure(
                "dll-readable",
                f"the Windows wheel has no {DLL}",
                "build it with make wheel ARCH=win_amd64",
            )
        problem = pe_info.pe_problem(zf.read(DLL))
    if problem:
        raise GateFailure(
            "dll-readable",
            f"{DLL} is not a readable DLL ({problem})",
            "never upload it: rebuild the wheel (make wheel ARCH=win_amd64); a file cut short "
            "(full disk, interrupted copy or download) or not built by the linker is no release",
        )


def import_problems(imported: list[str]) -> list[str]:
    """Each imported DLL that is not torch's CPU library, the system's or the C runtime's."""
    return [
        name
        for name in imported
        if name.lower() not in ALLOWED_DLLS and not name.lower().startswith(UCRT_PREFIX)
    ]


def gate_dll_imports(wheel: Path) -> None:
    """Imports: torch_cpu.dll, KERNEL32.dll and the UCRT only (no CUDA runtime: the launcher
    loads nvcuda.dll itself at the first CUDA call); exports: the hooks only."""
    dll = facts_of(wheel)[DLL]
    unexpected = import_problems(list(dll.needed))
    exported = list(dll.exported)
    if unexpected:
        allowed = sorted(ALLOWED_DLLS) + [f"{UCRT_PREFIX}*.dll"]
        raise GateFailure(
            "dll-imports",
            f"{DLL} imports {unexpected}, which are not on the allowlist {allowed}",
            "link only torch_cpu.lib (buildtools/build_ext.py torch_link_inputs): no CUDA "
            "runtime (the launcher uses the driver API, nvcuda.dll, loaded at run time), no "
            "other torch or C++ runtime DLL (zig links libc++ statically)",
        )
    declared = declared_exports()
    if exported != declared:
        raise GateFailure(
            "dll-imports",
            f"{DLL} exports {exported[:10]}, not the hooks of csrc/exports.map {declared}",
            "mark only the hooks of csrc/launch_shape_hooks.cpp dllexport (CEE_EXPORT); "
            "without any dllexport the MinGW linker exports every symbol",
        )


def gate_stable_abi_only(wheel: Path, cfg: config.BuildConfig, torch_include: Path) -> None:
    """Every symbol the DLL imports from a torch DLL is a C shim of torch's stable shim
    headers: a C++ symbol (MSVC-mangled, `?...`) is tied to one torch build and compiler."""
    known = known_shims(torch_include)
    unstable = [
        f"{symbol} (from {library})"
        for library, symbols in facts_of(wheel)[DLL].imports_by_dll
        if library.lower() in TORCH_DLLS
        for symbol in symbols
        if symbol not in known
    ]
    if unstable:
        raise GateFailure(
            "stable-abi",
            f"{DLL} imports torch symbols outside the LibTorch stable ABI: "
            + ", ".join(unstable[:10]),
            "use only the LibTorch stable ABI (torch/csrc/stable: its C shims; no c10::, at:: "
            f"or torch:: C++ symbols) and compile with -DTORCH_TARGET_VERSION for "
            f"{cfg.torch_target} (buildtools/build_ext.py)",
        )
