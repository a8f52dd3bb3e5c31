"""Gates on what the wheel says of itself: WHEEL and METADATA against the filename, the
files it carries, the build record and pyproject.toml.

Installers trust these files, not the binary: a wheel whose WHEEL says purelib, whose
METADATA names another version or lacks the torch requirement installs without a word
and fails later, on import or on the next upgrade. Each check returns its problem or
None; the gate raises the first with that problem's fix.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable
from email.message import Message
from email.parser import Parser
from pathlib import Path

from packaging.metadata import ExceptionGroup, InvalidMetadata, Metadata
from packaging.requirements import Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.tags import Tag, parse_tag
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from buildtools import config

from .failure import GateFailure
from .wheel_files import binary_names, dist_info_text, read_build_record

REBUILD = "never edit or rename a built wheel: rebuild and repair it (make repair)"
# The CPUs of a manylinux tag, as the ELF header's e_machine names them.
MACHINES = {"EM_X86_64": "x86_64", "EM_AARCH64": "aarch64"}


def wheel_fields(wheel: Path) -> Message:
    return Parser().parsestr(dist_info_text(wheel, "WHEEL"))


def filename_parts(wheel: Path) -> tuple[str, Version, frozenset[Tag]]:
    try:
        name, version, _, tags = parse_wheel_filename(wheel.name)
    except InvalidWheelFilename as exc:
        raise GateFailure(
            "wheel-file", f"{wheel.name} is no wheel filename ({exc})", REBUILD
        ) from None
    return name, version, tags


def elf_cpu(data: bytes) -> str:
    """'x86_64' or 'aarch64' (or pyelftools' EM_ name) from an ELF header; 'amd64' (as
    win_amd64 ends) from a PE header."""
    from elftools.elf.elffile import ELFFile

    from scripts.inspect import pe_info

    if pe_info.is_pe(data):
        return pe_info.cpu(data)
    machine = ELFFile(io.BytesIO(data)).header["e_machine"]
    return MACHINES.get(machine, machine)


# ----------------------------------------------------------------------- WHEEL


def purelib_problem(wheel: Path) -> str | None:
    value = wheel_fields(wheel)["Root-Is-Purelib"]
    if str(value).strip().lower() == "false":
        return None
    return (
        f"WHEEL says Root-Is-Purelib: {value}, but the wheel carries compiled code "
        f"({', '.join(binary_names(wheel)) or 'none'}): installers put a purelib wheel where "
        "pure-Python code goes, which is not the platform folder on systems that split the two"
    )


def tags_problem(wheel: Path) -> str | None:
    """WHEEL's Tag lines against the filename's tags: pip decides by the filename, and
    the installed WHEEL must say the same."""
    lines = wheel_fields(wheel).get_all("Tag") or []
    in_wheel = frozenset(tag for line in lines for tag in parse_tag(line.strip()))
    in_name = filename_parts(wheel)[2]
    if in_wheel == in_name:
        return None
    return (
        f"WHEEL's tags {sorted(map(str, in_wheel))} are not the filename's "
        f"{sorted(map(str, in_name))}"
    )


def contents_problem(wheel: Path) -> str | None:
    """Every binary of the wheel is for the CPU its platform tags name."""
    tags = filename_parts(wheel)[2]
    with zipfile.ZipFile(wheel) as zf:
        cpus = {name: elf_cpu(zf.read(name)) for name in binary_names(wheel)}
    wrong = [
        f"{name} is for {cpu}"
        for name, cpu in cpus.items()
        if not all(tag.platform.endswith(f"_{cpu}") for tag in tags)
    ]
    if not wrong:
        return None
    return f"the tags name {sorted({t.platform for t in tags})}, but " + ", ".join(wrong)


# -------------------------------------------------------------------- METADATA


def metadata(wheel: Path) -> Metadata:
    try:
        return Metadata.from_email(dist_info_text(wheel, "METADATA"), validate=True)
    except (ExceptionGroup, InvalidMetadata) as exc:  # packaging groups what it finds
        causes = getattr(exc, "exceptions", [exc])
        raise GateFailure(
            "metadata",
            "METADATA is not valid core metadata: " + "; ".join(map(str, causes)),
            REBUILD,
        ) from None


def name_version_problem(wheel: Path, cfg: config.BuildConfig) -> str | None:
    meta = metadata(wheel)
    name, version, _ = filename_parts(wheel)
    said = {
        "Name": (canonicalize_name(meta.name), name, canonicalize_name(config.project()["name"])),
        "Version": (Version(str(meta.version)), version, Version(cfg.version)),
    }
    wrong = [
        f"METADATA {field} {meta_value}, the filename's {filename_value}, "
        f"pyproject.toml's {declared}"
        for field, (meta_value, filename_value, declared) in said.items()
        if not meta_value == filename_value == declared
    ]
    return "; ".join(wrong) or None


def _at_least(value: object) -> SpecifierSet | None:
    try:
        return SpecifierSet(f">={value}")
    except InvalidSpecifier:
        return None


def _torch(requirements: list[str | Requirement]) -> list[SpecifierSet]:
    """The specifiers of every unconditional torch requirement."""
    parsed = [r if isinstance(r, Requirement) else Requirement(r) for r in requirements]
    return [r.specifier for r in parsed if canonicalize_name(r.name) == "torch" and not r.marker]


def _requirement_problem(
    field: str, in_metadata: list, declared: list, floor: tuple[str, str], recorded: object
) -> str:
    """'' when METADATA says exactly >= the floor, as pyproject.toml [project] declares.
    The record is shown, not judged here: the build-record gate checks it against the
    same floor, and a record that lies is refused there, for that."""
    key, value = floor
    want = _at_least(value)
    if in_metadata == declared == [want]:
        return ""
    return (
        f"METADATA's {field} is {', '.join(map(str, in_metadata)) or 'missing'}, not {want}: "
        f"pyproject.toml declares {', '.join(map(str, declared)) or 'none'} ([project]) and "
        f"{key} {value} (the build record: {recorded})"
    )


def requirements_problem(wheel: Path, cfg: config.BuildConfig) -> str | None:
    """The torch requirement and Requires-Python: the oldest torch whose stable ABI the
    binary uses and the oldest CPython the Python code runs on."""
    meta = metadata(wheel)
    record = read_build_record(wheel)
    project = config.project()
    python = [meta.requires_python] if meta.requires_python else []
    declared_python = (
        [SpecifierSet(project["requires-python"])] if "requires-python" in project else []
    )
    problems = [
        _requirement_problem(
            "torch requirement",
            _torch(meta.requires_dist or []),
            _torch(project.get("dependencies", [])),
            ("torch-target", cfg.torch_target),
            record.get("torch_target"),
        ),
        _python_problem(python, declared_python, record.get("requires_python")),
    ]
    return "; ".join(p for p in problems if p) or None


def _python_problem(in_metadata: list, declared: list, recorded: object) -> str:
    """'' when METADATA's Requires-Python is pyproject.toml's: the library uses no CPython
    API, so the floor is the Python code's, declared once in [project] requires-python."""
    if declared and in_metadata == declared:
        return ""
    return (
        f"METADATA's Requires-Python is {', '.join(map(str, in_metadata)) or 'missing'}, not "
        f"pyproject.toml's {', '.join(map(str, declared)) or 'none'} ([project] "
        f"requires-python; the build record: {recorded})"
    )


