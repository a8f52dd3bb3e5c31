"""Blocking checks on a repaired wheel before it may be uploaded.

Each gate returns nothing when the wheel passes and raises GateFailure with the
reason and the fix when it does not. Run them all with `run_gates(wheel)`, or
from the command line: python -m scripts.release gates WHEEL
"""

from __future__ import annotations

import importlib.util
import io
import posixpath
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from buildtools import config, declarations
from buildtools.build_ext import declared_record
from buildtools.toolchain import torch_paths
from scripts.cli_args import wheel_problem
from scripts.inspect import binary_info, shim_versions

from . import wheel_files, wheel_metadata
from .gate_failure import GateFailure
from .wheel_files import BUILD_RECORD, read_build_record

# Everything the library may link against: torch's CPU library (from the
# user's torch) and the glibc parts manylinux2014 guarantees. Neither the CUDA
# runtime nor libcuda: the launcher opens libcuda.so.1 itself at the first CUDA call.
ALLOWED_NEEDED = frozenset(
    {
        "libtorch_cpu.so",
        "libc.so.6",
        "libm.so.6",
        "libdl.so.2",
        "libpthread.so.0",
        "librt.so.1",
    }
)
LOADERS = {"x86_64": "ld-linux-x86-64.so.2", "aarch64": "ld-linux-aarch64.so.1"}
# The one binary of the wheel: a plain library that torch loads, not a CPython module
# (library_of: the Windows wheel's DLL).
LIBRARY = f"cuda_ext_example/{config.LIBRARY}"
# The wheel platforms, as their tags end: the Linux CPUs (LOADERS) and Windows.
TARGETS = (*LOADERS, config.WINDOWS)
# What it exports: the hooks of the linker's version script, nothing else.
EXPORTS_MAP = config.ROOT / "csrc" / "exports.map"
# Names CPython's importer takes for an extension module: _C.so, _C.abi3.so,
# _C.cpython-314t-x86_64-linux-gnu.so (any <identifier>.so on Linux), _C.pyd.
EXTENSION_MODULE_NAME = re.compile(r"[A-Za-z_]\w*(\.[\w-]+)?\.(so|pyd)")
# CPython's own symbols: its C API and its internals.
CPYTHON_SYMBOL = re.compile(r"_?Py")


def venv_tool(name: str) -> str:
    """A console script of the running venv (the release tools are pinned there)."""
    candidate = Path(sys.executable).parent / name
    return str(candidate) if candidate.exists() else name


def _run_tool(gate: str, cmd: list[str], fix: str) -> None:
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        output = (result.stdout + result.stderr).strip()
        if "Traceback (most recent call last)" in output:
            # A crash is no verdict on the wheel: its fix would be the wrong one.
            raise GateFailure(
                gate,
                f"`{Path(cmd[0]).name}` crashed reading the wheel (no verdict):\n{output[-2000:]}",
                "find the file it could not read (the gates before it check that every ELF is "
                "whole); if the wheel is sound, report the crash to the tool and pin another "
                "version in requirements/dev.in",
            )
        raise GateFailure(gate, f"`{' '.join(cmd[:2])} ...` failed:\n{output}", fix)


def gate_twine_check(wheel: Path) -> None:
    _run_tool(
        "twine-check",
        [venv_tool("twine"), "check", "--strict", str(wheel)],
        "fix the package metadata in pyproject.toml (README must render)",
    )


def gate_check_wheel_contents(wheel: Path) -> None:
    _run_tool(
        "check-wheel-contents",
        [venv_tool("check-wheel-contents"), str(wheel)],
        "remove stray or duplicate files from the package (see the codes above)",
    )


def gate_py3_none_tag(wheel: Path, cfg: config.BuildConfig) -> None:
    """py3-none: the library uses no CPython ABI, so the tags must not tie the wheel to one
    (cp311-cp311: that CPython only; cp310-abi3: never a free-threaded one)."""
    tags = _wheel_tags(wheel)
    bad = [t for t in tags if not t.startswith(f"{config.PYTHON_TAGS}-")]
    if bad or not tags:
        raise GateFailure(
            "py3-none-tag",
            f"wheel tags {tags} are not all {config.PYTHON_TAGS}: installers take a wheel "
            f"tagged {sorted({'-'.join(t.split('-')[:2]) for t in bad}) or 'nothing'} only "
            "on that CPython ABI (abi3: never on a free-threaded CPython), though the library "
            "uses no CPython API",
            "build with `make wheel`: setup.py's bdist_wheel is buildtools/wheel_tags.py, "
            f"which tags {config.PYTHON_TAGS}; never setuptools' py_limited_api",
        )
    target = _arch_of(tags)
    policy = cfg.wheel_tag(target)
    if policy not in tags:
        raise GateFailure(
            "py3-none-tag",
            f"wheel tags {tags} do not include {policy}",
            f"build with make wheel ARCH={target} (setup.py names the platform)"
            if target == config.WINDOWS
            else "repair with python -m scripts.release repair (auditwheel repair to "
            f"{cfg.manylinux_tag(target)})",
        )


