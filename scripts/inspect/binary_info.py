"""Facts about the built library (a .so, or the one inside a wheel).

Shared by the wheel tests, the release gates and `python -m scripts.inspect`.
ELF facts come from pyelftools (requirements/test.in; installed with auditwheel).
The device code is read from the embedded fatbins themselves (one per op and dtype: fatbins):
cuobjdump 13.x stops with "Invalid ELF" at the sm_90 cubin of NVRTC 12.0 (nvdisasm reads
it), so the listing, the CUDA of each cubin and the compression flags do not depend on it.
SASS is disassembled by NVIDIA's nvdisasm, one cubin at a time.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import struct
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from . import pe_info


class ToolMissing(RuntimeError):
    """A CUDA binary tool (nvdisasm) is not installed."""


def _elf_file_class():
    """pyelftools' ELFFile, or a RuntimeError that names the fix: a GPU machine's Python
    may lack it."""
    try:
        from elftools.elf.elffile import ELFFile
    except ImportError as exc:
        raise RuntimeError(
            "reading ELF files needs pyelftools: pip install pyelftools (make venv has it)"
        ) from exc
    return ELFFile


def _elf(path: Path):
    return _elf_file_class()(open(path, "rb"))  # noqa: SIM115 - closed by callers via .stream


def _dynamic_symbols(path: Path):
    elf = _elf(path)
    try:
        for sym in elf.get_section_by_name(".dynsym").iter_symbols():
            if sym.name:
                yield sym
    finally:
        elf.stream.close()


def needed_libraries(path: Path) -> list[str]:
    """DT_NEEDED entries, in order (a DLL's imported DLLs)."""
    if pe_info.is_pe(path):
        return pe_info.imported_libraries(path)
    elf = _elf(path)
    try:
        dynamic = elf.get_section_by_name(".dynamic")
        return [tag.needed for tag in dynamic.iter_tags() if tag.entry.d_tag == "DT_NEEDED"]
    finally:
        elf.stream.close()


def exported_symbols(path: Path) -> list[str]:
    """Defined global/weak dynamic symbols (the T/W lines of `nm -D --defined-only`; a
    DLL's exports)."""
    if pe_info.is_pe(path):
        return pe_info.exported_symbols(path)
    return sorted(
        s.name
        for s in _dynamic_symbols(path)
        if s["st_shndx"] != "SHN_UNDEF" and s["st_info"]["bind"] in ("STB_GLOBAL", "STB_WEAK")
    )


def undefined_symbols(path: Path) -> list[str]:
    """Symbols the binary imports (the U lines of `nm -D`), without version suffixes."""
    if pe_info.is_pe(path):
        return pe_info.imported_symbols(path)
    return sorted({s.name for s in _dynamic_symbols(path) if s["st_shndx"] == "SHN_UNDEF"})


def symbol_versions(path: Path) -> dict[str, list[str]]:
    """Required symbol versions per library, e.g. {'libc.so.6': ['GLIBC_2.2.5', ...]};
    none for a DLL."""
    if pe_info.is_pe(path):
        return {}
    elf = _elf(path)
    try:
        section = elf.get_section_by_name(".gnu.version_r")
        if section is None:
            return {}
        return {
            verneed.name: sorted(aux.name for aux in auxes)
            for verneed, auxes in section.iter_versions()
        }
    finally:
        elf.stream.close()


def section_data(path: Path, name: str) -> bytes | None:
    """The bytes of one ELF section (e.g. '.nv_fatbin', the embedded device code), or of a
    DLL's section."""
    if pe_info.is_pe(path):
        return pe_info.section_data(path, name)
    elf = _elf(path)
    try:
        section = elf.get_section_by_name(name)
        return section.data() if section is not None else None
    finally:
        elf.stream.close()


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version))


def newest_version(path: Path, prefix: str) -> str | None:
    """Newest required version with this prefix ('GLIBC_', 'GLIBCXX_', 'CXXABI_')."""
    return newest_of(symbol_versions(path), prefix)


