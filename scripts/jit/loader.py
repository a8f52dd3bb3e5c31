"""JIT build for development: this checkout's csrc/ and ops/ built on the fly for this machine.

    from scripts import jit                        # from the repository root
    ops = jit.load()                               # or `make jit`
    ops.my_fast_add(a, b)                          # torch.ops.cuda_ext_example_jit.*

The same sources and the same path as the wheel: the device code is compiled by
NVRTC at run time (buildtools/device_code.py) into one cubin per library (the
wheel's: one per op and dtype) for this machine's GPU, and the host code (ops + driver-API
launcher) by torch's own C++ toolchain (torch.utils.cpp_extension), with each cubin as its
library's device image. NVRTC comes
from $CEE_NVRTC, the PyPI CUDA packages torch installed (libnvrtc.so.12 or .13), or the
CUDA toolkit. The ops register under the namespace `cuda_ext_example_jit`, so they load
next to the installed wheel, whose Python parts (autograd, vmap) they reuse; torch caches
host builds by source hash, so an edit of the device code alone rebuilds in seconds.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from buildtools import codegen, config, declarations, device_code, nvrtc
from cuda_ext_example.ops import register

NAMESPACE = "cuda_ext_example_jit"
_registered = False


def _nvrtc_candidates() -> list[tuple[Path, list[Path]]]:
    """(libnvrtc, include dirs with cuda_fp16.h and CCCL's nv/target), best first."""
    import sysconfig

    found = []
    if os.environ.get("CEE_NVRTC"):
        lib = Path(os.environ["CEE_NVRTC"])
        found.append((lib, [lib.parent.parent / "include", lib.parent.parent / "include/cccl"]))
    for base in dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib")):
        nv = Path(base) / "nvidia"
        found.append(
            (
                nv / "cuda_nvrtc/lib/libnvrtc.so.12",
                [nv / "cuda_runtime/include", nv / "cuda_cccl/include"],
            )
        )
        cu13 = nv / "cu13"
        found.append((cu13 / "lib/libnvrtc.so.13", [cu13 / "include", cu13 / "include/cccl"]))
    cuda = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))
    found.append((cuda / "lib64/libnvrtc.so", [cuda / "include", cuda / "include/cccl"]))
    return [
        (lib, [d for d in dirs if d.exists()])
        for lib, dirs in found
        if lib.exists() and any((d / "cuda_fp16.h").exists() for d in dirs)
    ]


def _nvrtc() -> tuple[Path, list[Path]]:
    candidates = _nvrtc_candidates()
    if not candidates:
        raise FileNotFoundError(
            "no NVRTC found: set CEE_NVRTC to a libnvrtc.so, or pip install "
            "nvidia-cuda-nvrtc-cu12 nvidia-cuda-runtime-cu12 nvidia-cuda-cccl-cu12"
        )
    return candidates[0]


def write_device_image(lib: Path, includes: list[Path], out: Path) -> str:
    """NVRTC -> one cubin per library (op and dtype) for this GPU; writes cee_generated.h,
    cee_op_hosts.h and device_image.cpp (each cubin as the launcher's cee_fatbin_<library>)."""
    compiler = nvrtc.Nvrtc(lib)
    major, minor = torch.cuda.get_device_capability()
    target = f"sm_{major}{minor}"
    version = "{}.{}".format(*compiler.version())
    name = f"NVRTC {version}"
    decl = declarations.load()
    images, lowered, _ = device_code.compile_kernels(
        decl, {target: nvrtc.Compiler(version, compiler, tuple(includes))}
    )
    cubins = {library: images[library][target] for library in decl.libraries}
    code = device_code.DeviceCode(cubins, lowered, name, [target])
    out.mkdir(parents=True, exist_ok=True)
    cfg = config.load(dev_spec="")
    kernels = device_code.instances(decl)
    summary = f"JIT SASS {target} from {lib}"
    # Rewritten only when they change, so torch's build cache sees unchanged files.
    _write_if_changed(out / "cee_generated.h", codegen.op_table(decl, kernels, code, cfg, summary))
    _write_if_changed(out / "cee_op_hosts.h", codegen.op_hosts(decl))
    text = "".join(
        f'extern "C" alignas(8) const unsigned char {codegen.FATBIN_SYMBOL.format(library)}[] '
        f"= {{{','.join(str(b) for b in cubin)}}};\n"
        for library, cubin in cubins.items()
    )
    _write_if_changed(out / "device_image.cpp", text)
    return f"{name} ({lib}), {target}, {len(cubins)} libraries"


def _write_if_changed(path: Path, text: str) -> None:
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def load(source_dir: str | os.PathLike | None = None, verbose: bool = False):
    """Builds (or reuses the cached build of) this checkout's csrc/ (`source_dir`, when
    given, must be it); returns torch.ops.<NAMESPACE>."""
    global _registered
    from torch.utils import cpp_extension

    src = Path(source_dir) if source_dir else device_code.CSRC
    if src.resolve() != device_code.CSRC.resolve():
        raise RuntimeError(
            f"this checkout's JIT build compiles its own {device_code.CSRC}, not {src}: run "
            "python -m lab.gpu.jit_check from the root of the checkout that holds it"
        )
    if not torch.cuda.is_available():
        raise RuntimeError("the JIT build compiles device code for this machine's GPU: none found")
    lib, includes = _nvrtc()
    generated = Path.home() / ".cache" / "cuda_ext_example" / "jit"
    compiled = write_device_image(lib, includes, generated)
    if verbose:
        print(f"device code: {compiled}")
    cuda_include = next(d for d in includes if (d / "cuda.h").exists())
    cfg = config.load()
    cpp_extension.load(
        name=NAMESPACE,
        sources=[
            str(p)
            for p in (
                src / "ops.cpp",
                src / "launcher.cpp",
                generated / "device_image.cpp",
            )
        ],
        extra_cflags=[
            "-O2",
            "-std=c++20",  # designated initializers in the generated op table
            "-ffp-contract=off",  # as the wheel's host code: fma only where a rule says so
            f"-DCEE_NAMESPACE={NAMESPACE}",
            f"-DTORCH_TARGET_VERSION={cfg.torch_target_hex}",
        ],
        extra_include_paths=[
            str(src),
            str(declarations.OPS_DIR),
            str(generated),
            str(cuda_include),
        ],
        extra_ldflags=["-ldl"],
        is_python_module=False,
        verbose=verbose,
    )
    if not _registered:
        # The wheel's declarations (the build record) name the ops; the JIT build must be
        # of the same declarations (a new op needs `make install` first).
        register(NAMESPACE)
        _registered = True
    return getattr(torch.ops, NAMESPACE)
