"""setuptools build_ext: NVRTC for the device code, zig for the host code and the link.

- Device code: every declared op's kernel instances (ops/*/ops.toml, ops/*/rule.h over
  csrc/elementwise_kernels.cuh) -> NVRTC 12.0 (the archs CUDA 12.0 knows) and 12.9 (the
  newer archs and the PTX) -> one fatbin per op (buildtools/device_code.py), embedded by
  an assembly file, with the generated op table cee_generated.h for the host code. CUDA 12
  device code runs on every driver >= 525.
- Host code: csrc/ops.cpp and csrc/custom_ops.cpp (torch ops), csrc/launch_shape_hooks.cpp
  (plain C functions for ctypes) and csrc/launcher.cpp (driver API), compiled by zig and
  linked against glibc 2.17 stubs with a static libc++: no libstdc++, no glibc newer than
  2.17, no CUDA runtime, so the result is really manylinux2014. No CPython header or symbol:
  torch loads the library (torch.ops.load_library), so the wheel is py3-none.
No nvcc and no CUDA toolkit: the CUDA parts come from pinned PyPI packages.
"""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
import time
from pathlib import Path

from setuptools.command.build_ext import build_ext

from . import config, cross, device_code, nvrtc_fetch, ops, toolchain

CSRC = config.ROOT / "csrc"
HOST_SOURCES = ("ops.cpp", "custom_ops.cpp", "launch_shape_hooks.cpp", "launcher.cpp")


def _run(cmd: list[str]) -> None:
    print("+", " ".join(str(c) for c in cmd), flush=True)
    subprocess.run([str(c) for c in cmd], check=True)


def include(path: Path | str, name: str) -> list[str]:
    """-I for a header folder that may live anywhere (a venv, a cache), mapped to a fixed
    name in the binary: headers' __FILE__ strings must not depend on where it is."""
    return [f"-I{path}", f"-ffile-prefix-map={path}={name}"]


def zig_cxx(cfg: config.BuildConfig, generated: Path, arch: str | None = None) -> list[str]:
    """zig c++ for the target (CPU and glibc floor, or Windows), with the include paths every
    host file needs."""
    target = arch or cross.target_arch()
    # A DLL exports what is marked dllexport; an ELF library what is visible.
    linux_only = [] if cross.is_windows(target) else ["-fPIC", "-fvisibility=hidden"]
    return [
        *toolchain.zig_command(),
        "c++",
        "-target",
        cross.zig_target(target, cfg.glibc),
        "-O2",
        "-std=c++17",
        *linux_only,
        # No absolute path of the checkout in the binary (__FILE__, symbols): the same
        # commit gives the same bytes wherever it is built.
        f"-ffile-prefix-map={config.ROOT}=.",
        # a * b + c is two roundings, as on the GPU (NVRTC --fmad=false): a rule that
        # wants one says fma(a, b, c) (csrc/element_math.h).
        "-ffp-contract=off",
        f"-I{CSRC}",
        f"-I{ops.OPS_DIR}",  # the ops' rules (rule.h), shared with the device code
        f"-I{generated}",
        # cuda.h and cudaTypedefs.h (types only; nothing is linked from CUDA).
        *include(device_code.pypi_path("cuda_runtime", "include"), "cuda/include"),
    ]


def torch_link_inputs(arch: str, torch_lib: Path, scratch: Path) -> list[str]:
    """What the link takes of torch and the system: libtorch_cpu.so and the loader's
    libraries, with csrc/exports.map as the version script; for Windows torch's import
    library torch_cpu.lib (the hooks are dllexport, nothing else is exported), and the
    DLL's own import library, which nobody links against, written to `scratch`, not next
    to the DLL in the package."""
    if cross.is_windows(arch):
        return [
            str(torch_lib / "torch_cpu.lib"),
            f"-Wl,--out-implib,{scratch / 'cuda_ext_example.lib'}",
        ]
    return [
        f"-L{torch_lib}",
        "-ltorch_cpu",
        "-ldl",
        "-lpthread",
        f"-Wl,--version-script={CSRC / 'exports.map'}",
    ]