def library_of_target(target: str) -> str:
    """The library's path in a target's wheel: the Linux library, or the Windows DLL."""
    return f"cuda_ext_example/{config.library_name(target)}"


def library_of(wheel: Path) -> str:
    return library_of_target(wheel_arch(wheel))


def gate_device_code(wheel: Path, cfg: config.BuildConfig) -> None:
    """The device code the wheel promises, per library: one fatbin per declared op and
    dtype in .nv_fatbin (.nv_fatb in the Windows DLL; the launcher loads each at its first
    call), each with every SASS arch and the PTX of pyproject.toml."""
    library = library_of(wheel)
    want_sass = [f"sm_{a}" for a in cfg.sass_archs]
    want_ptx = [f"sm_{cfg.ptx_arch}"]
    fix = (
        "build with the arch list of pyproject.toml [tool.cuda_ext_example] "
        "(buildtools/device_code.py)"
    )
    with binary_info.extension_in(wheel) as so:
        section = binary_info.fatbin_section(so)
        if binary_info.section_data(so, section) is None:  # device_code: no fix named
            raise GateFailure(
                "device-code",
                f"{library} carries SASS [] and PTX [] (no {section} section); promised "
                f"SASS {want_sass} and PTX {want_ptx}",
                fix + f": device_code.S embeds the fatbins in {section}; never strip it",
            )
        fatbins = binary_info.embedded_fatbins(so)
    names = [fatbin.label(i) for i, fatbin in enumerate(fatbins)]
    declared = declarations.load().libraries
    missing = [name for name in declared if name not in names]
    extra = [name for name in names if name not in declared or names.count(name) > 1]
    if missing or extra:
        raise GateFailure(
            "device-code",
            f"{library}'s {section} holds the fatbins {names}; ops/*/ops.toml declares "
            f"one per op and dtype, {declared}: no fatbin for {missing or 'none'}, unexpected "
            f"{sorted(set(extra)) or 'none'}",
            "rebuild with make wheel: buildtools/device_code.py packs one fatbin per declared "
            "op and dtype (each entry named after it) and device_code.S embeds every one; a "
            "fatbin the launcher lacks fails that op's first call in that dtype on every GPU",
        )
    short = []
    for name, fatbin in zip(names, fatbins, strict=True):
        sass, ptx = fatbin.archs("sass"), fatbin.archs("ptx")
        lacking = [a for a in want_sass if a not in sass]
        if lacking or ptx != want_ptx:
            short.append(
                f"{name}'s fatbin carries SASS {sass} and PTX {ptx} (missing SASS: {lacking})"
            )
    if short:
        raise GateFailure(
            "device-code",
            f"{library}: " + "; ".join(short) + f"; every library's promised SASS "
            f"{want_sass} and PTX {want_ptx}",
            fix + ": every fatbin gets every target",
        )


def _arch_versions(found: dict[str, tuple[int, int]]) -> str:
    return ", ".join(f"{arch}: {v[0]}.{v[1]}" for arch, v in found.items()) or "none"


def gate_cuda12_device_code(wheel: Path, cfg: config.BuildConfig) -> None:
    """Device code no newer than the promised driver floor can run: every cubin from the
    CUDA pyproject.toml declares for its arch (the oldest that knows it), PTX ISA <=
    <ptx-isa>. The CUDA of a cubin is read from its ELF header (binary_info.FatbinEntry)."""
    declared = {f"sm_{a}": binary_info.version_key(c)[:2] for a, c in cfg.sass_cuda.items()}
    isa = binary_info.version_key(cfg.ptx_isa)[:2]
    with binary_info.extension_in(wheel) as so:
        fatbins = binary_info.embedded_fatbins(so)
    # Every entry of every library (one fatbin per op), each checked.
    wrong: dict[str, tuple[int, int]] = {}
    too_new: dict[str, tuple[int, int]] = {}
    where: set[str] = set()
    cubins = 0
    for index, fatbin in enumerate(fatbins):
        for entry in fatbin.entries:
            cubins += entry.toolkit is not None
            if entry.toolkit and entry.toolkit != declared.get(entry.arch):
                wrong.setdefault(entry.arch, entry.toolkit)
                where.add(fatbin.label(index))
            if entry.ptx_isa and entry.ptx_isa > isa:
                too_new.setdefault(entry.arch, entry.ptx_isa)
                where.add(fatbin.label(index))
    if wrong or too_new or not cubins:
        expected = ", ".join(f"{a}: {'.'.join(map(str, declared.get(a, ('?',))))}" for a in wrong)
        raise GateFailure(
            "cuda12-device-code",
            f"{library_of(wheel)} is not the device code it declares for drivers >= "
            f"{cfg.min_driver} "
            f"(CUDA {cfg.min_driver_cuda}): cubins not from their declared CUDA: "
            f"{_arch_versions(wrong)} (declared {expected or 'none'}); PTX ISA newer than "
            f"{cfg.ptx_isa}: {_arch_versions(too_new)}"
            + (f" (in the fatbins of {', '.join(sorted(where))})" if where else "")
            + ("" if cubins else "; no cubin found"),
            "compile each arch with the NVRTC pyproject.toml [tool.cuda_ext_example.sass-archs] "
            "names (buildtools/device_code.py; NVRTC 12.0 from requirements/nvrtc-12.0.txt), "
            "never with a CUDA 13 nvcc or NVRTC",
        )