def newest_of(versions: dict[str, list[str]], prefix: str) -> str | None:
    """newest_version of symbol_versions already read (the gates read them once per file)."""
    found = [
        v
        for names in versions.values()
        for v in names
        if v.startswith(prefix) and re.fullmatch(re.escape(prefix) + r"[\d.]+", v)
    ]
    return max(found, key=version_key) if found else None


def find_cuda_tool(name: str) -> str | None:
    """A CUDA binary tool (nvdisasm) on PATH, in the CUDA toolkit, or from NVIDIA's PyPI
    wheels (nvidia-cuda-nvdisasm)."""
    candidates = [shutil.which(name)]
    for env in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(env):
            candidates.append(os.path.join(os.environ[env], "bin", name))
    candidates.append(f"/usr/local/cuda/bin/{name}")
    paths = sysconfig.get_paths()
    for base in dict.fromkeys([paths["purelib"], paths["platlib"], *sys.path]):
        candidates.append(os.path.join(base, "nvidia", "cu13", "bin", name))
    return next((c for c in candidates if c and os.access(c, os.X_OK)), None)


# ------------------------------------------------------------------ the fatbin
# Layout (as nvcc and nvFatbin write it; NVIDIA documents no struct, fatbinary_section.h
# only the wrapper): a 16-byte header (magic, version, header size, size of the entries),
# then entries, each a header followed by its payload (a cubin or PTX text). A .nv_fatbin
# section holds one fatbin after the other, 8-byte aligned: the build embeds one per op and dtype
# (buildtools/device_code.py), each entry named after its op (nvFatbin's identifier, which
# cuobjdump prints as my_add.sm_90.cubin), under the symbol cee_fatbin_<library>.
FATBIN_MAGIC = 0xBA55ED50
FATBIN_HEADER = struct.Struct("<IHHQ")
# kind, version, header size, payload size, compressed size, -, minor, major, arch
ENTRY_HEADER = struct.Struct("<HHIQII HHI")
ENTRY_NAME_OFFSET = 32  # uint32 offset of the identifier in the entry header, uint32 length
ENTRY_FLAGS_OFFSET = 40  # uint64 after the name offset/length
ENTRY_KINDS = {1: "ptx", 2: "sass"}
# The entry flag of a compressed payload: set by nvFatbin -compress=true (and nvcc
# --compress-mode), together with the compressed and decompressed sizes. Drivers before
# 550.54.14 cannot load such an entry.
FLAG_COMPRESSED = 0x2000
FATBIN_SYMBOL = "cee_fatbin_"  # + the library's name (buildtools/device_code.py)


@dataclass(frozen=True)
class FatbinEntry:
    kind: str  # "sass" or "ptx"
    arch: str  # "sm_90"
    flags: int
    payload: bytes
    name: str = ""  # the entry's identifier: the build's is its library (op_dtype)

    @property
    def compressed(self) -> bool:
        return bool(self.flags & FLAG_COMPRESSED)

    @property
    def toolkit(self) -> tuple[int, int] | None:
        """The CUDA of the compiler that made a cubin, what `cuobjdump -elf` prints as
        toolkit=: ELF ABI 7 keeps it in e_version (120 for CUDA 12.0); ABI 8 (sm_100 and
        newer) sets e_version 1 and names the release in its .note.nv.tkinfo note."""
        if self.kind != "sass" or self.compressed or self.payload[:4] != b"\x7fELF":
            return None
        (version,) = struct.unpack_from("<I", self.payload, 20)
        if version >= 10:
            return divmod(version, 10)
        note = re.search(rb"Cuda compilation tools, release (\d+)\.(\d+)", self.payload)
        return (int(note.group(1)), int(note.group(2))) if note else None

    @property
    def ptx_isa(self) -> tuple[int, int] | None:
        if self.kind != "ptx" or self.compressed:
            return None
        found = re.search(rb"^\.version (\d+)\.(\d+)", self.payload, re.M)
        return (int(found.group(1)), int(found.group(2))) if found else None


