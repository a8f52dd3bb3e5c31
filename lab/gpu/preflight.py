"""Before a GPU tool of the Makefile runs: can this Python import what the tool needs?

    python -m lab.gpu.preflight TARGET MODULE [MODULE ...]

Prints one line with the fix and exits 1 where a module is missing, so that `make bench`
on a fresh clone (no .venv yet: python3 is the system's) says what to do instead of ending
in a ModuleNotFoundError traceback. Standard library only: it runs where torch is not."""

from __future__ import annotations

import importlib.util
import sys


def missing_modules(modules: list[str]) -> list[str]:
    """The modules of the list this interpreter cannot import (found by spec, not imported:
    importing torch would take seconds)."""
    missing = []
    for name in modules:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):  # a parent package missing, or a broken one
            found = False
        if not found:
            missing.append(name)
    return missing


def advice(target: str, missing: list[str], python: str) -> str:
    return (
        f"make {target}: {python} cannot import {', '.join(missing)}. The GPU tools run with "
        "a Python that has CUDA torch and this package: run `make install` first (the "
        f"targets then use .venv's Python), or `make {target} PYTHON=/path/to/python` "
        "with cuda_ext_example installed there"
    )


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__.splitlines()[2].strip(), file=sys.stderr)
        return 2
    target, modules = argv[0], argv[1:]
    missing = missing_modules(modules)
    if missing:
        print(advice(target, missing, sys.executable), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
