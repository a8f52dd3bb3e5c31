"""setuptools build_ext: NVRTC for the device code, zig for the host code and the link.

- The declarations (ops/*/ops.toml) are read once (buildtools/declarations.py) and passed to
  every step below.
- Device code: every op's kernel instances -> NVRTC 12.0 (the archs CUDA 12.0 knows) and
  12.9 (the newer archs and the PTX), each program compiled once per content (the device-code
  cache) -> one fatbin per op and dtype (buildtools/device_code.py), embedded by an assembly
  file, with the generated op table and host functions (buildtools/codegen.py). CUDA 12
  device code runs on every driver >= 525.
- Host code: csrc/ops.cpp (the torch registrations), csrc/launch_shape_hooks.cpp
  (plain C functions for ctypes) and csrc/launcher.cpp (driver API), compiled by zig and
  linked against glibc 2.17 stubs with a static libc++: no libstdc++, no glibc newer than
  2.17, no CUDA runtime, so the result is really manylinux2014. No CPython header or symbol:
  torch loads the library (torch.ops.load_library), so the wheel is py3-none.
No nvcc and no CUDA toolkit: the CUDA parts come from pinned PyPI packages.
"""

from __future__ import annotations

import datetime
import json
import shutil
import subprocess
import sys
import time
import zlib
from pathlib import Path

from setuptools.command.build_ext import build_ext

from . import codegen, config, cross, declarations, device_code, nvrtc, nvrtc_fetch, toolchain

CSRC = config.ROOT / "csrc"
HOST_SOURCES = ("ops.cpp", "launch_shape_hooks.cpp", "launcher.cpp")


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
        "-std=c++20",  # designated initializers in the generated op table
        *linux_only,
        # No absolute path of the checkout in the binary (__FILE__, symbols): the same
        # commit gives the same bytes wherever it is built.
        f"-ffile-prefix-map={config.ROOT}=.",
        # a * b + c is two roundings, as on the GPU (NVRTC --fmad=false): a rule that
        # wants one says fma(a, b, c) (csrc/element_math.h).
        "-ffp-contract=off",
        f"-I{CSRC}",
        f"-I{declarations.OPS_DIR}",  # the ops' rules and hosts, shared with the device code
        f"-I{generated}",
        # cuda.h and cudaTypedefs.h (types only; nothing is linked from CUDA).
        *include(nvrtc.pypi_path("cuda_runtime", "include"), "cuda/include"),
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


def _launch_shapes_record(decl: declarations.Declarations) -> dict:
    return {
        # [access bytes, block, accesses per thread, load flavour] (launch_shapes.Shape)
        "compiled": [[s.access, s.block, s.per_thread, s.load] for s in decl.vector_shapes],
        "tables": {t.gpu: t.measured for t in decl.launch_shapes.tables},
    }