# ---------------------------------------------------------------------- gates

WHEEL_CHECKS: list[tuple[Callable[[Path], str | None], str]] = [
    (
        purelib_problem,
        "never edit WHEEL: rebuild and repair the wheel (make repair); setuptools writes "
        "Root-Is-Purelib: false for a distribution with an extension module",
    ),
    (
        tags_problem,
        "never rename a wheel: repair it again (make repair), and auditwheel names the file "
        "after the tags it writes into WHEEL",
    ),
    (
        contents_problem,
        "build the wheel for the CPU its binary is for: make wheel (ARCH=aarch64 for "
        "aarch64), then make repair",
    ),
]

METADATA_CHECKS: list[tuple[Callable[[Path, config.BuildConfig], str | None], str]] = [
    (
        name_version_problem,
        "never rename a wheel or edit its METADATA: the name and version come from "
        "pyproject.toml [project]; change them there and rebuild (make repair)",
    ),
    (
        requirements_problem,
        'keep dependencies = ["torch>=T"] with T = [tool.cuda_ext_example] torch-target in '
        "pyproject.toml [project], and requires-python there; rebuild (make repair), which "
        "writes both into METADATA",
    ),
]


def _first_problem(gate: str, checks, *args) -> None:
    for check, fix in checks:
        problem = check(*args)
        if problem:
            raise GateFailure(gate, problem, fix)


def gate_wheel_file(wheel: Path) -> None:
    _first_problem("wheel-file", WHEEL_CHECKS, wheel)


def gate_metadata(wheel: Path, cfg: config.BuildConfig) -> None:
    _first_problem("metadata", METADATA_CHECKS, wheel, cfg)
