"""The CUDA compilers the build calls, through their C APIs with ctypes: NVRTC (CUDA C++ to
SASS or PTX) and nvFatbin (SASS and PTX of several archs into one fatbin).

Why NVRTC: the wheel must run on every driver >= 525, so its device code must come from a
CUDA 12 compiler, and PyPI has no CUDA 12 nvcc, only NVRTC and nvFatbin
(nvidia-cuda-nvrtc-cu12, nvidia-nvfatbin-cu12). The libraries and headers come from those
PyPI packages only, never from a system toolkit, so the build needs no CUDA installation.
Each SASS arch is compiled by the NVRTC of the CUDA pyproject.toml declares for it (the
oldest that knows it: 12.0, fetched pinned by buildtools/nvrtc_fetch.py with its own
headers; the rest and the PTX by the 12.9 build requirement).
"""

from __future__ import annotations

import contextlib
import ctypes
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from . import nvrtc_fetch

# site-packages/nvidia/<package>/<path> of the pinned CUDA 12.9 PyPI packages.
NVRTC_LIB = ("cuda_nvrtc", "lib/libnvrtc.so.12")
NVFATBIN_LIB = ("nvfatbin", "lib/libnvfatbin.so.12")
INCLUDE_DIRS = (("cuda_runtime", "include"), ("cuda_cccl", "include"))


class DeviceCodeError(RuntimeError):
    pass


class CompileError(DeviceCodeError):
    """NVRTC refused the source; the message ends with NVRTC's log (file and line)."""


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


def pack_fatbin(
    cubins: dict[str, bytes], ptx: dict[str, bytes], compress: bool = False, name: str = "cee"
) -> bytes:
    """One fatbin of the cubins and PTX ({'90': bytes}), uncompressed: compressed
    fatbins need driver >= 550, and the wheel promises 525 (compress=True exists only for
    the release gate's negative test). `name`: nvFatbin's identifier of each entry (the
    op's name)."""
    lib = ctypes.CDLL(str(pypi_path(*NVFATBIN_LIB)))
    lib.nvFatbinGetErrorString.restype = ctypes.c_char_p

    def check(status: int, what: str) -> None:
        if status != 0:
            raise DeviceCodeError(f"nvFatbin {what}: {lib.nvFatbinGetErrorString(status).decode()}")

    handle, ident = ctypes.c_void_p(), name.encode()
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
            check(lib.nvFatbinAddCubin(handle, cubin, len(cubin), arch.encode(), ident), arch)
        for arch, text in ptx.items():
            check(lib.nvFatbinAddPTX(handle, text, len(text), arch.encode(), ident, None), arch)
        size = ctypes.c_size_t()
        check(lib.nvFatbinSize(handle, ctypes.byref(size)), "size")
        buf = ctypes.create_string_buffer(size.value)
        check(lib.nvFatbinGet(handle, buf), "get")
        return buf.raw
    finally:
        lib.nvFatbinDestroy(ctypes.byref(handle))


@dataclass(frozen=True)
class Compiler:
    cuda: str
    nvrtc: Nvrtc
    includes: tuple[Path, ...]


# Compilers found (or given by the caller: the JIT's), by CUDA version, for this process and
# the workers it forks.
_REGISTERED: dict[str, Compiler] = {}


def register(compiler: Compiler) -> None:
    _REGISTERED[compiler.cuda] = compiler


def compiler_for(cuda: str) -> Compiler:
    """NVRTC <cuda> ("12.0"), found once per process."""
    if cuda not in _REGISTERED:
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
