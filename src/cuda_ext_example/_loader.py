"""Loads the compiled ops, refusing a torch that is too old with a clear ImportError.

Without this check an old torch fails deep in the dynamic loader with
"undefined symbol: torch_..." (or torch's opaque "Could not load this library").
"""

from __future__ import annotations

import re
import sys

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


def load_extension() -> dict:
    """Checks torch, imports cuda_ext_example._C (which registers the ops), returns the record."""
    import torch

    record = load_build_info()
    if record is None:
        raise ImportError(
            f"{UNBUILT}: run `make install` in the checkout, or `pip install cuda_ext_example`"
        )
    check_torch_version(torch.__version__, record["torch_target"])
    try:
        from . import _C  # noqa: F401  (importing it registers torch.ops.cuda_ext_example.*)
    except ImportError as exc:
        raise ImportError(
            f"cuda_ext_example could not load its compiled extension with torch "
            f"{torch.__version__}: {exc}. Run `python -m cuda_ext_example doctor` for details."
        ) from exc
    return record
