"""Loads the compiled ops, refusing a torch that is too old with a clear ImportError.

Without this check an old torch fails deep in the dynamic loader with
"undefined symbol: torch_..." (or torch's opaque "Could not load this library").
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from ._build_info import load_build_info

# `python -m cuda_ext_example doctor` must run even where the ops cannot load: that is
# when it is needed.
TOOL_MODULES = ("cuda_ext_example", "cuda_ext_example.__main__")


UNBUILT = "this cuda_ext_example is an unbuilt source tree (no build record, no compiled ops)"


def started_as_tool() -> bool:
    argv = getattr(sys, "orig_argv", [])
    return len(argv) >= 3 and argv[1] == "-m" and argv[2] in TOOL_MODULES


def version_tuple(version: str) -> tuple[int, int]:
    """'2.11.0+cu130' -> (2, 11); pre-releases count as their release."""
    match = re.match(r"(\d+)\.(\d+)", version)
    if not match:
        raise ValueError(f"cannot parse torch version {version!r}")
    return int(match.group(1)), int(match.group(2))


def check_torch_version(installed: str, minimum: str) -> None:
    if version_tuple(installed) < version_tuple(minimum):
        raise ImportError(
            f"cuda_ext_example needs torch>={minimum} (it is built for the LibTorch stable ABI "
            f"of torch {minimum}), but torch {installed} is installed. "
            f"Upgrade with: pip install -U 'torch>={minimum}'"
        )


def library_path(record: dict) -> Path:
    """The compiled ops: a shared library, not a CPython extension module, named in
    the build record. torch loads it (torch.ops.load_library) and its static initializers
    register the ops; it uses no CPython symbol, so one wheel (py3-none) serves every
    CPython, free-threaded ones included. Its name (buildtools/config.py LIBRARY) is none
    an importer takes for an extension module: CPython's takes any <identifier>.so in a
    package for one (`import cuda_ext_example._C` would load a _C.so, registering the
    ops, then fail for want of PyInit__C; pkgutil and pydoc would list it as a module)."""
    return Path(__file__).resolve().with_name(record["library"])


def load_extension() -> dict:
    """Checks torch, loads the compiled library (which registers the ops), returns the record."""
    import torch

    record = load_build_info()
    if record is None:
        raise ImportError(
            f"{UNBUILT}: run `make install` in the checkout, or `pip install cuda_ext_example`"
        )
    check_torch_version(torch.__version__, record["torch_target"])
    try:
        # Registers torch.ops.cuda_ext_example.*; loading it twice is a no-op.
        torch.ops.load_library(library_path(record))
    except OSError as exc:
        # torch says only "Could not load this library: PATH"; the loader's words (an
        # undefined symbol, a missing file) are its cause.
        reason = exc.__cause__ or exc
        raise ImportError(
            f"cuda_ext_example could not load its compiled library with torch "
            f"{torch.__version__}: {reason}. Run `python -m cuda_ext_example doctor` for details."
        ) from exc
    return record
