"""Every release gate, one row each, in the order they run: what it refuses, the usual fix
(its failure names the exact one), the platforms it runs for and its check. The order is
the point: a wheel is refused for its first fault, with that fault's fix, before a later
check trips over it and names the wrong one."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from buildtools import config

from . import build_record, device_code, elf, pe, symbols, tools, wheel_files, wheel_metadata
from .binaries import LIBRARY, library_of_target
from .tags import LINUX_CPUS, gate_py3_none_tag

LINUX = frozenset(LINUX_CPUS)
WINDOWS = frozenset({config.WINDOWS})
EVERY = LINUX | WINDOWS


@dataclass(frozen=True)
class Gate:
    name: str  # as `gate ok:` prints it; {cfg.<field>} is filled from pyproject.toml
    refuses: str
    fix: str
    platforms: frozenset[str]
    check: Callable[..., None]  # check(wheel, **needs): raises GateFailure, or returns
    needs: tuple[str, ...] = ()  # what the check takes after the wheel: cfg, torch_include
    skipped: str | None = None  # why it cannot run under this Python, or None

    def title(self, cfg: config.BuildConfig) -> str:
        return self.name.format(cfg=cfg)

    def bound(self, cfg: config.BuildConfig, torch_include: Path) -> Callable[[Path], None]:
        """The check of the wheel alone."""
        inputs = {"cfg": cfg, "torch_include": torch_include}
        return functools.partial(self.check, **{need: inputs[need] for need in self.needs})


CFG = ("cfg",)
CFG_AND_TORCH = ("cfg", "torch_include")

GATES = (
    # The zip first: every gate below reads the wheel's files out of it.
    Gate(
        "zip entries: no links, duplicates or paths outside",
        "links, duplicate names and paths outside site-packages among the zip entries",
        "rebuild the wheel (make repair); never add entries with `zip`",
        EVERY,
        wheel_files.gate_zip_entries,
    ),
    Gate(
        "RECORD matches the files",
        "a file RECORD does not vouch for (hash, size, missing on either side)",
        "rebuild and repair; change a built wheel only by `wheel unpack` and `wheel pack`",
        EVERY,
        wheel_files.gate_record_matches_files,
    ),
    Gate(
        "nothing grafted",
        "a library auditwheel grafted into <package>.libs/ (torch's or CUDA's)",
        "add it to REPAIR_EXCLUDES (scripts/release/pipeline.py) and repair again",
        EVERY,
        wheel_files.gate_nothing_grafted,
    ),
    # Which binaries, and each one whole, before any gate or tool parses one (a tool
    # crashes on a truncated ELF, and its crash would hide the fault).
    Gate(
        f"one ELF file: {LIBRARY}",
        "any ELF file but the library, and the library under another name",
        "ship only the library buildtools/build_ext.py builds, under its name",
        LINUX,
        elf.gate_one_library,
        CFG_AND_TORCH,
    ),
    Gate(
        f"one binary: {library_of_target(config.WINDOWS)}",
        "any other binary, and the linker's import library or debug database",
        "`make clean`, then make wheel ARCH=win_amd64",
        WINDOWS,
        pe.gate_one_dll,
    ),
    Gate(
        "ELF files whole and readable",
        "a missing, truncated or unparsable ELF file, and a .so that is no ELF file",
        "rebuild and repair the wheel (make repair); never upload a file cut short",
        LINUX,
        elf.gate_elf_readable,
    ),
    Gate(
        "DLLs whole and readable",
        "a missing, truncated or unparsable DLL",
        "rebuild the wheel (make wheel ARCH=win_amd64)",
        WINDOWS,
        pe.gate_dll_readable,
    ),
    Gate(
        "RPATH/RUNPATH only inside the wheel",
        "a search path that is not an $ORIGIN-relative folder of the wheel",
        "no -Wl,-rpath in buildtools/build_ext.py (`patchelf --remove-rpath`)",
        LINUX,
        elf.gate_search_paths,
    ),
    Gate(
        "no executable stack",
        "an executable or missing PT_GNU_STACK",
        "a .note.GNU-stack section in every assembly file, or -Wl,-z,noexecstack",
        LINUX,
        elf.gate_no_executable_stack,
    ),
    # What the wheel says of itself: its files, WHEEL, METADATA, the record's kind, the tags.
    Gate(
        "no bytecode",
        "compiled bytecode (.pyc, __pycache__/)",
        "build from clean staging folders: `make clean`, then `make wheel`",
        EVERY,
        wheel_files.gate_no_bytecode,
    ),
    Gate(
        "every Python file compiles",
        "a Python file with a syntax error (pip only warns)",
        "fix the source in src/ and rebuild (make repair)",
        EVERY,
        wheel_files.gate_python_compiles,
    ),
    Gate(
        "no build paths",
        "a path of the build machine inside any file",
        "map it away at build time (-ffile-prefix-map) or keep the file out",
        EVERY,
        wheel_files.gate_no_build_paths,
    ),
    Gate(
        "license in the dist-info",
        "a License-File missing from .dist-info/licenses/",
        'license-files = ["LICENSE"] in pyproject.toml [project]',
        EVERY,
        wheel_files.gate_license_files,
    ),
    Gate(
        "WHEEL agrees with the filename and the binary",
        "Root-Is-Purelib true, tags other than the filename's, a binary for another CPU",
        "rebuild for the CPU (make wheel ARCH=...) and repair; never rename a wheel",
        EVERY,
        wheel_metadata.gate_wheel_file,
    ),
    Gate(
        "METADATA agrees with the filename, build record and pyproject.toml",
        "another name or version, a torch requirement or Requires-Python not pyproject's",
        "change pyproject.toml [project] and rebuild (make repair)",
        EVERY,
        wheel_metadata.gate_metadata,
        CFG,
    ),
    Gate(
        "release build (not a dev build)",
        "a dev build (make wheel ARCHS=...: a few SASS archs, no PTX)",
        "rebuild without ARCHS: make wheel (or make release)",
        EVERY,
        build_record.gate_release_build,
    ),
    Gate(
        f"{config.PYTHON_TAGS} tag",
        "a tag tied to one CPython ABI, and a platform tag other than the glibc floor's",
        "make wheel (buildtools/wheel_tags.py tags py3-none), then make repair",
        EVERY,
        gate_py3_none_tag,
        CFG,
    ),
    Gate(
        "no CPython symbol",
        "any CPython symbol (Py*, _Py*), imported or defined: the wheel is py3-none",
        "keep csrc/ free of Python.h; Python reaches the library through ctypes",
        EVERY,
        symbols.gate_no_cpython_symbols,
    ),
    # The tools read only whole files: every gate above has run (a crash is no verdict).
    Gate(
        "twine check --strict",
        "metadata PyPI would refuse (a README that does not render)",
        "fix the package metadata in pyproject.toml",
        EVERY,
        tools.gate_twine_check,
    ),
    Gate(
        "check-wheel-contents",
        "stray or duplicate files, by that tool's codes",
        "remove them from the package",
        EVERY,
        tools.gate_check_wheel_contents,
    ),
    Gate(
        "ELF audit",
        "a library off the allowlist (CUDA runtime, libstdc++), glibc above the floor, "
        "exports beyond csrc/exports.map",
        "link with zig against libtorch_cpu.so only, to the glibc floor",
        LINUX,
        elf.gate_elf,
        CFG,
    ),
    Gate(
        "torch-abi-audit",
        "unstable libtorch (C++) symbols and a minimum torch above the target, as "
        "Quansight's torch-abi-audit reads them",
        "the LibTorch stable ABI only, with -DTORCH_TARGET_VERSION",
        LINUX,
        tools.gate_torch_abi_audit,
        CFG,
        skipped=tools.TORCH_ABI_AUDIT_SKIPPED,
    ),
    Gate(
        "DLL imports and exports",
        "an import beyond torch_cpu.dll, KERNEL32.dll and the UCRT; exports beyond the hooks",
        "link torch_cpu.lib only; dllexport the hooks only",
        WINDOWS,
        pe.gate_dll_imports,
    ),
    Gate(
        "only the LibTorch stable ABI",
        "a torch symbol that is no C shim of torch's stable headers",
        "the LibTorch stable ABI only, with -DTORCH_TARGET_VERSION",
        WINDOWS,
        pe.gate_stable_abi_only,
        CFG_AND_TORCH,
    ),
    # The device code and torch's shims, each against pyproject.toml's promise.
    Gate(
        "device code",
        "a fatbin missing or unexpected by the build record's device_libraries, and one "
        "without every SASS arch and the PTX",
        "make wheel with pyproject.toml's arch list; never strip .nv_fatbin",
        EVERY,
        device_code.gate_device_code,
        CFG,
    ),
    Gate(
        "device code runs on driver >= {cfg.min_driver}",
        "a cubin not from the CUDA declared for its arch, and PTX ISA above the floor's",
        "compile each arch with the NVRTC pyproject.toml names (NVRTC 12.0)",
        EVERY,
        device_code.gate_cuda12_device_code,
        CFG,
    ),
    Gate(
        "fatbin uncompressed",
        "a compressed fatbin entry (drivers before 550.54.14 cannot load one)",
        "pack the fatbins uncompressed (nvFatbin -compress=false)",
        EVERY,
        device_code.gate_uncompressed_fatbin,
        CFG,
    ),
    Gate(
        "torch shims <= {cfg.torch_target}",
        "a shim newer than torch-target, or none of torch's stable shim headers declare",
        "compile with -DTORCH_TARGET_VERSION; look a newer shim up at run time",
        EVERY,
        symbols.gate_torch_shims,
        CFG_AND_TORCH,
    ),
    # Last: the record against a binary every gate above has found sound.
    Gate(
        "build record matches the binary and pyproject.toml",
        "a record that disagrees with the binary or with pyproject.toml and ops/*/ops.toml",
        "never edit the record: rebuild the wheel (make repair)",
        EVERY,
        build_record.gate_build_record,
        CFG_AND_TORCH,
    ),
)


def gates_for(target: str) -> list[Gate]:
    """The gates of a wheel platform ('x86_64', 'aarch64', 'win_amd64'), in order."""
    return [gate for gate in GATES if target in gate.platforms]
