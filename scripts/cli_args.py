"""Argument checks the tools' command lines share (the release's and the lab's)."""

from __future__ import annotations

import zipfile
from pathlib import Path


def file_problem(path: Path) -> str | None:
    """Why `path` is no file to read ("no such file", "not a file": a folder), or None."""
    if path.is_file():
        return None
    return "no such file" if not path.exists() else "not a file"


def wheel_problem(path: Path) -> str | None:
    """What makes `path` no wheel file (missing, a folder, not a .whl zip), or None: checked
    before slow work (pip, venvs, gates), each of which would fail on it with a traceback."""
    if problem := file_problem(path):
        return problem
    if path.suffix != ".whl" or not zipfile.is_zipfile(path):
        return "not a wheel (a .whl zip file)"
    return None
