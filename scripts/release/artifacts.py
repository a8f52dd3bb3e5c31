"""Artifacts anyone can check: the same bytes from the same commit, and their checksums.

- SOURCE_DATE_EPOCH (the commit's time) fixes every timestamp: the wheel's zip entries
  (wheel, auditwheel honour it), the build record, and the sdist, which setuptools writes
  with the checkout's file times, so normalize_sdist rewrites it.
- SHA256SUMS lies beside the artifacts; after an upload, what the index serves is
  downloaded and checked against it.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import re
import tarfile
import urllib.request
from pathlib import Path

from .simple_index import project_files


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def write_sha256sums(files: list[Path], out: Path) -> Path:
    """`sha256sum`'s format: '<hex>  <name>' per line, sorted by name."""
    lines = sorted(f"{sha256(f)}  {Path(f).name}\n" for f in files)
    out.write_text("".join(lines))
    return out


# A line of `sha256sum`: 64 hex digits, a blank, then " " (text) or "*" (binary) and the name.
SUMS_LINE = re.compile(r"([0-9a-fA-F]{64}) [ *](.+)")


def read_sha256sums(path: Path) -> dict[str, str]:
    """{file name: sha256}; ValueError naming the file and line when it is not sha256sum's
    format (or lists nothing), OSError when it cannot be read."""
    try:
        text = Path(path).read_text()
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not a text file") from None
    sums = {}
    for number, line in enumerate(text.splitlines(), 1):
        match = SUMS_LINE.fullmatch(line)
        if match is None:
            if not line.strip():
                continue
            raise ValueError(f"{path} line {number} is not '<sha256>  <file name>': {line[:80]!r}")
        sums[match[2]] = match[1].lower()
    if not sums:
        raise ValueError(f"{path} lists no files")
    return sums


def normalize_sdist(path: Path, epoch: int) -> None:
    """Rewrites an sdist (.tar.gz) so that only its content decides its bytes: members
    sorted, every mtime = epoch, owner root/root with no names, gzip header time = epoch."""
    with tarfile.open(path, "r:gz") as src:
        members = sorted(src.getmembers(), key=lambda m: m.name)
        data = {m.name: src.extractfile(m).read() for m in members if m.isfile()}
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as dst:
        for member in members:
            member.mtime = epoch
            member.uid = member.gid = 0
            member.uname = member.gname = ""
            member.pax_headers = {}
            payload = data.get(member.name)
            dst.addfile(member, io.BytesIO(payload) if payload is not None else None)
    with (
        open(path, "wb") as out,
        gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=epoch, compresslevel=9) as gz,
    ):
        gz.write(raw.getvalue())


def verify_served(
    simple_url: str, expected: dict[str, str], project: str = "cuda_ext_example"
) -> list[str]:
    """Downloads every file of `expected` ({name: sha256}, read_sha256sums of SHA256SUMS,
    read before any network: a bad file is no index problem) from the index; returns the
    mismatches (or missing files), [] when the index serves exactly what was built."""
    served = project_files(simple_url, project)
    problems = []
    for name, digest in expected.items():
        if name not in served:
            problems.append(f"{name}: not on the index")
            continue
        with urllib.request.urlopen(served[name], timeout=120) as response:
            got = hashlib.sha256(response.read()).hexdigest()
        if got != digest:
            problems.append(f"{name}: the index serves sha256 {got}, built {digest}")
    return problems
