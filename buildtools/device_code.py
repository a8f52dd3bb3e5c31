"""Device code: csrc/add_kernels.cu -> NVRTC 12.0 / 12.9 -> SASS + PTX -> one fatbin (nvFatbin).

Why NVRTC: the wheel must run on every driver >= 525, so its device code must come
from a CUDA 12 compiler, and PyPI has no CUDA 12 nvcc, only NVRTC and nvFatbin
(nvidia-cuda-nvrtc-cu12, nvidia-nvfatbin-cu12). Both are called through their C
APIs with ctypes; the libraries and headers come from those PyPI packages only,
never from a system toolkit, so the build needs no CUDA installation.

Each SASS arch is compiled by the NVRTC of the CUDA pyproject.toml declares for it (the
oldest that knows it: 12.0, fetched pinned by buildtools/nvrtc_fetch.py, with its own
12.0 headers; the rest and the PTX by the 12.9 build requirement). The targets compile in
parallel worker processes, one per CPU: threads gained nothing (measured: NVRTC runs one
compile at a time per process).

The kernels' instances are the (shape, dtype) pairs of csrc/kernel_table.h; each
becomes an NVRTC name expression, and NVRTC's lowered (mangled) name for it goes
into a generated header for the launcher, so no name is ever mangled by hand.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import re
import sys
import sysconfig
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from . import config, nvrtc_fetch

CSRC = config.ROOT / "csrc"
KERNEL_SOURCE = CSRC / "add_kernels.cu"
KERNEL_TABLE = CSRC / "kernel_table.h"
# NVRTC's name for the program: its errors then read "csrc/add_kernels.cu(12): error: ...".
PROGRAM_NAME = "csrc/add_kernels.cu"

# site-packages/nvidia/<package>/<path> of the pinned CUDA 12.9 PyPI packages.
NVRTC_LIB = ("cuda_nvrtc", "lib/libnvrtc.so.12")
NVFATBIN_LIB = ("nvfatbin", "lib/libnvfatbin.so.12")
INCLUDE_DIRS = (("cuda_runtime", "include"), ("cuda_cccl", "include"))


class DeviceCodeError(RuntimeError):
    pass


# ------------------------------------------------------------------ the table


@dataclass(frozen=True)
class Dtype:
    id: str
    device_type: str
    size: int
    scalar_type: str  # torch's C++ ScalarType
    name: str  # torch's Python name: torch.<name>


@dataclass(frozen=True)
class Shape:
    id: str
    access_bytes: int  # 0: one element per thread (add_simple_kernel)
    block: int
    per_thread: int

    def expression(self, dtype: Dtype) -> str:
        if self.access_bytes == 0:
            return f"cee::add_simple_kernel<{dtype.device_type}>"
        return (
            f"cee::add_vectorized_kernel<{dtype.device_type}, {self.access_bytes}, "
            f"{self.block}, {self.per_thread}>"
        )


def _macro_entries(text: str, macro: str) -> list[list[str]]:
    body = re.search(rf"#define {macro}\(X\)((?:.*\\\n)*.*)", text)
    if body is None:
        raise DeviceCodeError(f"{KERNEL_TABLE.name}: no #define {macro}(X)")
    return [
        [part.strip() for part in entry.split(",")]
        for entry in re.findall(r"\bX\(([^)]*)\)", body.group(1))
    ]


def kernel_table(header: Path = KERNEL_TABLE) -> tuple[list[Shape], list[Dtype]]:
    """The shapes and dtypes, in the order of the C enums of kernel_table.h."""
    text = header.read_text()
    dtypes = [
        Dtype(i, t, int(s), st, name)
        for i, t, s, st, name in _macro_entries(text, "CEE_FOR_EACH_DTYPE")
    ]
    shape_entries = _macro_entries(text, "CEE_FOR_EACH_SHAPE")
    shapes = [Shape(i, int(a), int(b), int(p)) for i, a, b, p in shape_entries]
    return shapes, dtypes


# ------------------------------------------------------------- the libraries


def _site_packages() -> list[Path]:
    """Where the build's Python finds packages: its site-packages, then sys.path."""
    paths = sysconfig.get_paths()
    return [Path(p) for p in dict.fromkeys([paths["purelib"], paths["platlib"], *sys.path]) if p]


def pypi_path(package: str, sub: str) -> Path:
    for base in _site_packages():
        path = base / "nvidia" / package / sub
        if path.exists():
            return path
    raise DeviceCodeError(
        f"nvidia/{package}/{sub} not found in {[str(p) for p in _site_packages()]}: "
        "install the build requirements (pip install -r requirements/build.in)"
    )