def gate_uncompressed_fatbin(wheel: Path, cfg: config.BuildConfig) -> None:
    """No compressed fatbin entry: drivers before 550.54.14 cannot load one, and the
    wheel promises >= 525.60.13."""
    with binary_info.extension_in(wheel) as so:
        compressed = binary_info.compressed_entries(so)
    if compressed:
        raise GateFailure(
            "uncompressed-fatbin",
            f"{library_of(wheel)} carries compressed fatbin entries "
            f"({', '.join(compressed)}), which need driver >= 550.54.14; the wheel promises "
            f">= {cfg.min_driver}",
            "pack the fatbin uncompressed (buildtools/device_code.py pack_fatbin, nvFatbin "
            "-compress=false; with nvcc, no --compress-mode)",
        )


def gate_release_build(wheel: Path) -> None:
    """A dev build (make wheel ARCHS=90: a few SASS archs, no PTX) is for the author's
    machine only: its record says so, and it never ships."""
    record = read_build_record(wheel)
    if record.get("dev_build"):
        raise GateFailure(
            "release-build",
            f"this is a dev build for {' '.join(record.get('sass_archs', []))} only "
            "(make wheel ARCHS=...), not the declared archs and PTX",
            "rebuild without ARCHS: make wheel (or make release)",
        )


# ------------------------------------------------------------ every ELF file
# Each audit returns (what is wrong, the fix) for one ELF file; the gates run them on
# every ELF of the wheel (found by content) and refuse the first, and an unexpected ELF
# is described by all of them at once.

Finding = tuple[str, str]


@contextmanager
def binary_files(wheel: Path) -> Iterator[dict[str, Path]]:
    """{name in the wheel: extracted path} of every binary (ELF or PE) of the wheel."""
    with zipfile.ZipFile(wheel) as zf, tempfile.TemporaryDirectory() as tmp:
        yield {name: Path(zf.extract(name, tmp)) for name in wheel_files.binary_names(wheel)}


def _refuse_first(gate: str, name: str, findings: list[Finding]) -> None:
    if findings:
        problem, fix = findings[0]
        raise GateFailure(gate, f"{name} {problem}", fix)


def link_findings(so: Path, cfg: config.BuildConfig, arch: str) -> list[Finding]:
    """DT_NEEDED against the allowlist, glibc versions against the floor, no libstdc++."""
    findings = []
    allowed = ALLOWED_NEEDED | {LOADERS[arch]}
    unexpected = sorted(set(binary_info.needed_libraries(so)) - allowed)
    if unexpected:
        findings.append(
            (
                f"needs {unexpected}, which are not on the allowlist {sorted(allowed)}",
                "link only against libtorch_cpu.so (buildtools/build_ext.py): no CUDA runtime "
                "(the launcher uses the driver API), never libstdc++",
            )
        )
    newest = binary_info.newest_version(so, "GLIBC_")
    if newest and binary_info.version_key(newest) > binary_info.version_key(cfg.glibc):
        findings.append(
            (
                f"needs {newest}, newer than GLIBC_{cfg.glibc} ({cfg.manylinux_tag(arch)})",
                f"link with zig's {arch}-linux-gnu.{cfg.glibc} target (buildtools/build_ext.py), "
                "not with the system compiler",
            )
        )
    cxx = binary_info.newest_version(so, "GLIBCXX_")
    if cxx:
        findings.append(
            (f"needs libstdc++ ({cxx})", "link the C++ runtime statically (zig's libc++)")
        )
    return findings


def cpython_symbols(so: Path) -> tuple[list[str], list[str]]:
    """(imported, defined) CPython symbols (Py*, _Py*) of an ELF file."""
    imported = [s for s in binary_info.undefined_symbols(so) if CPYTHON_SYMBOL.match(s)]
    defined = [s for s in binary_info.exported_symbols(so) if CPYTHON_SYMBOL.match(s)]
    return imported, defined


def python_api_findings(so: Path) -> list[Finding]:
    """Any CPython symbol, imported or defined: the wheel is py3-none, for every CPython 3,
    and each CPython (3.10, 3.14, a free-threaded 3.14t) has its own ABI: a symbol of one
    is missing from another, or means another object layout there."""
    imported, defined = cpython_symbols(so)
    if not imported and not defined:
        return []
    said = [f"imports {', '.join(imported[:10])}" * bool(imported)]
    said += [f"defines {', '.join(defined[:10])}" * bool(defined)]
    return [
        (
            f"uses the CPython ABI ({'; '.join(x for x in said if x)}), which no py3-none "
            "wheel may: it fails to load, or corrupts objects, on a CPython whose ABI differs "
            "(another version, a free-threaded build)",
            "keep csrc/ free of Python.h and every Py* call: torch loads the library "
            "(torch.ops.load_library), and what Python needs of it goes through plain C "
            "functions (csrc/launch_shape_hooks.cpp) and ctypes "
            "(src/cuda_ext_example/_launch_shapes.py)",
        )
    ]


