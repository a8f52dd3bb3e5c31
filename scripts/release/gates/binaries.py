"""The binaries of a wheel (ELF files; the Windows wheel's DLL), found by content whatever
their names, and what each one is, read once: the gates judge these facts, so however many
gates (and a stray file's description) ask, each file is parsed once per run."""

from __future__ import annotations

import functools
import io
import tempfile
import types
import zipfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from buildtools import config
from scripts.inspect import binary_info, pe_info

from . import wheel_files
from .failure import GateFailure
from .tags import wheel_arch

# The one binary of the Linux wheel: a plain library that torch loads, not a CPython module
# (library_of: the Windows wheel's DLL).
LIBRARY = f"cuda_ext_example/{config.LIBRARY}"

# What an audit of one file finds: (what is wrong, the fix).
Finding = tuple[str, str]


def library_of_target(target: str) -> str:
    """The library's path in a target's wheel: the Linux library, or the Windows DLL."""
    return f"cuda_ext_example/{config.library_name(target)}"


def library_of(wheel: Path) -> str:
    return library_of_target(wheel_arch(wheel))


def refuse_first(gate: str, name: str, findings: list[Finding]) -> None:
    if findings:
        problem, fix = findings[0]
        raise GateFailure(gate, f"{name} {problem}", fix)


@contextmanager
def binary_files(wheel: Path, names: list[str] | None = None) -> Iterator[dict[str, Path]]:
    """{name in the wheel: extracted path} of every binary (ELF or PE) of the wheel, or of
    `names` only."""
    wanted = wheel_files.binary_names(wheel) if names is None else names
    with zipfile.ZipFile(wheel) as zf, tempfile.TemporaryDirectory() as tmp:
        yield {name: Path(zf.extract(name, tmp)) for name in wanted}


@dataclass(frozen=True)
class BinaryFacts:
    """One binary as the audits see it. A file that is not whole has its kind and problem
    only: the gate for whole files refuses it before any audit reads the rest."""

    name: str  # in the wheel
    kind: str  # as a refusal words it: "a shared library", "a program", ...
    problem: str | None  # why it is no whole ELF shared object (a PE file: no whole DLL)
    is_pe: bool = False
    needed: tuple[str, ...] = ()  # DT_NEEDED, in order (a DLL's imported DLLs)
    exported: tuple[str, ...] = ()  # defined dynamic symbols (a DLL's exports), sorted
    undefined: tuple[str, ...] = ()  # imported symbols, sorted
    newest_glibc: str | None = None  # the newest GLIBC_ version it needs
    newest_glibcxx: str | None = None  # the newest GLIBCXX_ version: libstdc++
    search_paths: tuple[tuple[str, str], ...] = ()  # (DT_RPATH or DT_RUNPATH, its value)
    stack: str | None = None  # PT_GNU_STACK's flags ('RW'), None without one
    imports_by_dll: tuple[tuple[str, tuple[str, ...]], ...] = ()  # a DLL's: (DLL, its names)


def _as_read(wheel: Path) -> tuple[Path, int, int]:
    """A wheel as the caches below know it: its path, time and size (a wheel rewritten
    since is read again)."""
    wheel = Path(wheel).resolve()
    stat = wheel.stat()
    return wheel, stat.st_mtime_ns, stat.st_size


def facts_of(wheel: Path) -> Mapping[str, BinaryFacts]:
    """Every binary of the wheel, by name: read at the first gate that asks and kept for
    the others of the run."""
    return _read_binaries(*_as_read(wheel))


@functools.lru_cache(maxsize=4)
def _read_binaries(wheel: Path, mtime_ns: int, size: int) -> Mapping[str, BinaryFacts]:
    with binary_files(wheel) as found:
        return types.MappingProxyType({name: read_facts(name, p) for name, p in found.items()})


def read_facts(name: str, path: Path) -> BinaryFacts:
    data = path.read_bytes()
    if pe_info.is_pe(data):
        return _pe_facts(name, path, data)
    problem = binary_info.elf_problem(data)
    if problem:
        return BinaryFacts(name, elf_kind(data, ()), problem)
    try:
        exported = tuple(binary_info.exported_symbols(path))
        versions = binary_info.symbol_versions(path)
        return BinaryFacts(
            name,
            elf_kind(data, exported),
            None,
            needed=tuple(binary_info.needed_libraries(path)),
            exported=exported,
            undefined=tuple(binary_info.undefined_symbols(path)),
            newest_glibc=binary_info.newest_of(versions, "GLIBC_"),
            newest_glibcxx=binary_info.newest_of(versions, "GLIBCXX_"),
            search_paths=tuple(search_path_tags(data)),
            stack=stack_flags(data),
        )
    # A file elf_problem passes whose tables pyelftools still cannot read: not readable,
    # said as elf_problem says it, never a traceback.
    except Exception as exc:
        return BinaryFacts(name, elf_kind(data, ()), f"pyelftools cannot parse it: {exc}")