def include_dirs() -> list[Path]:
    return [pypi_path(pkg, sub) for pkg, sub in INCLUDE_DIRS]


@contextlib.contextmanager
def _keep_thread_locale():
    """NVRTC 12.0's compile switches the calling thread to a locale of its own (uselocale)
    and leaves it there: Python then decodes every later subprocess output as ASCII.
    Restores the thread's locale afterwards."""
    libc = ctypes.CDLL(None)
    libc.uselocale.restype = ctypes.c_void_p
    libc.uselocale.argtypes = [ctypes.c_void_p]
    saved = libc.uselocale(None)
    try:
        yield
    finally:
        libc.uselocale(saved)


class Nvrtc:
    """The NVRTC C API, as much of it as the build needs."""

    def __init__(self, path: Path | None = None):
        self.path = Path(path) if path else pypi_path(*NVRTC_LIB)
        self.lib = ctypes.CDLL(str(self.path))
        self.lib.nvrtcGetErrorString.restype = ctypes.c_char_p

    def check(self, status: int, what: str, log: str = "") -> None:
        if status != 0:
            message = self.lib.nvrtcGetErrorString(status).decode()
            raise DeviceCodeError(f"NVRTC {what}: {message}\n{log}".rstrip())

    def version(self) -> tuple[int, int]:
        major, minor = ctypes.c_int(), ctypes.c_int()
        self.check(self.lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "version")
        return major.value, minor.value

    def compile(
        self, source: str, name: str, options: list[str], expressions: list[str], target: str
    ) -> tuple[bytes, dict[str, str]]:
        """Compiles once; returns (CUBIN if target starts with sm_, else PTX, lowered names)."""
        lib = self.lib
        prog = ctypes.c_void_p()
        self.check(
            lib.nvrtcCreateProgram(
                ctypes.byref(prog), source.encode(), name.encode(), 0, None, None
            ),
            "create program",
        )
        try:
            for expr in expressions:
                self.check(lib.nvrtcAddNameExpression(prog, expr.encode()), f"add {expr}")
            args = [o.encode() for o in [*options, f"--gpu-architecture={target}"]]
            with _keep_thread_locale():
                status = lib.nvrtcCompileProgram(
                    prog, len(args), (ctypes.c_char_p * len(args))(*args)
                )
            self.check(status, f"compile for {target}", self._log(prog))
            lowered = {}
            for expr in expressions:
                out = ctypes.c_char_p()
                self.check(
                    lib.nvrtcGetLoweredName(prog, expr.encode(), ctypes.byref(out)),
                    f"lowered name of {expr}",
                )
                lowered[expr] = out.value.decode()
            kind = "CUBIN" if target.startswith("sm_") else "PTX"
            size = ctypes.c_size_t()
            self.check(getattr(lib, f"nvrtcGet{kind}Size")(prog, ctypes.byref(size)), kind)
            buf = ctypes.create_string_buffer(size.value)
            self.check(getattr(lib, f"nvrtcGet{kind}")(prog, buf), kind)
            return buf.raw, lowered
        finally:
            lib.nvrtcDestroyProgram(ctypes.byref(prog))

    def _log(self, prog) -> str:
        size = ctypes.c_size_t()
        self.lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        buf = ctypes.create_string_buffer(size.value)
        self.lib.nvrtcGetProgramLog(prog, buf)
        return buf.value.decode(errors="replace")


def pack_fatbin(cubins: dict[str, bytes], ptx: dict[str, bytes], compress: bool = False) -> bytes:
    """One fatbin of the cubins and PTX ({'90': bytes}), uncompressed: compressed
    fatbins need driver >= 550, and the wheel promises 525 (compress=True exists only for
    the release gate's negative test)."""
    lib = ctypes.CDLL(str(pypi_path(*NVFATBIN_LIB)))
    lib.nvFatbinGetErrorString.restype = ctypes.c_char_p

    def check(status: int, what: str) -> None:
        if status != 0:
            raise DeviceCodeError(f"nvFatbin {what}: {lib.nvFatbinGetErrorString(status).decode()}")

    handle = ctypes.c_void_p()
    options = [b"-64", b"-host=linux"]
    options += [b"-compress=true", b"-compress-all"] if compress else [b"-compress=false"]
    check(
        lib.nvFatbinCreate(
            ctypes.byref(handle), (ctypes.c_char_p * len(options))(*options), len(options)
        ),
        "create",
    )
    try:
        for arch, cubin in cubins.items():
            check(lib.nvFatbinAddCubin(handle, cubin, len(cubin), arch.encode(), b"cee"), arch)
        for arch, text in ptx.items():
            check(lib.nvFatbinAddPTX(handle, text, len(text), arch.encode(), b"cee", None), arch)
        size = ctypes.c_size_t()
        check(lib.nvFatbinSize(handle, ctypes.byref(size)), "size")
        buf = ctypes.create_string_buffer(size.value)
        check(lib.nvFatbinGet(handle, buf), "get")
        return buf.raw
    finally:
        lib.nvFatbinDestroy(ctypes.byref(handle))