@dataclass(frozen=True)
class Fatbin:
    """One fatbin of a .nv_fatbin section: the build's are one library (op and dtype) each."""

    offset: int  # in the section
    size: int  # header and entries
    entries: list[FatbinEntry]

    @property
    def name(self) -> str:
        """The identifier every entry shares (the library's name), or "" (none, or mixed)."""
        names = {e.name for e in self.entries}
        return names.pop() if len(names) == 1 else ""

    def label(self, index: int) -> str:
        """How reports name it: its library, else its place in the section."""
        return self.name or f"fatbin #{index + 1} (unnamed)"

    def archs(self, kind: str) -> list[str]:
        """The archs of its SASS ("sass") or PTX ("ptx") entries, oldest first."""
        return sorted({e.arch for e in self.entries if e.kind == kind}, key=version_key)


def fatbins(data: bytes) -> list[Fatbin]:
    """Every fatbin in `data` (a .nv_fatbin section or a .fatbin file), in order. Zero bytes
    after the last one are padding, not a fatbin: a DLL's section is padded to the file
    alignment, and where its virtual size exceeds its raw data the loader fills zeros."""
    found, offset = [], 0
    while offset + FATBIN_HEADER.size <= len(data):
        magic, _, header_size, size = FATBIN_HEADER.unpack_from(data, offset)
        if magic == 0 and data.count(0, offset) == len(data) - offset:
            break
        if magic != FATBIN_MAGIC:
            raise RuntimeError(f"no fatbin at byte {offset} (magic {magic:#x})")
        entries = []
        entry, end = offset + header_size, offset + header_size + size
        while entry < end:
            kind, _, ehs, esize, _, _, _, _, arch = ENTRY_HEADER.unpack_from(data, entry)
            (flags,) = struct.unpack_from("<Q", data, entry + ENTRY_FLAGS_OFFSET)
            name_at, name_len = struct.unpack_from("<II", data, entry + ENTRY_NAME_OFFSET)
            name = ""
            if name_len and name_at + name_len <= ehs:
                raw = data[entry + name_at : entry + name_at + name_len]
                name = raw.split(b"\0")[0].decode(errors="replace")
            payload = data[entry + ehs : entry + ehs + esize]
            entries.append(
                FatbinEntry(ENTRY_KINDS.get(kind, str(kind)), f"sm_{arch}", flags, payload, name)
            )
            entry += ehs + esize
        found.append(Fatbin(offset, end - offset, entries))
        offset = (end + 7) // 8 * 8  # fatbins in one section are 8-byte aligned
    return found


def fatbin_entries(data: bytes) -> list[FatbinEntry]:
    """Every entry of every fatbin in `data` (a .nv_fatbin section or a .fatbin file)."""
    return [entry for fatbin in fatbins(data) for entry in fatbin.entries]


def fatbin_section(path: Path) -> str:
    """The section nvcc puts fatbins in: .nv_fatbin in an ELF file, .nv_fatb in a DLL."""
    return pe_info.FATBIN_SECTION if pe_info.is_pe(path) else ".nv_fatbin"


def embedded_fatbins(path: Path) -> list[Fatbin]:
    """The fatbins of the binary's fatbin section (.nv_fatbin; a DLL's .nv_fatb): one per
    library (op and dtype)."""
    name = fatbin_section(path)
    data = section_data(path, name)
    if data is None:
        raise RuntimeError(f"{Path(path).name} has no {name} section (no device code)")
    return fatbins(data)


def embedded_fatbin(path: Path) -> list[FatbinEntry]:
    """Every entry of every fatbin the binary embeds."""
    return [entry for fatbin in embedded_fatbins(path) for entry in fatbin.entries]


