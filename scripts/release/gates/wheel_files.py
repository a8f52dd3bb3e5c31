"""Gates that read the wheel as a zip of files, before any tool parses a binary in it:
its zip entries, RECORD against the files, grafted libraries, bytecode, Python sources
that compile, build-machine paths, licenses.

Each returns nothing for a good wheel and raises GateFailure naming the file and the
fix. They come first in the gate table's order (table.py), so a wheel that is wrong at
this level is refused for that, not for whatever a later tool trips on.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import re
import stat
import sys
import tempfile
import zipfile
from collections import Counter
from email.parser import Parser
from pathlib import Path

from buildtools import config

from .failure import GateFailure

# auditwheel copies the libraries it grafts into <package>.libs/ (hashed names). A
# library elsewhere is no graft: the gates refuse it as an unexpected ELF file.
GRAFT_FOLDER = re.compile(r"^[^/]+\.libs/")
# RECORD lists every file with its hash except itself and its signatures.
UNHASHED = ("RECORD", "RECORD.jws", "RECORD.p7s")
# Where builds happen on Linux and macOS machines, CI runners included; plus, at run
# time, this checkout and this venv. A path of the build machine in a shipped file
# points nowhere on a user's machine and makes the same commit give other bytes.
BUILD_PATH_PREFIXES = ("/home/", "/tmp/", "/root/", "/Users/", "/var/tmp/", "/builds/")
# A binary is known by its first bytes, whatever its name: a library named helper.bin
# loads as well as one named helper.so. Windows DLLs (PE files) start with MZ.
ELF_MAGIC = b"\x7fELF"
PE_MAGIC = b"MZ"
BUILD_RECORD = "cuda_ext_example/_build_info.json"


def _names(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as zf:
        return [n for n in zf.namelist() if not n.endswith("/")]


def binary_names(wheel: Path) -> list[str]:
    """Every binary of the wheel (ELF, or PE: a Windows DLL or program), found by its magic
    bytes, not by its name."""
    names = _names(wheel)
    with zipfile.ZipFile(wheel) as zf:
        heads = {n: zf.open(n).read(len(ELF_MAGIC)) for n in names}
    return [n for n, head in heads.items() if head == ELF_MAGIC or head[:2] == PE_MAGIC]


def read_build_record(wheel: Path) -> dict:
    with zipfile.ZipFile(wheel) as zf:
        try:
            return json.loads(zf.read(BUILD_RECORD))
        except (KeyError, ValueError) as exc:
            raise GateFailure(
                "build-record",
                f"the wheel has no readable build record {BUILD_RECORD} ({exc})",
                "build with `make wheel` (buildtools/build_ext.py writes the record)",
            ) from None


def _dist_info(names: list[str]) -> str:
    folders = {n.split("/", 1)[0] for n in names if n.split("/", 1)[0].endswith(".dist-info")}
    if len(folders) != 1:
        raise GateFailure(
            "wheel-files",
            f"the wheel has {len(folders)} .dist-info folders ({sorted(folders)}), not one",
            "build the wheel with `make wheel` (setuptools writes exactly one)",
        )
    return folders.pop()


def dist_info_text(wheel: Path, file: str) -> str:
    """One file of the wheel's .dist-info (WHEEL, METADATA), as text."""
    dist_info = _dist_info(_names(wheel))
    with zipfile.ZipFile(wheel) as zf:
        try:
            return zf.read(f"{dist_info}/{file}").decode()
        except KeyError:
            raise GateFailure(
                "wheel-files",
                f"the wheel has no {dist_info}/{file}",
                "build the wheel with `make wheel` (setuptools writes it)",
            ) from None


def grafted_libraries(names: list[str]) -> list[str]:
    """The files auditwheel grafted (its <package>.libs/ folder)."""
    return [n for n in names if GRAFT_FOLDER.match(n) and not n.endswith("/")]


def _entry_kind(info: zipfile.ZipInfo) -> str | None:
    """'a symlink' (or another special file) from the entry's Unix mode, None for a
    regular file or folder: a wheel carries regular files only."""
    mode = info.external_attr >> 16
    if stat.S_ISLNK(mode):
        return "a symlink"
    if stat.S_IFMT(mode) in (0, stat.S_IFREG, stat.S_IFDIR):
        return None
    return f"a special file (mode {oct(stat.S_IFMT(mode))})"