def gate_no_cpython_symbols(wheel: Path) -> None:
    with binary_files(wheel) as found:
        for name, so in found.items():
            _refuse_first("cpython-symbols", name, python_api_findings(so))


def declared_exports(exports_map: Path = EXPORTS_MAP) -> list[str]:
    """The `global:` names of the linker version script."""
    text = re.sub(r"/\*.*?\*/", "", exports_map.read_text(), flags=re.S)
    block = re.search(r"global:(.*?)local:", text, re.S)
    return sorted(re.findall(r"([A-Za-z_]\w*)\s*;", block.group(1))) if block else []


def export_findings(so: Path) -> list[Finding]:
    exported = binary_info.exported_symbols(so)
    declared = declared_exports()
    if exported == declared:
        return []
    return [
        (
            f"exports {exported[:10]}, not the hooks of csrc/exports.map {declared}",
            "keep csrc/exports.map as the linker version script (buildtools/build_ext.py)",
        )
    ]


def gate_elf(wheel: Path, cfg: config.BuildConfig) -> None:
    arch = wheel_arch(wheel)
    with binary_files(wheel) as found:
        for name, so in found.items():
            exports = export_findings(so) if name == LIBRARY else []
            _refuse_first("elf-audit", name, link_findings(so, cfg, arch) + exports)


def torch_shim_findings(so: Path, cfg: config.BuildConfig, torch_include: Path) -> list[Finding]:
    target = binary_info.version_key(cfg.torch_target)
    known = shim_versions.shim_versions(torch_include)
    imported = shim_versions.torch_shims(binary_info.undefined_symbols(so))
    too_new = {s: known[s] for s in imported if s in known and known[s] > target}
    unknown = [s for s in imported if s not in known]
    if not too_new and not unknown:
        return []
    detail = ", ".join(f"{s} (torch {'.'.join(map(str, v))})" for s, v in too_new.items())
    return [
        (
            f"imports shims newer than torch {cfg.torch_target}: {detail or 'none'}; "
            f"not in torch's stable shim headers: {unknown or 'none'}",
            f"compile with -DTORCH_TARGET_VERSION for {cfg.torch_target} and use only stable "
            "shims; look up what a newer one needs at run time (as csrc/ops.cpp does for the "
            "CUDA stream)",
        )
    ]


def gate_torch_shims(wheel: Path, cfg: config.BuildConfig, torch_include: Path) -> None:
    with binary_files(wheel) as found:
        for name, so in found.items():
            _refuse_first("torch-shims", name, torch_shim_findings(so, cfg, torch_include))


def gate_elf_readable(wheel: Path) -> None:
    """Every ELF file, and every file named as a library, is a whole ELF shared object."""
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        if LIBRARY not in names:
            raise GateFailure(
                "elf-readable",
                f"the wheel has no {LIBRARY}",
                "build with `make wheel` and repair it (make repair)",
            )
        named = [n for n in names if ".so" in Path(n).name]
        for name in dict.fromkeys([LIBRARY, *wheel_files.binary_names(wheel), *named]):
            problem = binary_info.elf_problem(zf.read(name))
            if problem:
                raise GateFailure(
                    "elf-readable",
                    f"{name} is not a readable ELF shared object ({problem})",
                    "never upload it: rebuild and repair the wheel (make repair); a file cut "
                    "short (full disk, interrupted copy or download) or not built by the "
                    "linker is no release",
                )


def _dynamic_tags(data: bytes, kinds: tuple[str, ...]) -> list[tuple[str, str]]:
    from elftools.elf.elffile import ELFFile

    dynamic = ELFFile(io.BytesIO(data)).get_section_by_name(".dynamic")
    values = []
    for tag in dynamic.iter_tags():
        kind = tag.entry.d_tag
        if kind in kinds:
            values.append((kind, tag.rpath if kind == "DT_RPATH" else tag.runpath))
    return values


def search_path_outside(entry: str, so_name: str, names: list[str]) -> bool:
    """True unless `entry` is $ORIGIN-relative and names a folder of the wheel itself."""
    origin = re.match(r"^(\$ORIGIN|\$\{ORIGIN\})(/.*)?$", entry)
    if origin is None:
        return True
    folder = posixpath.normpath(posixpath.dirname(so_name) + (origin.group(2) or ""))
    if folder.startswith("..") or folder == ".":
        return True
    return not any(n.startswith(folder + "/") for n in names)


def search_path_findings(so_name: str, data: bytes, names: list[str]) -> list[Finding]:
    findings = []
    for kind, value in _dynamic_tags(data, ("DT_RPATH", "DT_RUNPATH")):
        outside = [e for e in value.split(":") if search_path_outside(e, so_name, names)]
        if outside:
            findings.append(
                (
                    f"has {kind[3:]} {value!r}: {outside} is not a folder inside the wheel "
                    "($ORIGIN-relative), so every user's loader searches the build machine's "
                    "path (or any folder of that name) first",
                    "remove it (`patchelf --remove-rpath`; no -Wl,-rpath in "
                    "buildtools/build_ext.py): torch's libraries are found because torch "
                    "is imported first; grafted ones through $ORIGIN/../<package>.libs",
                )
            )
    return findings


