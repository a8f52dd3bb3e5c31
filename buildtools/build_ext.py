"""setuptools build_ext that compiles csrc/ with nvcc and links with zig for glibc 2.17.

Two compilers, because neither can do the whole job (see ../shared/NOTES.md):
- nvcc (+ the system gcc as its host compiler) compiles the CUDA code. nvcc
  refuses zig's clang as host compiler.
- zig compiles the torch-facing host code and links the extension against
  glibc 2.17 stubs with a static libc++: the result needs no libstdc++ and no
  glibc newer than 2.17, so it is really manylinux2014.
"""

from __future__ import annotations

import datetime
import json
import subprocess
import sysconfig
from pathlib import Path

from setuptools.command.build_ext import build_ext

from . import config, toolchain

CSRC = config.ROOT / "csrc"


def _run(cmd: list[str]) -> None:
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def gencode_flags(cfg: config.BuildConfig) -> list[str]:
    flags = []
    for arch in cfg.sass_archs:
        flags += ["-gencode", f"arch=compute_{arch},code=sm_{arch}"]
    flags += ["-gencode", f"arch=compute_{cfg.ptx_arch},code=compute_{cfg.ptx_arch}"]
    return flags


def compile_cuda(cfg: config.BuildConfig, nvcc: Path, out: Path) -> None:
    _run(
        [
            str(nvcc),
            "-c",
            "-O3",
            "-std=c++17",
            "-Xcompiler",
            "-fPIC,-fvisibility=hidden",
            f'-DCEE_ARCH_LIST="{cfg.arch_summary}"',
            *gencode_flags(cfg),
            str(CSRC / "add_kernels.cu"),
            "-o",
            str(out),
        ]
    )


def link_extension(cfg: config.BuildConfig, cuda_obj: Path, cudart: Path, out: Path) -> None:
    torch_include, torch_lib = toolchain.torch_paths()
    _run(
        [
            *toolchain.zig_command(),
            "c++",
            "-target",
            f"x86_64-linux-gnu.{cfg.glibc}",
            "-shared",
            "-fPIC",
            "-O2",
            "-std=c++17",
            "-fvisibility=hidden",
            f"-DTORCH_TARGET_VERSION={cfg.torch_target_hex}",
            f"-DPy_LIMITED_API={cfg.py_limited_api_hex}",
            f"-I{torch_include}",
            f"-I{sysconfig.get_paths()['include']}",
            f"-I{CSRC}",
            str(CSRC / "ops.cpp"),
            str(cuda_obj),
            str(cudart),
            f"-L{torch_lib}",
            "-ltorch_cpu",
            "-ldl",
            "-lpthread",
            "-lrt",
            # No debug info in the shipped binary (symbols stay for inspection).
            "-Wl,--strip-debug",
            f"-Wl,--version-script={CSRC / 'exports.map'}",
            "-o",
            str(out),
        ]
    )


def git_state() -> tuple[str, bool]:
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=config.ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = bool(
            subprocess.run(
                ["git", "status", "--porcelain", "--untracked-files=no"],
                cwd=config.ROOT,
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
        )
        return commit, dirty
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not built from a git checkout)", False


def build_record(cfg: config.BuildConfig, nvcc: Path) -> dict:
    """What the wheel was built with; read by `doctor`, `inspect` and the tests."""
    commit, dirty = git_state()
    return {
        "version": cfg.version,
        "git_commit": commit,
        "git_dirty": dirty,
        "nvcc": toolchain.nvcc_version(nvcc),
        "sass_archs": [f"sm_{a}" for a in cfg.sass_archs],
        "ptx_arch": f"compute_{cfg.ptx_arch}",
        "torch_target": cfg.torch_target,
        "python_limited_api": cfg.python_limited_api,
        "glibc_floor": cfg.glibc,
        "build_time_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(
            timespec="seconds"
        ),
    }


class ZigNvccBuildExt(build_ext):
    def build_extension(self, ext) -> None:
        cfg = config.load()
        cuda = toolchain.cuda_root()
        nvcc = cuda / "bin" / "nvcc"
        cudart = toolchain.cudart_static(cuda)
        temp = Path(self.build_temp)
        temp.mkdir(parents=True, exist_ok=True)
        out = Path(self.get_ext_fullpath(ext.name))
        out.parent.mkdir(parents=True, exist_ok=True)

        cuda_obj = temp / "add_kernels.o"
        compile_cuda(cfg, nvcc, cuda_obj)
        link_extension(cfg, cuda_obj, cudart, out)

        record = out.parent / "_build_info.json"
        record.write_text(json.dumps(build_record(cfg, nvcc), indent=2) + "\n")
        if self.inplace:
            print(f"built {out} and {record}")

    def get_outputs(self):
        # Let bdist_wheel pick up the build record next to the extension.
        outputs = super().get_outputs()
        return outputs + [str(Path(o).parent / "_build_info.json") for o in outputs]
