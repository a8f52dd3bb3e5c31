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


def read_sha256sums(path: Path) -> dict[str, str]:
    return {
        name: digest
        for digest, name in (line.split("  ", 1) for line in path.read_text().splitlines())
    }


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


def verify_served(simple_url: str, sums: Path, project: str = "cuda_ext_example") -> list[str]:
    """Downloads every file of SHA256SUMS from the index; returns the mismatches (or
    missing files), [] when the index serves exactly what was built."""
    served = project_files(simple_url, project)
    problems = []
    for name, digest in read_sha256sums(sums).items():
        if name not in served:
            problems.append(f"{name}: not on the index")
            continue
        with urllib.request.urlopen(served[name], timeout=120) as response:
            got = hashlib.sha256(response.read()).hexdigest()
        if got != digest:
            problems.append(f"{name}: the index serves sha256 {got}, built {digest}")
    return problems