# ------------------------------------------------------------------ the build


@dataclass
class DeviceCode:
    fatbin: bytes
    lowered: dict[str, str]  # name expression -> mangled kernel name
    compiler: str  # e.g. "NVRTC 12.0 + 12.9"
    targets: list[str] = field(default_factory=list)  # sm_XX (SASS) and compute_XX (PTX)
    compilers: dict[str, str] = field(default_factory=dict)  # target -> "NVRTC 12.0"


@dataclass(frozen=True)
class Compiler:
    cuda: str
    nvrtc: Nvrtc
    includes: tuple[Path, ...]


# Compilers given to compile_kernels by the caller (the JIT's), found by the workers.
_REGISTERED: dict[str, Compiler] = {}


def compiler_for(cuda: str) -> Compiler:
    """NVRTC <cuda> ("12.0"), found once per process."""
    if cuda in _REGISTERED:
        return _REGISTERED[cuda]
    _REGISTERED[cuda] = _find_compiler(cuda)
    return _REGISTERED[cuda]


def _find_compiler(cuda: str) -> Compiler:
    """NVRTC <cuda> with its own CUDA headers: the build requirement's (site-packages), or
    a pinned download (nvrtc_fetch) for an older CUDA that cannot be installed beside it."""
    installed = Nvrtc()
    if "{}.{}".format(*installed.version()) == cuda:
        return Compiler(cuda, installed, tuple(include_dirs()))
    root = nvrtc_fetch.fetch(cuda)
    nvrtc = Nvrtc(root / "nvidia" / "cuda_nvrtc" / "lib" / "libnvrtc.so.12")
    found = "{}.{}".format(*nvrtc.version())
    if found != cuda:
        raise DeviceCodeError(f"{nvrtc.path} is NVRTC {found}, not {cuda}: rm -rf build/nvrtc-*")
    return Compiler(cuda, nvrtc, (root / "nvidia" / "cuda_runtime" / "include",))


class CompileError(DeviceCodeError):
    """NVRTC refused the source; the message ends with NVRTC's log (file and line)."""


def _compile_one(target: str, cuda: str, source: str, expressions: list[str]):
    """One target, in a worker process (which finds its NVRTC through compiler_for)."""
    compiler = compiler_for(cuda)
    # csrc/ for add_as_torch.h, the element rule shared with the host code.
    options = ["--std=c++17", f"--include-path={CSRC}"]
    options += [f"--include-path={d}" for d in compiler.includes]
    try:
        return compiler.nvrtc.compile(source, PROGRAM_NAME, options, expressions, target)
    except DeviceCodeError as exc:
        raise CompileError(f"NVRTC {compiler.cuda}, {target}: {exc}") from None


def _compile_all(targets: dict[str, str], source: str, expressions: list[str], jobs: int):
    """{target: (image, lowered names)}: in `jobs` forked workers, or here for one job."""
    if jobs <= 1:
        return {t: _compile_one(t, cuda, source, expressions) for t, cuda in targets.items()}
    # fork: the workers inherit the loaded NVRTCs (compiler_for's cache) and sys.path.
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        futures = {
            target: pool.submit(_compile_one, target, cuda, source, expressions)
            for target, cuda in targets.items()
        }
        return {target: future.result() for target, future in futures.items()}