def link_extension(cfg: config.BuildConfig, generated: Path, out: Path, arch: str) -> None:
    if arch == cross.host_arch():
        torch_include, torch_lib = toolchain.torch_paths()
    else:
        torch_include, torch_lib = cross.torch_paths(arch)
    _run(
        [
            *zig_cxx(cfg, generated, arch),
            "-shared",
            f"-DTORCH_TARGET_VERSION={cfg.torch_target_hex}",
            *include(torch_include, "torch/include"),
            *(CSRC / name for name in HOST_SOURCES),
            generated / "device_code.S",
            *torch_link_inputs(arch, torch_lib, generated),
            # No debug info in the shipped binary (symbols stay for inspection).
            "-Wl,--strip-debug",
            "-o",
            out,
        ]
    )


# What a wheel is built from: a change here, committed or not, tracked or new, is a change
# of the wheel (a new op folder not yet added to git included).
BUILD_INPUTS = ("csrc", "ops", "src", "buildtools", "tuning", "pyproject.toml", "setup.py")


def git_state(root: Path = config.ROOT) -> tuple[str, bool]:
    """(commit, dirty): dirty when any build input differs from the commit or is untracked."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        changes = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=all", "--", *BUILD_INPUTS],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return commit, bool(changes.strip())
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not built from a git checkout)", False


def build_time(dirty: bool) -> int:
    """A clean checkout's build carries the commit's time (SOURCE_DATE_EPOCH): same commit,
    same bytes. A build of uncommitted changes is of no commit: it carries the time it was
    made, so that a fresh build never looks as old as its last commit."""
    return int(time.time()) if dirty else config.source_date_epoch()


def _launch_shapes_record(ew: ops.Elementwise) -> dict:
    return {
        # [access bytes, block, accesses per thread, load flavour] (launch_shapes.Shape)
        "compiled": [[s.access, s.block, s.per_thread, s.load] for s in ew.vector_shapes],
        "tables": {t.gpu: t.measured for t in ew.launch_shapes.tables},
    }


def declared_record(cfg: config.BuildConfig, target: str) -> dict:
    """The record's fields that pyproject.toml and ops/*/ops.toml decide for a build target
    ('x86_64', 'aarch64', 'win_amd64'): what a wheel's record must say (the release gates
    compare it with these)."""
    compiler, compilers = device_code.compiler_names(device_code.targets_of(cfg))
    ew = ops.elementwise()
    return {
        # make wheel ARCHS=...: a few SASS archs for the author's loop; the gates refuse it.
        "dev_build": cfg.dev_build,
        "dtypes": [dtype.name for dtype in ew.dtypes],
        # The launch shapes compiled in, and the GPUs with a measured table
        # (tuning/launch_shapes.toml; doctor says which one this GPU takes).
        "launch_shapes": _launch_shapes_record(ew),
        # The Python side (wrappers, fakes, autograd, torch.func, doctor) is built from these.
        "ops": [op.record() for op in ops.declared_ops()],
        "custom_ops": [op.record() for op in device_code.every_op()[1]],
        # The device-code libraries in the launcher's order: one fatbin per op and dtype.
        "device_libraries": device_code.libraries(*device_code.every_op()),
        "device_compiler": compiler,
        # Which NVRTC made each target: {"sm_90": "NVRTC 12.0", "compute_120": "NVRTC 12.9"}.
        "device_compilers": compilers,
        "device_cuda": cfg.device_cuda,
        "min_driver": cfg.min_driver,
        "min_driver_cuda": cfg.min_driver_cuda,
        "sass_archs": [f"sm_{a}" for a in cfg.sass_archs],
        "ptx_arch": f"compute_{cfg.ptx_arch}" if cfg.ptx_arch else None,
        "torch_target": cfg.torch_target,
        # The library uses no CPython API: the wheel's tags, and the Python code's floor.
        "python_tags": config.PYTHON_TAGS,
        "requires_python": cfg.requires_python,
        # The compiled library in the package, which the loader hands to torch.
        "library": config.library_name(target),
        # A Windows DLL has no glibc floor.
        "glibc_floor": None if cross.is_windows(target) else cfg.glibc,
    }


def build_record(cfg: config.BuildConfig, code: device_code.DeviceCode) -> dict:
    """What the wheel was built with; read by `doctor`, `inspect`, the gates and the tests."""
    commit, dirty = git_state()
    record = {"version": cfg.version, "git_commit": commit, "git_dirty": dirty}
    record.update(declared_record(cfg, cross.target_arch()))
    # The compilers that ran (the gates check them against the declared ones).
    record["device_compiler"] = code.compiler
    record["device_compilers"] = code.compilers
    record["build_time_utc"] = datetime.datetime.fromtimestamp(
        build_time(dirty), datetime.timezone.utc
    ).isoformat(timespec="seconds")
    return record


def build_step(name: str, func, *args):
    """Runs one step of the build. On failure the tool's own error (NVRTC's log, zig's
    "file:line: error") is the last thing printed, then one line naming the step, and
    no Python traceback under it (SystemExit: setuptools and build pass it through)."""
    try:
        return func(*args)
    except (device_code.DeviceCodeError, nvrtc_fetch.FetchError, config.ConfigError) as exc:
        # (ops.OpDeclarationError is a ConfigError: a bad ops.toml names its file and fix.)
        print(str(exc).rstrip(), file=sys.stderr, flush=True)
    except subprocess.CalledProcessError:
        pass  # the tool printed its error itself
    raise SystemExit(f"error: building cuda_ext_example failed at: {name}")


def write_op_references(folder: Path) -> None:
    """ops/<rule>/reference.py, where an op's reference needs more than one torch call,
    into the package as cuda_ext_example.op_references.<rule> (doctor and the smoke test
    run it after install)."""
    if folder.exists():
        for old in folder.glob("*.py"):
            old.unlink()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "__init__.py").write_text(
        '"""The ops\' reference functions (ops/<rule>/reference.py), copied by the build."""\n'
    )
    for source in sorted(ops.OPS_DIR.glob("*/reference.py")):
        (folder / f"{source.parent.name}.py").write_bytes(source.read_bytes())