def fatbin_symbols(path: Path, libraries: list[str]) -> dict[str, tuple[int, int]] | None:
    """{library: (offset in .nv_fatbin, size)} of the symbol cee_fatbin_<library> of each of
    `libraries`, each looked up by its exact name in the symbol table (hidden symbols:
    .symtab, which only a full strip removes); one without its symbol is left out. None
    where there is no table to look in: a stripped binary, or a DLL (a PE image keeps no
    symbol sizes; its fatbins are told apart by their entries' names alone)."""
    if pe_info.is_pe(path):
        return None
    elf = _elf(path)
    try:
        names = [s.name for s in elf.iter_sections()]
        symtab = elf.get_section_by_name(".symtab")
        if ".nv_fatbin" not in names or symtab is None:
            return None
        index = names.index(".nv_fatbin")
        base = elf.get_section(index)["sh_addr"]
        found = {}
        for library in libraries:
            symbols = symtab.get_symbol_by_name(FATBIN_SYMBOL + library) or []
            for sym in symbols:
                if sym["st_shndx"] == index:
                    found[library] = (sym["st_value"] - base, sym["st_size"])
        return found
    finally:
        elf.stream.close()


def cubin_kernels(cubin: bytes) -> set[str]:
    """The (mangled) names of the functions a cubin defines: its kernels."""
    elf = _elf_file_class()(io.BytesIO(cubin))
    symtab = elf.get_section_by_name(".symtab")
    return {
        sym.name
        for sym in (symtab.iter_symbols() if symtab is not None else [])
        if sym["st_info"]["type"] == "STT_FUNC"
        and sym["st_info"]["bind"] != "STB_LOCAL"
        and sym["st_shndx"] != "SHN_UNDEF"
    }


def device_code(path: Path) -> dict[str, list[str]]:
    """{'sass': ['sm_75', ...], 'ptx': ['sm_120', ...]} embedded in the binary's fatbins
    (in any of them: per library, embedded_fatbins)."""
    entries = embedded_fatbin(path)
    return {
        kind: sorted({e.arch for e in entries if e.kind == kind}, key=version_key)
        for kind in ("sass", "ptx")
    }


def cubin_toolkits(path: Path) -> dict[str, tuple[int, int]]:
    """{'sm_90': (12, 0), ...}: the CUDA version of the compiler that made each cubin (of
    every library; cubins_by_toolkit keeps each)."""
    return {e.arch: e.toolkit for e in embedded_fatbin(path) if e.toolkit}


def cubins_by_toolkit(path: Path) -> list[tuple[str, str, tuple[int, int]]]:
    """[(library, 'sm_90', (12, 0)), ...]: each cubin of each library, with its CUDA."""
    return [
        (fatbin.label(i), e.arch, e.toolkit)
        for i, fatbin in enumerate(embedded_fatbins(path))
        for e in fatbin.entries
        if e.toolkit
    ]


def ptx_isa_versions(path: Path) -> dict[str, tuple[int, int]]:
    """{'sm_120': (8, 8)}: the PTX ISA version (`.version`) of each embedded PTX (the newest
    over the libraries)."""
    found: dict[str, tuple[int, int]] = {}
    for e in embedded_fatbin(path):
        if e.ptx_isa:
            found[e.arch] = max(found.get(e.arch, e.ptx_isa), e.ptx_isa)
    return found


def compressed_entries(path: Path) -> list[str]:
    """'my_add sass sm_90', 'my_add ptx sm_120', ... for every compressed entry (none may
    be: < 550)."""
    return [
        f"{fatbin.label(i)} {e.kind} {e.arch}"
        for i, fatbin in enumerate(embedded_fatbins(path))
        for e in fatbin.entries
        if e.compressed
    ]


def disassemble(entry: FatbinEntry) -> str:
    """nvdisasm's SASS listing of one cubin."""
    tool = find_cuda_tool("nvdisasm")
    if tool is None:
        raise ToolMissing("SASS needs nvdisasm: pip install nvidia-cuda-nvdisasm")
    with tempfile.TemporaryDirectory() as tmp:
        cubin = Path(tmp) / f"{entry.arch}.cubin"
        cubin.write_bytes(entry.payload)
        result = subprocess.run([tool, str(cubin)], capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"nvdisasm {entry.arch} failed: {result.stderr.strip()}")
    return result.stdout