def gate_search_paths(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        for name in wheel_files.binary_names(wheel):
            _refuse_first(
                "search-path", name, search_path_findings(name, zf.read(name), zf.namelist())
            )


def stack_flags(data: bytes) -> str | None:
    """'RW' or 'RWE' from PT_GNU_STACK, or None without one (then the loader makes the
    stack executable)."""
    from elftools.elf.elffile import ELFFile

    for segment in ELFFile(io.BytesIO(data)).iter_segments():
        if segment["p_type"] == "PT_GNU_STACK":
            flags = segment["p_flags"]
            return "R" * bool(flags & 4) + "W" * bool(flags & 2) + "E" * bool(flags & 1)
    return None


def stack_findings(data: bytes) -> list[Finding]:
    flags = stack_flags(data)
    if flags is not None and "E" not in flags:
        return []
    return [
        (
            f"asks for an executable stack (PT_GNU_STACK {flags or 'missing'}): loading it "
            "makes the whole process's stack executable, and hardened systems (SELinux) "
            "refuse to load it",
            "mark every assembly file non-executable (`.section .note.GNU-stack, "
            '"", @progbits`, as buildtools/device_code.py writes device_code.S) or link '
            "with -Wl,-z,noexecstack",
        )
    ]


def gate_no_executable_stack(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        for name in wheel_files.binary_names(wheel):
            _refuse_first("exec-stack", name, stack_findings(zf.read(name)))


# ------------------------------------------------------------- torch-abi-audit


# torch-abi-audit 0.3.0 runs on Python >= 3.11 (requirements/dev.in pins it there).
TORCH_ABI_AUDIT_RUNS = sys.version_info >= (3, 11)


def torch_abi_audit_findings(
    so: Path, cfg: config.BuildConfig, uses_torch: bool = True
) -> list[Finding]:
    """Quansight's torch-abi-audit (PyPI) beside our own shim gate: a second, independent
    reading of the binary's torch symbols. `uses_torch`: the file must use torch (the
    library does; a reading without any torch symbol means nm could not read it)."""
    try:
        from torch_abi_audit.inspect import inspect_extension
    except ImportError:
        raise GateFailure(
            "torch-abi-audit",
            "torch-abi-audit is not installed in the release venv",
            "pip install torch-abi-audit==0.3.0 (requirements/dev.in; make venv)",
        ) from None
    report = inspect_extension(so)
    verdict = report.torch
    problems = []
    if report.error:
        problems.append(f"it could not read the binary: {report.error}")
    elif uses_torch and not verdict.uses_torch:
        # It reads symbols with the system's nm; one that cannot read this ELF makes an
        # empty list, which must not pass as a clean bill.
        problems.append(
            "it saw no torch symbol at all (is binutils' nm installed and able "
            "to read this CPU's ELF?)"
        )
    if verdict.unstable_symbols:
        problems.append(f"unstable libtorch symbols: {', '.join(verdict.unstable_symbols[:10])}")
    if verdict.unknown_shim_symbols:
        problems.append(f"shims it does not know: {', '.join(verdict.unknown_shim_symbols)}")
    minimum = verdict.min_torch_version
    if minimum and binary_info.version_key(minimum)[:2] > binary_info.version_key(cfg.torch_target):
        problems.append(
            f"min torch {minimum} (from {', '.join(verdict.version_defining_symbols)}) is above "
            f"the declared target {cfg.torch_target}"
        )
    if not problems:
        return []
    return [
        (
            "is refused by torch-abi-audit: " + "; ".join(problems),
            f"use only the LibTorch stable ABI (torch/csrc/stable, no c10::/at::/torch:: C++ "
            f"symbols) and compile with -DTORCH_TARGET_VERSION for {cfg.torch_target} "
            "(buildtools/build_ext.py)",
        )
    ]


def gate_torch_abi_audit(wheel: Path, cfg: config.BuildConfig) -> None:
    with binary_files(wheel) as found:
        for name, so in found.items():
            findings = torch_abi_audit_findings(so, cfg, uses_torch=name == LIBRARY)
            _refuse_first("torch-abi-audit", name, findings)


# --------------------------------------------- one library, no other binary


def elf_kind(so: Path) -> str:
    """What an ELF file is, from its header, program headers and exports: the wording of
    a refusal."""
    from elftools.elf.elffile import ELFFile

    try:
        with open(so, "rb") as f:
            elf = ELFFile(f)
            kind = elf.header["e_type"]
            program = any(s["p_type"] == "PT_INTERP" for s in elf.iter_segments())
        library = kind == "ET_DYN" and not program
        exported = binary_info.exported_symbols(so) if library else []
        inits = [s for s in exported if s.startswith("PyInit_")]
    except Exception:  # cut short or malformed: elf_problem says how
        return "an ELF file"
    if library:
        return f"a Python extension module ({', '.join(inits)})" if inits else "a shared library"
    names = {"ET_EXEC": "a program", "ET_DYN": "a program", "ET_REL": "an object file"}
    return names.get(kind, f"an ELF file of type {kind}")


def describe_elf(
    name: str, so: Path, cfg: config.BuildConfig, torch_include: Path, wheel: Path
) -> str:
    """An ELF file the build does not make, as every audit sees it."""
    kind = elf_kind(so)
    data = so.read_bytes()
    problem = binary_info.elf_problem(data)
    if problem:
        return f"{kind}, not a whole shared object ({problem})"
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    findings = link_findings(so, cfg, wheel_arch(wheel))
    findings += torch_shim_findings(so, cfg, torch_include)
    # Its C++ symbols, where torch-abi-audit runs: describing a stray file, a missing
    # tool must not hide the fault (the torch-abi-audit gate names it).
    if TORCH_ABI_AUDIT_RUNS and importlib.util.find_spec("torch_abi_audit"):
        findings += torch_abi_audit_findings(so, cfg, uses_torch=False)
    findings += python_api_findings(so)
    findings += search_path_findings(name, data, names) + stack_findings(data)
    said = "; ".join(f"it {problem}" for problem, _ in findings)
    return f"{kind}; {said or 'nothing else is wrong with it, but no build step makes it'}"


def _is_our_library(so: Path) -> bool:
    """The build's library by content: it exports csrc/exports.map's hooks."""
    try:
        return binary_info.exported_symbols(so) == declared_exports()
    except Exception:  # cut short or malformed: elf_problem says how, elsewhere
        return False


def gate_one_library(wheel: Path, cfg: config.BuildConfig, torch_include: Path) -> None:
    """The build makes one binary, the library: any other binary (ELF or PE) of the wheel
    is refused as what it is, whatever its name, before any gate audits the library."""
    with binary_files(wheel) as found:
        for name, so in found.items():
            if name == LIBRARY:
                continue
            if _is_our_library(so):
                module = EXTENSION_MODULE_NAME.fullmatch(posixpath.basename(name))
                raise GateFailure(
                    "library-name",
                    f"the library is {name}, not {LIBRARY}, which the loader hands to torch"
                    + (
                        " (and CPython's importer takes its name for an extension module's)"
                        if module
                        else ""
                    ),
                    f"build with `make wheel`: buildtools/build_ext.py names it {config.LIBRARY} "
                    "(buildtools/config.py LIBRARY); never rename a built library",
                )
            raise GateFailure(
                "unexpected-elf",
                f"unexpected shared library {name} in the wheel: "
                + describe_elf(name, so, cfg, torch_include, wheel),
                f"ship only {LIBRARY}, which buildtools/build_ext.py builds: take {name} out "
                "of the package (a stray build output in src/cuda_ext_example/ or package "
                f"data; `make clean`, then `make repair`); code it carries belongs in csrc/, "
                "linked into the one library",
            )


# ------------------------------------------------------------ the build record
# The oldest driver of each CUDA major (NVIDIA's CUDA Compatibility guide): a cubin from
# CUDA 12.x needs at least 12.0's.
DRIVER_OF_CUDA_MAJOR = {12: "525.60.13", 13: "580.65.06"}


def kernel_dtypes(so: Path) -> dict[str, list[str]]:
    """The dtypes the binary has kernel instances for, per op folder, as torch's Python
    names: read from the name expressions the launcher's table carries (cee_generated.h puts
    them in the binary as strings, next to NVRTC's lowered names): the elementwise rules'
    simple kernels, and the custom ops' kernels (their first template argument)."""
    found: dict[str, set[bytes]] = {}
    data = so.read_bytes()
    elementwise = rb"cee::elementwise_simple<cee_rule_(\w+)::Signature, ([\w ]+)>"
    custom = rb"\x00cee_rule_(\w+)::\w+<([\w ]+?)[,>]"
    for folder, device_type in re.findall(elementwise, data) + re.findall(custom, data):
        found.setdefault(folder.decode(), set()).add(device_type)
    return {
        folder: [d.name for d in declarations.DTYPES.values() if d.device_type.encode() in types]
        for folder, types in found.items()
    }


def record_vs_pyproject(record: dict, cfg: config.BuildConfig, target: str) -> list[str]:
    declared = {"version": cfg.version, **declared_record(cfg, target)}
    return [
        f"{key} is {record.get(key)!r}, pyproject.toml (or ops/*/ops.toml) says {want!r}"
        for key, want in declared.items()
        if record.get(key) != want
    ]


def _newest_shims(so: Path, torch_include: Path) -> tuple[tuple[int, int], list[str]]:
    known = shim_versions.shim_versions(torch_include)
    imported = shim_versions.torch_shims(binary_info.undefined_symbols(so))
    versions = [known[s] for s in imported if s in known]
    newest = max(versions, default=shim_versions.BASELINE)
    return newest, sorted(s for s in imported if known.get(s) == newest)


def record_vs_binary(record: dict, so: Path, torch_include: Path) -> list[str]:
    problems = []
    newest, shims = _newest_shims(so, torch_include)
    target = binary_info.version_key(str(record.get("torch_target")))[:2]
    if newest > target:
        problems.append(
            f"torch_target {record.get('torch_target')} but the binary imports torch "
            f"{newest[0]}.{newest[1]} shims ({', '.join(shims[:5])})"
        )
    problems += _targets_vs_record(record, binary_info.embedded_fatbins(so))
    problems += _driver_floor_vs_binary(record, so)
    newest_glibc = binary_info.newest_version(so, "GLIBC_")
    floor = binary_info.version_key(str(record.get("glibc_floor")))
    if newest_glibc and binary_info.version_key(newest_glibc) > floor:
        problems.append(
            f"glibc_floor {record.get('glibc_floor')} but the binary needs {newest_glibc}"
        )
    by_folder = kernel_dtypes(so)
    every = sorted({d for dtypes in by_folder.values() for d in dtypes})
    if not set(every) <= set(record.get("dtypes") or []):
        problems.append(f"dtypes {record.get('dtypes')} but the binary has kernels for {every}")
    for op in record.get("ops") or []:
        has = by_folder.get(op.get("folder"), [])
        if sorted(has) != sorted(op.get("dtypes") or []):
            problems.append(
                f"{op.get('name')} declares dtypes {op.get('dtypes')} but the binary has "
                f"kernels for {has}"
            )
    return problems


def _targets_vs_record(record: dict, fatbins: list[binary_info.Fatbin]) -> list[str]:
    """The record's SASS archs and PTX against every embedded fatbin (one per op and dtype); a
    disagreement is said once, with the fatbins it holds for."""
    ptx = str(record.get("ptx_arch")).replace("compute_", "sm_")
    found: dict[str, list[str]] = {}
    for index, fatbin in enumerate(fatbins):
        sass, has_ptx = fatbin.archs("sass"), fatbin.archs("ptx")
        if record.get("sass_archs") != sass:
            found.setdefault(
                f"sass_archs {record.get('sass_archs')} but the fatbin has SASS {sass}", []
            ).append(fatbin.label(index))
        if [ptx] != has_ptx:
            found.setdefault(
                f"ptx_arch {record.get('ptx_arch')} but the fatbin has PTX {has_ptx}", []
            ).append(fatbin.label(index))
    every = len(fatbins) > 1
    return [
        f"{problem} ({'every op' if every and len(names) == len(fatbins) else ', '.join(names)})"
        for problem, names in found.items()
    ]


def _driver_floor_vs_binary(record: dict, so: Path) -> list[str]:
    """The record's driver floor against the CUDA that made the cubins."""
    by_arch = binary_info.cubin_toolkits(so)
    toolkits = sorted(set(by_arch.values()))
    newest = binary_info.version_key(str(record.get("device_cuda")))[:2]
    problems = []
    if toolkits and toolkits[-1] > newest:  # device_cuda: the newest CUDA of the device code
        shown = [f"{v[0]}.{v[1]}" for v in toolkits]
        problems.append(
            f"device_cuda {record.get('device_cuda')} but the cubins are from CUDA {shown}"
        )
    named = record.get("device_compilers") or {}
    wrong = [
        f"{arch}: CUDA {v[0]}.{v[1]}, recorded {named.get(arch)}"
        for arch, v in sorted(by_arch.items())
        if named.get(arch) != f"NVRTC {v[0]}.{v[1]}"
    ]
    if wrong:
        problems.append("device_compilers disagree with the cubins (" + "; ".join(wrong) + ")")
    for major in sorted({v[0] for v in toolkits}):
        needs = DRIVER_OF_CUDA_MAJOR.get(major)
        floor = binary_info.version_key(str(record.get("min_driver")))
        if needs and floor < binary_info.version_key(needs):
            problems.append(
                f"min_driver {record.get('min_driver')} but cubins from CUDA {major} need "
                f">= {needs}"
            )
        if binary_info.version_key(str(record.get("min_driver_cuda")))[:1] != (major,):
            problems.append(
                f"min_driver_cuda {record.get('min_driver_cuda')} but the cubins are CUDA {major}'s"
            )
    return problems


def gate_build_record(wheel: Path, cfg: config.BuildConfig, torch_include: Path) -> None:
    """doctor and the loader trust the record: it must say what the binary is and what
    pyproject.toml declares."""
    record = read_build_record(wheel)
    with binary_info.extension_in(wheel) as so:
        problems = record_vs_binary(record, so, torch_include)
    problems += record_vs_pyproject(record, cfg, wheel_arch(wheel))
    if problems:
        raise GateFailure(
            "build-record",
            f"the build record {BUILD_RECORD} disagrees with the binary or pyproject.toml: "
            + "; ".join(problems),
            "never edit the record: rebuild the wheel (make repair), which writes it from "
            "pyproject.toml [tool.cuda_ext_example] and ops/*/ops.toml next to the binary "
            "it describes",
        )


def wheel_arch(wheel: Path) -> str:
    """'x86_64' or 'aarch64', from the wheel's tags (repaired or not)."""
    return _arch_of(_wheel_tags(wheel))


def _arch_of(tags: list[str]) -> str:
    archs = {arch for tag in tags for arch in TARGETS if tag.endswith(arch)}
    if len(archs) != 1:
        raise GateFailure(
            "py3-none-tag",
            f"wheel tags {tags} name no single platform of {sorted(TARGETS)}",
            "build with make wheel (ARCH=aarch64 or ARCH=win_amd64 for those wheels)",
        )
    return archs.pop()


def _wheel_tags(wheel: Path) -> list[str]:
    return [tag.strip() for tag in wheel_metadata.wheel_fields(wheel).get_all("Tag") or []]


def all_gates(
    cfg: config.BuildConfig, torch_include: Path, target: str = "x86_64"
) -> list[tuple[str, Callable]]:
    """In order: the wheel's zip entries and files first, then which binaries it carries
    and whether each is whole, then what it says of itself, then the tools that parse the
    binary; so a wheel is refused for its first fault with that fault's fix. A Windows
    wheel (target win_amd64) gets the DLL's twins of the ELF gates
    (scripts/release/pe_gates.py)."""
    from . import pe_gates

    windows = target == config.WINDOWS
    binaries = (
        [
            (f"one binary: {library_of_target(target)}", pe_gates.gate_one_dll),
            ("DLLs whole and readable", pe_gates.gate_dll_readable),
        ]
        if windows
        else [
            (f"one ELF file: {LIBRARY}", lambda w: gate_one_library(w, cfg, torch_include)),
            ("ELF files whole and readable", gate_elf_readable),
            ("RPATH/RUNPATH only inside the wheel", gate_search_paths),
            ("no executable stack", gate_no_executable_stack),
        ]
    )
    audits = (
        [
            ("DLL imports and exports", pe_gates.gate_dll_imports),
            (
                "only the LibTorch stable ABI",
                lambda w: pe_gates.gate_stable_abi_only(w, cfg, torch_include),
            ),
        ]
        if windows
        else [
            ("ELF audit", lambda w: gate_elf(w, cfg)),
            *(
                [("torch-abi-audit", lambda w: gate_torch_abi_audit(w, cfg))]
                if TORCH_ABI_AUDIT_RUNS
                else []
            ),
        ]
    )
    return [
        ("zip entries: no links, duplicates or paths outside", wheel_files.gate_zip_entries),
        ("RECORD matches the files", wheel_files.gate_record_matches_files),
        ("nothing grafted", wheel_files.gate_nothing_grafted),
        *binaries,
        ("no bytecode", wheel_files.gate_no_bytecode),
        ("every Python file compiles", wheel_files.gate_python_compiles),
        ("no build paths", wheel_files.gate_no_build_paths),
        ("license in the dist-info", wheel_files.gate_license_files),
        ("WHEEL agrees with the filename and the binary", wheel_metadata.gate_wheel_file),
        (
            "METADATA agrees with the filename, build record and pyproject.toml",
            lambda w: wheel_metadata.gate_metadata(w, cfg),
        ),
        ("release build (not a dev build)", gate_release_build),
        (f"{config.PYTHON_TAGS} tag", lambda w: gate_py3_none_tag(w, cfg)),
        ("no CPython symbol", gate_no_cpython_symbols),
        ("twine check --strict", gate_twine_check),
        ("check-wheel-contents", gate_check_wheel_contents),
        *audits,
        ("device code", lambda w: gate_device_code(w, cfg)),
        (
            f"device code runs on driver >= {cfg.min_driver}",
            lambda w: gate_cuda12_device_code(w, cfg),
        ),
        ("fatbin uncompressed", lambda w: gate_uncompressed_fatbin(w, cfg)),
        (f"torch shims <= {cfg.torch_target}", lambda w: gate_torch_shims(w, cfg, torch_include)),
        (
            "build record matches the binary and pyproject.toml",
            lambda w: gate_build_record(w, cfg, torch_include),
        ),
    ]


def run_gates(wheel: Path, log=print) -> None:
    """Runs every gate in order; the first failure raises GateFailure."""
    problem = wheel_problem(Path(wheel))  # before the gates, each of which opens it as a zip
    if problem:
        raise GateFailure(
            "wheel",
            f"{wheel}: {problem}",
            "pass the repaired wheel (make repair: wheelhouse/*.whl)",
        )
    cfg = config.load(dev_spec="")  # what a release must carry, whatever $CEE_SASS_ARCHS says
    torch_include, _ = torch_paths()
    target = wheel_arch(Path(wheel))
    if not TORCH_ABI_AUDIT_RUNS and target != config.WINDOWS:
        log("  gate skipped: torch-abi-audit (it needs Python >= 3.11; the torch shims gate "
            "checks the same promise)", flush=True)  # fmt: skip
    for name, gate in all_gates(cfg, torch_include, target):
        gate(Path(wheel))
        log(f"  gate ok: {name}", flush=True)