def compile_kernels(
    targets: dict[str, Compiler], jobs: int | None = None
) -> tuple[dict[str, bytes], dict[str, str]]:
    """{target: CUBIN (sm_XX) or PTX (compute_XX)} and the lowered names; one NVRTC
    compile per target, `jobs` at a time (default: one per CPU). A failure raises the
    first failing target's error, in the order given."""
    shapes, dtypes = kernel_table()
    expressions = [shape.expression(dtype) for shape in shapes for dtype in dtypes]
    source = KERNEL_SOURCE.read_text()
    for compiler in targets.values():  # the workers find these in compiler_for's cache
        _REGISTERED[compiler.cuda] = compiler
    # $CEE_NVRTC_JOBS=1: one at a time (to measure what the workers save).
    jobs = jobs or int(os.environ.get("CEE_NVRTC_JOBS") or 0) or os.cpu_count() or 1
    workers = max(1, min(jobs, len(targets)))
    cudas = {target: compiler.cuda for target, compiler in targets.items()}
    results = _compile_all(cudas, source, expressions, workers)
    images, lowered = {}, None
    for target, (image, names) in results.items():
        if lowered is not None and names != lowered:
            raise DeviceCodeError(f"NVRTC lowered names differ for {target}")
        images[target], lowered = image, names
    return images, lowered


def compile_device_code(targets: dict[str, str], compress: bool = False) -> DeviceCode:
    """{target: CUDA} (e.g. {"sm_90": "12.0", "compute_120": "12.9"}) -> one fatbin, each
    target from its CUDA's NVRTC (compress: only for the release gate's negative test)."""
    compilers = {target: compiler_for(cuda) for target, cuda in targets.items()}
    images, lowered = compile_kernels(compilers)
    cubins = {t[3:]: code for t, code in images.items() if t.startswith("sm_")}
    ptx = {t[8:]: code for t, code in images.items() if t.startswith("compute_")}
    compiler, per_target = compiler_names(targets)
    return DeviceCode(
        pack_fatbin(cubins, ptx, compress), lowered, compiler, list(targets), per_target
    )


def compiler_names(targets: dict[str, str]) -> tuple[str, dict[str, str]]:
    """{target: CUDA} -> ("NVRTC 12.0 + 12.9", {"sm_80": "NVRTC 12.0", ...}): how the build
    record names the compilers (those that ran, and those pyproject.toml declares)."""
    cudas = sorted(set(targets.values()), key=lambda v: tuple(int(x) for x in v.split(".")))
    return "NVRTC " + " + ".join(cudas), {t: f"NVRTC {cuda}" for t, cuda in targets.items()}


def targets_of(cfg: config.BuildConfig) -> dict[str, str]:
    """{target: CUDA} of a build configuration: each SASS arch from its declared CUDA,
    the PTX from device-cuda."""
    return {target: cfg.cuda_of(target) for target in cfg.targets}


def kernel_names_header(code: DeviceCode, arch_summary: str) -> str:
    """The launcher's table: cee_kernel_names[shape][dtype], in kernel_table.h's order."""
    shapes, dtypes = kernel_table()
    rows = []
    for shape in shapes:
        names = ",\n".join(f'     "{code.lowered[shape.expression(d)]}"' for d in dtypes)
        rows.append(f"    {{/* {shape.id} */\n{names}}}")
    summary = f"{arch_summary} ({code.compiler})"
    return (
        "// Generated by buildtools/device_code.py: do not edit.\n"
        "#pragma once\n"
        '#include "kernel_table.h"\n'
        f'#define CEE_DEVICE_CODE "{summary}"\n'
        "static const char* const cee_kernel_names[CEE_NUM_SHAPES][CEE_NUM_DTYPES] = {\n"
        + ",\n".join(rows)
        + "};\n"
    )


def fatbin_assembly(fatbin: Path) -> str:
    """Embeds the fatbin in the .nv_fatbin section, where nvcc puts its fatbins, so that
    cuobjdump, compute-sanitizer and Nsight find it; `cee_fatbin` is its (hidden) start."""
    return (
        '\t.section .nv_fatbin, "a"\n'
        "\t.balign 8\n"
        "\t.globl cee_fatbin\n"
        "\t.hidden cee_fatbin\n"
        "cee_fatbin:\n"
        f'\t.incbin "{fatbin}"\n'
        '\t.section .note.GNU-stack, "", @progbits\n'
    )


def write_device_code(
    out_dir: Path, targets: dict[str, str], arch_summary: str, compress: bool = False
) -> DeviceCode:
    """Writes add_kernels.fatbin, device_code.S (embeds it) and device_code.h (names)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    code = compile_device_code(targets, compress)
    fatbin = out_dir / "add_kernels.fatbin"
    fatbin.write_bytes(code.fatbin)
    (out_dir / "device_code.S").write_text(fatbin_assembly(fatbin.resolve()))
    (out_dir / "device_code.h").write_text(kernel_names_header(code, arch_summary))
    return code
