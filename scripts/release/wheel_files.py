"""Gates that read the wheel as a zip of files, before any tool parses a binary in it:
RECORD against the files, grafted libraries, bytecode, build-machine paths, licenses.

Each returns nothing for a good wheel and raises GateFailure naming the file and the
fix. They come first in scripts/release/gates.py's order, so a wheel that is wrong at
this level is refused for that, not for whatever a later tool trips on.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import re
import sys
import tempfile
import zipfile
from email.parser import Parser
from pathlib import Path

from buildtools import config

from .gate_failure import GateFailure

# auditwheel copies the libraries it grafts into <package>.libs/ (hashed names).
GRAFT_FOLDER = re.compile(r"^[^/]+\.libs/")
SHARED_LIBRARY = re.compile(r"^lib[^/]*\.so(\.\d+)*$")
# RECORD lists every file with its hash except itself and its signatures.
UNHASHED = ("RECORD", "RECORD.jws", "RECORD.p7s")
# Where builds happen on Linux and macOS machines, CI runners included; plus, at run
# time, this checkout and this venv. A path of the build machine in a shipped file
# points nowhere on a user's machine and makes the same commit give other bytes.
BUILD_PATH_PREFIXES = ("/home/", "/tmp/", "/root/", "/Users/", "/var/tmp/", "/builds/")


def _names(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as zf:
        return [n for n in zf.namelist() if not n.endswith("/")]


def _dist_info(names: list[str]) -> str:
    folders = {n.split("/", 1)[0] for n in names if n.split("/", 1)[0].endswith(".dist-info")}
    if len(folders) != 1:
        raise GateFailure(
            "wheel-files",
            f"the wheel has {len(folders)} .dist-info folders ({sorted(folders)}), not one",
            "build the wheel with `make wheel` (setuptools writes exactly one)",
        )
    return folders.pop()


def grafted_libraries(names: list[str]) -> list[str]:
    """Shared libraries that are not our extension modules: what auditwheel grafted."""
    return [n for n in names if GRAFT_FOLDER.match(n) or SHARED_LIBRARY.match(Path(n).name)]


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
    with zipfile.ZipFile(wheel) as zf:
        metadata = Parser().parsestr(zf.read(f"{dist_info}/METADATA").decode())
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