def _outside(name: str) -> bool:
    """True for a path an installer would write outside site-packages: absolute, a drive,
    or a `..` component (either separator)."""
    parts = name.replace("\\", "/").split("/")
    return name.startswith(("/", "\\")) or bool(re.match(r"^[A-Za-z]:", name)) or ".." in parts


# Each zip-level fault: what it is, and the fix. Checked before RECORD is read (RECORD
# holds names and hashes only, so it can vouch for any of these).
ZIP_FAULTS = {
    "duplicate": (
        "duplicate zip entries (installers disagree on which copy they install)",
        "rebuild the wheel (make repair); never add files to a built wheel with `zip`, "
        "which appends a second copy of a name",
    ),
    "link": (
        "zip entries that are not regular files (an installer writes a link out as a file "
        "holding the target's path, or as a link that points anywhere)",
        "put the file itself in the package, not a link to it: check src/cuda_ext_example/ "
        "for links, then make repair",
    ),
    "outside": (
        "zip entries outside the wheel (an installer would write them outside "
        "site-packages, or refuse the wheel)",
        "rebuild the wheel (make repair: setuptools writes package-relative names); never "
        "add an entry with a leading /, a drive or a .. component",
    ),
}


def zip_entry_faults(wheel: Path) -> dict[str, list[str]]:
    """The wheel's zip entries that are duplicates, links (or other special files) or
    paths outside the install folder, by fault."""
    with zipfile.ZipFile(wheel) as zf:
        infos = zf.infolist()
        links = [
            f"{i.filename} is {kind}"
            + (f" to {zf.read(i)[:200].decode(errors='replace')!r}" if kind == "a symlink" else "")
            for i in infos
            if (kind := _entry_kind(i))
        ]
    counts = Counter(i.filename for i in infos)
    return {
        "duplicate": [f"{n} is in the zip {c} times" for n, c in counts.items() if c > 1],
        "link": links,
        "outside": [repr(n) for n in counts if _outside(n)],
    }


def gate_zip_entries(wheel: Path) -> None:
    found = zip_entry_faults(wheel)
    for fault, (what, fix) in ZIP_FAULTS.items():
        if found[fault]:
            raise GateFailure("zip-entries", f"{what}: {'; '.join(found[fault])}", fix)


def _record_hash(data: bytes) -> str:
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _read_record(zf: zipfile.ZipFile, dist_info: str) -> dict[str, tuple[str, str]]:
    text = zf.read(f"{dist_info}/RECORD").decode()
    return {row[0]: (row[1], row[2]) for row in csv.reader(io.StringIO(text)) if row}


def record_problems(wheel: Path) -> list[str]:
    """Every way RECORD and the files disagree: hash, size, missing on either side."""
    names = _names(wheel)
    dist_info = _dist_info(names)
    problems = []
    with zipfile.ZipFile(wheel) as zf:
        if f"{dist_info}/RECORD" not in names:
            return [f"{dist_info}/RECORD is missing"]
        record = _read_record(zf, dist_info)
        for name in names:
            if name.startswith(f"{dist_info}/") and name.rsplit("/", 1)[1] in UNHASHED:
                continue
            if name not in record:
                problems.append(f"{name} is in the wheel but not in RECORD")
                continue
            data = zf.read(name)
            want_hash, want_size = record[name]
            if want_hash != _record_hash(data):
                problems.append(
                    f"{name}: RECORD says {want_hash}, the file has {_record_hash(data)}"
                )
            elif want_size != str(len(data)):
                problems.append(f"{name}: RECORD says {want_size} bytes, the file has {len(data)}")
    problems += [
        f"{name} is in RECORD but not in the wheel" for name in record if name not in names
    ]
    return problems


def gate_record_matches_files(wheel: Path) -> None:
    problems = record_problems(wheel)
    if problems:
        raise GateFailure(
            "record",
            "the wheel's RECORD disagrees with its files: " + "; ".join(problems),
            "never edit a built wheel by hand: rebuild and repair it (make repair); to change "
            "a file of a wheel on purpose, `wheel unpack`, edit, `wheel pack` (rewrites RECORD)",
        )


