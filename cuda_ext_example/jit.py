"""JIT build for development: compile csrc/ on the fly with torch.utils.cpp_extension.

    from cuda_ext_example import jit
    ops = jit.load("path/to/checkout/csrc")       # or `make jit`
    ops.my_fast_add(a, b)                           # torch.ops.cuda_ext_example_jit.*

The same sources as the wheel, built for this machine's GPU only, with torch's
own toolchain (g++ and libstdc++ here: fine for a local build, not for a wheel).
The ops register under the namespace `cuda_ext_example_jit`, so they load next
to the installed wheel, and edits are picked up by the next load() in a new
process (torch caches builds by source hash in ~/.cache/torch_extensions).
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from .ops import register_python_parts

NAMESPACE = "cuda_ext_example_jit"
_registered = False


def default_source_dir() -> Path:
    env = os.environ.get("CUDA_EXT_EXAMPLE_SRC")
    return Path(env) if env else Path(__file__).resolve().parent.parent / "csrc"


def arch_flags() -> list[str]:
    """SASS for each visible GPU (fast to build); PTX for sm_75 without a GPU."""
    if not torch.cuda.is_available():
        return ["-gencode", "arch=compute_75,code=compute_75"]
    caps = sorted({torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())})
    return [f"-gencode=arch=compute_{a}{b},code=sm_{a}{b}" for a, b in caps]


def load(source_dir: str | os.PathLike | None = None, verbose: bool = False):
    """Builds (or reuses the cached build of) the sources; returns torch.ops.<NAMESPACE>."""
    global _registered
    from torch.utils import cpp_extension

    src = Path(source_dir) if source_dir else default_source_dir()
    if not (src / "ops.cpp").exists():
        raise FileNotFoundError(
            f"{src} has no ops.cpp: pass the csrc/ directory of a cuda_ext_example checkout "
            "(or set CUDA_EXT_EXAMPLE_SRC)"
        )
    defines = [
        f"-DCEE_NAMESPACE={NAMESPACE}",
        "-DTORCH_TARGET_VERSION=0x020a000000000000",
        "-DPy_LIMITED_API=0x030A0000",
    ]
    cpp_extension.load(
        name=NAMESPACE,
        sources=[str(src / "ops.cpp"), str(src / "add_kernels.cu")],
        extra_cflags=["-O2", *defines],
        extra_cuda_cflags=["-O3", *arch_flags()],
        extra_include_paths=[str(src)],
        is_python_module=False,
        verbose=verbose,
    )
    if not _registered:
        register_python_parts(NAMESPACE)
        _registered = True
    return getattr(torch.ops, NAMESPACE)
