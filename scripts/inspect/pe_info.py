"""Facts about a Windows DLL (PE/COFF), the Windows wheel's library, read by pefile (PyPI):
what binary_info reads from an ELF file, for a PE one. binary_info dispatches here by the
file's first bytes."""

from __future__ import annotations

import io
from pathlib import Path

PE_MAGIC = b"MZ"
# IMAGE_FILE_HEADER.Machine -> the CPU as a wheel's platform tag ends (win_amd64, win_arm64).
MACHINES = {0x8664: "amd64", 0xAA64: "arm64", 0x14C: "32"}
IMAGE_FILE_DLL = 0x2000
# nvcc's section for fatbins in a Windows image (8 bytes at most); .nv_fatbin on Linux.
FATBIN_SECTION = ".nv_fatb"


def is_pe(path_or_data: Path | bytes) -> bool:
    if isinstance(path_or_data, bytes | bytearray):
        return bytes(path_or_data[:2]) == PE_MAGIC
    with open(path_or_data, "rb") as f:
        return f.read(2) == PE_MAGIC


def _pe(path_or_data: Path | bytes):
    import pefile

    data = path_or_data if isinstance(path_or_data, bytes) else Path(path_or_data).read_bytes()
    pe = pefile.PE(data=data, fast_load=True)
    pe.parse_data_directories(
        directories=[
            pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_IMPORT"],
            pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_EXPORT"],
        ]
    )
    return pe


def imports(path: Path) -> dict[str, list[str]]:
    """{DLL name: [imported names]} (an import by ordinal reads '#<ordinal>')."""
    pe = _pe(path)
    return {
        entry.dll.decode(): [i.name.decode() if i.name else f"#{i.ordinal}" for i in entry.imports]
        for entry in getattr(pe, "DIRECTORY_ENTRY_IMPORT", [])
    }


def imported_libraries(path: Path) -> list[str]:
    return list(imports(path))


def imported_symbols(path: Path) -> list[str]:
    return sorted({name for names in imports(path).values() for name in names})


def exported_symbols(path: Path) -> list[str]:
    pe = _pe(path)
    exports = getattr(pe, "DIRECTORY_ENTRY_EXPORT", None)
    return sorted(s.name.decode() for s in exports.symbols if s.name) if exports else []


def section_data(path: Path, name: str) -> bytes | None:
    """A section's bytes as the loader maps them: its raw data cut or zero-filled to its
    virtual size."""
    for section in _pe(path).sections:
        if section.Name.rstrip(b"\0").decode(errors="replace") == name:
            data = section.get_data()
            size = section.Misc_VirtualSize or len(data)
            return data[:size] + b"\0" * (size - len(data))
    return None


def cpu(data: bytes) -> str:
    """'amd64' (or another platform-tag ending) from the PE header's Machine field."""
    import pefile

    machine = pefile.PE(data=data, fast_load=True).FILE_HEADER.Machine
    return MACHINES.get(machine, hex(machine))


def pe_problem(data: bytes) -> str | None:
    """Why these bytes are not a whole Windows DLL, or None: checked against the file's
    size, as elf_problem does for an ELF file."""
    import pefile

    size = len(data)
    if not data.startswith(PE_MAGIC):
        return f"it does not start with the PE magic MZ (first bytes {data[:4]!r})"
    try:
        pe = pefile.PE(data=io.BytesIO(data).getvalue(), fast_load=True)
        for section in pe.sections:
            end = section.PointerToRawData + section.SizeOfRawData
            if end > size:
                name = section.Name.rstrip(b"\0").decode(errors="replace")
                return f"truncated: section {name} ends at byte {end}, the file has {size}"
        if not pe.FILE_HEADER.Characteristics & IMAGE_FILE_DLL:
            return "it is no DLL (IMAGE_FILE_DLL is not set): a program, not a library"
    # Whatever a malformed file makes pefile raise means the same: not a readable DLL.
    except Exception as exc:
        return f"pefile cannot parse it: {exc}"
    return None