def gate_nothing_grafted(wheel: Path) -> None:
    grafted = grafted_libraries(_names(wheel))
    if grafted:
        raise GateFailure(
            "grafted",
            f"a library was grafted into the wheel: {', '.join(grafted)} (torch and CUDA "
            "libraries come from the user's torch and driver; a second copy next to torch's "
            "breaks both)",
            "add it to the repair excludes (REPAIR_EXCLUDES in scripts/release/pipeline.py, "
            "auditwheel --exclude globs) and repair again (make repair)",
        )


def gate_no_bytecode(wheel: Path) -> None:
    stray = [n for n in _names(wheel) if "__pycache__/" in n or n.endswith((".pyc", ".pyo"))]
    if stray:
        raise GateFailure(
            "bytecode",
            f"the wheel carries compiled bytecode: {', '.join(stray)} (made for one Python "
            "version; pip compiles the sources at install for the user's)",
            "build from clean staging folders (`make clean`, then `make wheel`); keep "
            "byte-compiling off in the build",
        )


def python_syntax_errors(wheel: Path) -> list[str]:
    """Each Python file of the wheel that does not compile, with the line: pip only warns
    when its byte-compiling fails, and the import fails later on the user's machine."""
    errors = []
    with zipfile.ZipFile(wheel) as zf:
        for name in [n for n in _names(wheel) if n.endswith(".py")]:
            try:
                compile(zf.read(name), name, "exec", dont_inherit=True)
            except SyntaxError as exc:
                errors.append(f"{name}, line {exc.lineno}: {exc.msg}")
            except ValueError as exc:  # a NUL byte in the source
                errors.append(f"{name}: {exc}")
    return errors


def gate_python_compiles(wheel: Path) -> None:
    errors = python_syntax_errors(wheel)
    if errors:
        raise GateFailure(
            "python-syntax",
            "a Python file of the wheel does not compile: " + "; ".join(errors),
            "fix the source in src/ (`python -m py_compile FILE` shows the error) and rebuild "
            "(make repair); never edit a file of a built wheel",
        )


def build_path_markers() -> list[str]:
    """The strings that betray a build machine: the usual build folders, this checkout,
    this venv and this machine's temp folder."""
    markers = [*BUILD_PATH_PREFIXES, f"{config.ROOT}/", f"{tempfile.gettempdir()}/"]
    if sys.prefix != sys.base_prefix:  # a venv (a system prefix such as /usr is no build path)
        markers.append(f"{sys.prefix}/")
    return list(dict.fromkeys(markers))


def _context(data: bytes, start: int) -> str:
    """The path that starts at a match, up to a blank, a quote or a non-printable byte."""
    end = start
    while end < len(data) and 32 < data[end] < 127 and data[end] not in b"'\"`":
        end += 1
    return data[start : min(end, start + 100)].decode("ascii", "replace")


def build_paths_in(wheel: Path) -> list[str]:
    found = []
    markers = [m.encode() for m in build_path_markers()]
    with zipfile.ZipFile(wheel) as zf:
        for name in _names(wheel):
            data = zf.read(name)
            hits = sorted({_context(data, data.find(m)) for m in markers if m in data})
            found += [f"{name} contains {hit!r}" for hit in hits]
    return found


def gate_no_build_paths(wheel: Path) -> None:
    found = build_paths_in(wheel)
    if found:
        raise GateFailure(
            "build-paths",
            "a path of the build machine is inside the wheel's files: " + "; ".join(found),
            "map it away at build time (-ffile-prefix-map, as buildtools/build_ext.py does for "
            "the checkout, torch and Python headers) or keep the file out of the wheel; never "
            "write an absolute build path into a shipped file",
        )


def gate_license_files(wheel: Path) -> None:
    names = _names(wheel)
    dist_info = _dist_info(names)
    metadata = Parser().parsestr(dist_info_text(wheel, "METADATA"))
    declared = metadata.get_all("License-File") or []
    missing = [f for f in declared if f"{dist_info}/licenses/{f}" not in names]
    if not declared or missing:
        raise GateFailure(
            "license",
            f"the wheel's {dist_info} has no license file: METADATA declares "
            f"{declared or 'no License-File'}, missing from {dist_info}/licenses/: "
            f"{missing or 'nothing'}",
            'keep license-files = ["LICENSE"] in pyproject.toml [project] and LICENSE in the '
            "checkout; setuptools >= 77 copies it into .dist-info/licenses/ (make wheel)",
        )
