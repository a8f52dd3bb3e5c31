"""The build record the wheel carries (written by buildtools/build_ext.py, never by hand)."""

from __future__ import annotations

import json
from pathlib import Path

RECORD_PATH = Path(__file__).with_name("_build_info.json")


def load_build_info() -> dict | None:
    """The record as a dict, or None when the extension was never built here."""
    try:
        return json.loads(RECORD_PATH.read_text())
    except FileNotFoundError:
        return None