def declared_record(
    cfg: config.BuildConfig, target: str, decl: declarations.Declarations | None = None
) -> dict:
    """The record's fields that pyproject.toml and ops/*/ops.toml decide for a build target
    ('x86_64', 'aarch64', 'win_amd64'): what a wheel's record must say (the release gates
    compare it with these)."""
    decl = decl or declarations.load()
    compiler, compilers = device_code.compiler_names(device_code.targets_of(cfg))
    return {
        # make wheel ARCHS=...: a few SASS archs for the author's loop; the gates refuse it.
        "dev_build": cfg.dev_build,
        "dtypes": [dtype.name for dtype in decl.dtypes],
        # The launch shapes compiled in, and the GPUs with a measured table
        # (tuning/launch_shapes.toml; doctor says which one this GPU takes).
        "launch_shapes": _launch_shapes_record(decl),
        # Every op: the Python side (functions, autograd, torch.func, checks) is made from it.
        "ops": [op.record() for op in decl.ops],
        # The device-code libraries in the launcher's order: one fatbin per op and dtype.
        "device_libraries": decl.libraries,
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


def build_record(
    cfg: config.BuildConfig, decl: declarations.Declarations, code: device_code.DeviceCode
) -> dict:
    """What the wheel was built with; read by `doctor`, `inspect`, the gates and the tests."""
    commit, dirty = git_state()
    record = {"version": cfg.version, "git_commit": commit, "git_dirty": dirty}
    record.update(declared_record(cfg, cross.target_arch(), decl))
    # The compilers that ran (the gates check them against the declared ones).
    record["device_compiler"] = code.compiler
    record["device_compilers"] = code.compilers
    record["build_time_utc"] = datetime.datetime.fromtimestamp(
        build_time(dirty), datetime.timezone.utc
    ).isoformat(timespec="seconds")
    return record


def write_device_code(
    out_dir: Path,
    decl: declarations.Declarations,
    targets: dict[str, str],
    arch_summary: str,
    compress: bool = False,
) -> device_code.DeviceCode:
    """Compiles the device code and writes what the host code is built from:
    fatbin/<library>.fatbin, device_code.S (embeds them), cee_generated.h (the op table),
    cee_op_hosts.h (the host functions), and source/<op>.cu (what NVRTC compiled, to read)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    code = device_code.compile_device_code(decl, targets, compress)
    for folder in ("fatbin", "source"):  # no file of a library the ops no longer have
        shutil.rmtree(out_dir / folder, ignore_errors=True)
        (out_dir / folder).mkdir()
    paths = {}
    for name, fatbin in code.fatbins.items():
        paths[name] = (out_dir / "fatbin" / f"{name}.fatbin").resolve()
        paths[name].write_bytes(fatbin)
    (out_dir / "device_code.S").write_text(codegen.fatbin_assembly(paths))
    for op in decl.ops:
        (out_dir / "source" / f"{op.name}.cu").write_text(device_code.kernel_source(decl, op))
    cfg = config.load(dev_spec="")
    kernels = device_code.instances(decl)
    _write_if_changed(
        out_dir / "cee_generated.h", codegen.op_table(decl, kernels, code, cfg, arch_summary)
    )
    _write_if_changed(out_dir / "cee_op_hosts.h", codegen.op_hosts(decl))
    return code


def _write_if_changed(path: Path, text: str) -> None:
    """An unchanged generated file keeps its time, so build caches see it unchanged."""
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def cost_table(decl: declarations.Declarations, code: device_code.DeviceCode) -> str:
    """Per op: its device code's bytes (uncompressed, and compressed as in the wheel) and
    the NVRTC seconds it took this build (0 where the cache had it)."""
    rows = [f"{'op':<24} {'fatbin bytes':>12} {'compressed':>10} {'NVRTC s':>8}"]
    total = [0, 0, 0.0]
    for op in decl.ops:
        libraries = [declarations.library_name(op.name, d) for d in op.dtypes]
        raw = sum(len(code.fatbins[lib]) for lib in libraries)
        packed = sum(len(zlib.compress(code.fatbins[lib], 6)) for lib in libraries)
        took = sum(code.seconds.get(lib, 0.0) for lib in libraries)
        rows.append(f"{op.name:<24} {raw:>12} {packed:>10} {took:>8.1f}")
        total = [total[0] + raw, total[1] + packed, total[2] + took]
    rows.append(f"{'total':<24} {total[0]:>12} {total[1]:>10} {total[2]:>8.1f}")
    return "\n".join(rows)


def build_step(name: str, func, *args):
    """Runs one step of the build. On failure the tool's own error (NVRTC's log, zig's
    "file:line: error") is the last thing printed, then one line naming the step, and
    no Python traceback under it (SystemExit: setuptools and build pass it through)."""
    try:
        return func(*args)
    except (nvrtc.DeviceCodeError, nvrtc_fetch.FetchError, config.ConfigError) as exc:
        # (an OpDeclarationError is a ConfigError: a bad ops.toml names its file and fix.)
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
    for source in sorted(declarations.OPS_DIR.glob("*/reference.py")):
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
        decl = build_step("op declarations (ops/*/ops.toml)", declarations.load)
        generated = Path(self.build_temp).resolve() / "device_code"
        out = Path(self.get_ext_fullpath(ext.name))
        out.parent.mkdir(parents=True, exist_ok=True)

        code = build_step(
            "device code (NVRTC: the ops' kernels, ops/*/)",
            write_device_code,
            generated,
            decl,
            device_code.targets_of(cfg),
            cfg.arch_summary,
        )
        print(f"device code: {code.compiler}, {' '.join(code.targets)}; the cost per op:")
        print(cost_table(decl, code), flush=True)
        arch = cross.target_arch()
        build_step("host code and link (zig c++)", link_extension, cfg, generated, out, arch)

        record = out.parent / "_build_info.json"
        record.write_text(json.dumps(build_record(cfg, decl, code), indent=2) + "\n")
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