@contextmanager
def extension_in(path: Path):
    """Yields the path of the compiled library: `path` itself, or extracted from a wheel,
    where it is the one ELF file (found by content, whatever its name)."""
    path = Path(path)
    if path.is_dir():
        inside = sorted(p.name for p in path.iterdir() if p.suffix == ".whl" or ".so" in p.name)
        hint = f": name one of {inside}" if inside else ": name a wheel (.whl) or a .so"
        raise RuntimeError(f"{path} is a directory{hint}")
    if path.suffix != ".whl":
        require_elf(path)
        yield path
        return
    with zipfile.ZipFile(path) as wheel, tempfile.TemporaryDirectory() as tmp:
        files = [n for n in wheel.namelist() if not n.endswith("/")]
        names = [n for n in files if is_binary(wheel.open(n).read(4))]
        if len(names) != 1:
            raise RuntimeError(f"{path.name}: expected one library (ELF or DLL), found {names}")
        so = Path(wheel.extract(names[0], tmp))
        require_elf(so)
        yield so


def elf_errors() -> tuple[type[BaseException], ...]:
    """pyelftools' exception for a damaged ELF file (truncated, bad tables)."""
    try:
        from elftools.common.exceptions import ELFError
    except ImportError:
        return ()
    return (ELFError,)


def is_binary(head: bytes) -> bool:
    """An ELF file or a PE (Windows) one, by its first bytes."""
    return head.startswith(b"\x7fELF") or pe_info.is_pe(head)


def require_elf(path: Path) -> None:
    """Refuses, with a plain reason, what no ELF (or PE) tool can read whole: neither at all,
    or one cut short (the tools' own errors on such input are tracebacks or 'Memory
    allocation failure')."""
    data = Path(path).read_bytes()
    if pe_info.is_pe(data):
        problem = pe_info.pe_problem(data)
        if problem:
            raise RuntimeError(f"{Path(path).name} is not a readable DLL ({problem})")
        return
    if not data.startswith(b"\x7fELF"):
        raise RuntimeError(f"{Path(path).name} is neither a wheel (.whl) nor an ELF shared library")
    problem = elf_problem(data)
    if problem:
        raise RuntimeError(f"{Path(path).name} is not a readable ELF shared object ({problem})")


def elf_problem(data: bytes) -> str | None:
    """Why these bytes are not a whole ELF shared object, or None: checked against the
    file's size before any tool parses it (a truncated file makes parsers crash)."""
    ELFFile = _elf_file_class()  # noqa: N806 - pyelftools' class, named as it names it
    size = len(data)
    if not data.startswith(b"\x7fELF"):
        return f"it does not start with the ELF magic (first bytes {data[:4]!r})"
    try:
        elf = ELFFile(io.BytesIO(data))
        header = elf.header
        ends = {
            "the program headers": header["e_phoff"] + header["e_phnum"] * header["e_phentsize"],
            "the section headers": header["e_shoff"] + header["e_shnum"] * header["e_shentsize"],
        }
        for what, end in ends.items():
            if end > size:
                return f"truncated: {what} end at byte {end}, the file has {size} bytes"
        for segment in elf.iter_segments():
            end = segment["p_offset"] + segment["p_filesz"]
            if end > size:
                kind = segment["p_type"]
                return f"truncated: segment {kind} ends at byte {end}, the file has {size}"
        for section in elf.iter_sections():
            end = section["sh_offset"] + section["sh_size"]
            if section["sh_type"] != "SHT_NOBITS" and end > size:
                return f"truncated: section {section.name} ends at byte {end}, the file has {size}"
        if elf.get_section_by_name(".dynamic") is None:
            return "it has no .dynamic section: not a shared library"
    # Whatever a malformed file makes pyelftools raise (ELFError, struct.error, ...) means
    # the same: not a readable ELF; never a traceback.
    except Exception as exc:
        return f"pyelftools cannot parse it: {exc}"
    return None