def _pe_facts(name: str, path: Path, data: bytes) -> BinaryFacts:
    kind = "a Windows (PE) file"
    problem = pe_info.pe_problem(data)
    if problem:
        return BinaryFacts(name, kind, problem, is_pe=True)
    try:
        imports = pe_info.imports(path)
        return BinaryFacts(
            name,
            kind,
            None,
            is_pe=True,
            needed=tuple(imports),
            exported=tuple(pe_info.exported_symbols(path)),
            undefined=tuple(sorted({n for names in imports.values() for n in names})),
            imports_by_dll=tuple((dll, tuple(names)) for dll, names in imports.items()),
        )
    except Exception as exc:  # as above, for pefile
        return BinaryFacts(name, kind, f"pefile cannot parse it: {exc}", is_pe=True)


def elf_kind(data: bytes, exported: tuple[str, ...]) -> str:
    """What an ELF file is, from its header, program headers and exports: the wording of
    a refusal."""
    from elftools.elf.elffile import ELFFile

    try:
        elf = ELFFile(io.BytesIO(data))
        kind = elf.header["e_type"]
        program = any(s["p_type"] == "PT_INTERP" for s in elf.iter_segments())
    except Exception:  # cut short or malformed: elf_problem says how
        return "an ELF file"
    if kind == "ET_DYN" and not program:
        inits = [s for s in exported if s.startswith("PyInit_")]
        return f"a Python extension module ({', '.join(inits)})" if inits else "a shared library"
    names = {"ET_EXEC": "a program", "ET_DYN": "a program", "ET_REL": "an object file"}
    return names.get(kind, f"an ELF file of type {kind}")


def search_path_tags(data: bytes, kinds: tuple[str, ...] = ("DT_RPATH", "DT_RUNPATH")):
    """[(DT_RPATH or DT_RUNPATH, its value)] of an ELF file's .dynamic section."""
    from elftools.elf.elffile import ELFFile

    dynamic = ELFFile(io.BytesIO(data)).get_section_by_name(".dynamic")
    values = []
    for tag in dynamic.iter_tags():
        kind = tag.entry.d_tag
        if kind in kinds:
            values.append((kind, tag.rpath if kind == "DT_RPATH" else tag.runpath))
    return values


def stack_flags(data: bytes) -> str | None:
    """'RW' or 'RWE' from PT_GNU_STACK, or None without one (then the loader makes the
    stack executable)."""
    from elftools.elf.elffile import ELFFile

    for segment in ELFFile(io.BytesIO(data)).iter_segments():
        if segment["p_type"] == "PT_GNU_STACK":
            flags = segment["p_flags"]
            return "R" * bool(flags & 4) + "W" * bool(flags & 2) + "E" * bool(flags & 1)
    return None


# ------------------------------------------------------------- the device code


@dataclass(frozen=True)
class DeviceCode:
    """The library's fatbins, read once for the device-code and build-record gates."""

    library: str  # its name in the wheel
    section: str  # .nv_fatbin (.nv_fatb in a DLL)
    fatbins: tuple[binary_info.Fatbin, ...] | None  # None: the binary has no such section

    def names(self) -> list[str]:
        """How each fatbin is named (its entries' identifier: its library), in order."""
        return [fatbin.label(i) for i, fatbin in enumerate(self.fatbins or ())]

    def cubin_toolkits(self) -> dict[str, tuple[int, int]]:
        """{'sm_90': (12, 0), ...}: the CUDA of the compiler that made each arch's cubins."""
        return {
            e.arch: e.toolkit for fatbin in self.fatbins or () for e in fatbin.entries if e.toolkit
        }


def device_code_of(wheel: Path) -> DeviceCode:
    return _read_device_code(*_as_read(wheel))


@functools.lru_cache(maxsize=4)
def _read_device_code(wheel: Path, mtime_ns: int, size: int) -> DeviceCode:
    library = library_of(wheel)
    with zipfile.ZipFile(wheel) as zf:
        if library not in zf.namelist():
            raise GateFailure(
                "device-code",
                f"the wheel has no {library}",
                "build with `make wheel` and repair it (make repair)",
            )
    with binary_files(wheel, [library]) as found:
        path = found[library]
        section = binary_info.fatbin_section(path)
        data = binary_info.section_data(path, section)
    fatbins = None if data is None else tuple(binary_info.fatbins(data))
    return DeviceCode(library, section, fatbins)