class ZigNvrtcBuildExt(build_ext):
    def get_ext_filename(self, fullname: str) -> str:
        """The library's own name (config.LIBRARY, or the Windows DLL's), not a CPython
        extension module's."""
        package = fullname.split(".")[:-1]
        return str(Path(*package, config.library_name(cross.target_arch())))

    def build_extension(self, ext) -> None:
        cfg = build_step("configuration (pyproject.toml, ARCHS)", config.load)
        # A bad declaration is its own step's failure, named with its file and key.
        build_step("op declarations (ops/*/ops.toml)", ops.declared_ops)
        generated = Path(self.build_temp).resolve() / "device_code"
        out = Path(self.get_ext_fullpath(ext.name))
        out.parent.mkdir(parents=True, exist_ok=True)

        targets = device_code.targets_of(cfg)
        code = build_step(
            "device code (NVRTC: ops/*/rule.h over csrc/elementwise_kernels.cuh)",
            device_code.write_device_code,
            generated,
            targets,
            cfg.arch_summary,
        )
        sizes = ", ".join(f"{name} {len(fatbin)}" for name, fatbin in code.fatbins.items())
        print(f"device code: {code.compiler}, {' '.join(code.targets)}; fatbin bytes: {sizes}")
        arch = cross.target_arch()
        build_step("host code and link (zig c++)", link_extension, cfg, generated, out, arch)

        record = out.parent / "_build_info.json"
        record.write_text(json.dumps(build_record(cfg, code), indent=2) + "\n")
        write_op_references(out.parent / "op_references")
        if self.inplace:
            print(f"built {out} and {record}")

    def get_outputs(self):
        # Let bdist_wheel pick up the build record and the references next to the extension.
        outputs = super().get_outputs()
        extra = []
        for o in outputs:
            folder = Path(o).parent
            extra.append(str(folder / "_build_info.json"))
            extra += [str(p) for p in sorted((folder / "op_references").glob("*.py"))]
        return outputs + extra
