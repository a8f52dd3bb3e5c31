"""Helpers for the C source the build generates (cee_generated.h)."""

from __future__ import annotations


def c_string(text: str) -> str:
    """`text` as a C string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
