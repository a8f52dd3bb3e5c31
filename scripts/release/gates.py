"""Blocking checks on a repaired wheel before it may be uploaded.

Each gate returns nothing when the wheel passes and raises GateFailure with the
reason and the fix when it does not. Run them all with `run_gates(wheel)`, or
from the command line: python -m scripts.release gates WHEEL
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

from buildtools import config
from buildtools.toolchain import torch_paths

ROOT = config.ROOT


def _package_module(name: str):
    """A module of cuda_ext_example loaded by path: importing the package itself
    would load the compiled extension, which the release venv need not have."""
    path = ROOT / "src" / "cuda_ext_example" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_cee_{name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


binary_info = _package_module("binary_info")
shim_versions = _package_module("shim_versions")

# Everything the extension may link against: torch's CPU library (from the
# user's torch) and the glibc parts manylinux2014 guarantees. Neither the CUDA
# runtime nor libcuda: the launcher opens libcuda.so.1 itself at the first CUDA call.
ALLOWED_NEEDED = frozenset(
    {
        "libtorch_cpu.so",
        "libc.so.6",
        "libm.so.6",
        "libdl.so.2",
        "libpthread.so.0",
        "librt.so.1",
    }
)
LOADERS = {"x86_64": "ld-linux-x86-64.so.2", "aarch64": "ld-linux-aarch64.so.1"}
EXTENSION = "cuda_ext_example/_C.abi3.so"


class GateFailure(Exception):
    def __init__(self, gate: str, reason: str, fix: str):
        super().__init__(f"[{gate}] {reason}\n  how to fix: {fix}")
        self.gate = gate
        self.reason = reason


def venv_tool(name: str) -> str:
    """A console script of the running venv (the release tools are pinned there)."""
    candidate = Path(sys.executable).parent / name
    return str(candidate) if candidate.exists() else name


def _run_tool(gate: str, cmd: list[str], fix: str) -> None:
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        output = (result.stdout + result.stderr).strip()
        raise GateFailure(gate, f"`{' '.join(cmd[:2])} ...` failed:\n{output}", fix)


def gate_abi3audit(wheel: Path) -> None:
    _run_tool(
        "abi3audit",
        [venv_tool("abi3audit"), "--strict", "--report", str(wheel)],
        "use only the Python limited API of 3.10 in csrc/ (Py_LIMITED_API=0x030A0000)",
    )


def gate_twine_check(wheel: Path) -> None:
    _run_tool(
        "twine-check",
        [venv_tool("twine"), "check", "--strict", str(wheel)],
        "fix the package metadata in pyproject.toml (README must render)",
    )


def gate_check_wheel_contents(wheel: Path) -> None:
    _run_tool(
        "check-wheel-contents",
        [venv_tool("check-wheel-contents"), str(wheel)],
        "remove stray or duplicate files from the package (see the codes above)",
    )


def gate_abi3_tag(wheel: Path, cfg: config.BuildConfig) -> None:
    tags = _wheel_tags(wheel)
    bad = [t for t in tags if not t.startswith(f"{cfg.abi_tag}-abi3-")]
    extensions = _shared_objects(wheel)
    if bad or not tags:
        raise GateFailure(
            "abi3-tag",
            f"wheel tags {tags} are not all {cfg.abi_tag}-abi3",
            "build with setup.py's bdist_wheel py_limited_api (pyproject python-limited-api) "
            "and Extension(py_limited_api=True)",
        )
    policy = f"{cfg.abi_tag}-abi3-manylinux2014_{_arch_of(tags)}"
    if policy not in tags:
        raise GateFailure(
            "abi3-tag",
            f"wheel tags {tags} do not include {policy}",
            "repair with scripts/release (auditwheel repair to manylinux2014)",
        )
    non_abi3 = [n for n in extensions if n.endswith(".so") and not n.endswith(".abi3.so")]
    if non_abi3:
        raise GateFailure(
            "abi3-tag",
            f"extension {non_abi3} is built for one CPython version, not abi3",
            "build the extension with py_limited_api=True so it is named *.abi3.so",
        )


def gate_elf(wheel: Path, cfg: config.BuildConfig) -> None:
    shared = _shared_objects(wheel)
    grafted = [n for n in shared if n != EXTENSION]
    if grafted:
        raise GateFailure(
            "elf-audit",
            f"libraries were grafted into the wheel: {grafted}",
            "exclude them in auditwheel repair (torch and CUDA libraries come from the "
            "user's torch and driver): see REPAIR_EXCLUDES in the Makefile",
        )
    with binary_info.extension_in(wheel) as so:
        needed = binary_info.needed_libraries(so)
        allowed = ALLOWED_NEEDED | {LOADERS[wheel_arch(wheel)]}
        unexpected = sorted(set(needed) - allowed)
        if unexpected:
            raise GateFailure(
                "elf-audit",
                f"{EXTENSION} needs {unexpected}, which are not on the allowlist {sorted(allowed)}",
                "link only against libtorch_cpu.so (buildtools/build_ext.py): no CUDA runtime "
                "(the launcher uses the driver API), never libstdc++",
            )
        newest = binary_info.newest_version(so, "GLIBC_")
        if newest and binary_info.version_key(newest) > binary_info.version_key(cfg.glibc):
            raise GateFailure(
                "elf-audit",
                f"{EXTENSION} needs {newest}, newer than GLIBC_{cfg.glibc} (manylinux2014)",
                f"link with zig's x86_64-linux-gnu.{cfg.glibc} target (buildtools/build_ext.py), "
                "not with the system compiler",
            )
        cxx = binary_info.newest_version(so, "GLIBCXX_")
        if cxx:
            raise GateFailure(
                "elf-audit",
                f"{EXTENSION} needs libstdc++ ({cxx})",
                "link the C++ runtime statically (zig's libc++)",
            )
        exported = binary_info.exported_symbols(so)
        if exported != ["PyInit__C"]:
            raise GateFailure(
                "elf-audit",
                f"{EXTENSION} exports {exported[:10]}, not only PyInit__C",
                "keep csrc/exports.map as the linker version script",
            )


def gate_device_code(wheel: Path, cfg: config.BuildConfig) -> None:
    want_sass = [f"sm_{a}" for a in cfg.sass_archs]
    want_ptx = [f"sm_{cfg.ptx_arch}"]
    with binary_info.extension_in(wheel) as so:
        code = binary_info.device_code(so)
    missing = [a for a in want_sass if a not in code["sass"]]
    if missing or code["ptx"] != want_ptx:
        raise GateFailure(
            "device-code",
            f"{EXTENSION} carries SASS {code['sass']} and PTX {code['ptx']}; promised SASS "
            f"{want_sass} and PTX {want_ptx} (missing SASS: {missing})",
            "build with the arch list of pyproject.toml [tool.cuda_ext_example] "
            "(buildtools/device_code.py)",
        )


def _arch_versions(found: dict[str, tuple[int, int]]) -> str:
    return ", ".join(f"{arch}: {v[0]}.{v[1]}" for arch, v in found.items()) or "none"


def gate_cuda12_device_code(wheel: Path, cfg: config.BuildConfig) -> None:
    """Device code no newer than the promised driver floor can run: every cubin from the
    CUDA pyproject.toml declares for its arch (the oldest that knows it), PTX ISA <=
    <ptx-isa>. The CUDA of a cubin is what `cuobjdump -elf` prints as toolkit=."""
    declared = {f"sm_{a}": binary_info.version_key(c)[:2] for a, c in cfg.sass_cuda.items()}
    isa = binary_info.version_key(cfg.ptx_isa)[:2]
    with binary_info.extension_in(wheel) as so:
        toolkits = binary_info.cubin_toolkits(so)
        ptx = binary_info.ptx_isa_versions(so)
    wrong = {a: v for a, v in toolkits.items() if v != declared.get(a)}
    too_new = {a: v for a, v in ptx.items() if v > isa}
    if wrong or too_new or not toolkits:
        expected = ", ".join(f"{a}: {'.'.join(map(str, declared.get(a, ('?',))))}" for a in wrong)
        raise GateFailure(
            "cuda12-device-code",
            f"{EXTENSION} is not the device code it declares for drivers >= {cfg.min_driver} "
            f"(CUDA {cfg.min_driver_cuda}): cubins not from their declared CUDA: "
            f"{_arch_versions(wrong)} (declared {expected or 'none'}); PTX ISA newer than "
            f"{cfg.ptx_isa}: {_arch_versions(too_new)}" + ("" if toolkits else "; no cubin found"),
            "compile each arch with the NVRTC pyproject.toml [tool.cuda_ext_example.sass-archs] "
            "names (buildtools/device_code.py; NVRTC 12.0 from requirements/nvrtc-12.0.txt), "
            "never with a CUDA 13 nvcc or NVRTC",
        )


def gate_uncompressed_fatbin(wheel: Path, cfg: config.BuildConfig) -> None:
    """No compressed fatbin entry: drivers before 550.54.14 cannot load one, and the
    wheel promises >= 525.60.13."""
    with binary_info.extension_in(wheel) as so:
        compressed = binary_info.compressed_entries(so)
    if compressed:
        raise GateFailure(
            "uncompressed-fatbin",
            f"{EXTENSION} carries compressed fatbin entries ({', '.join(compressed)}), which "
            f"need driver >= 550.54.14; the wheel promises >= {cfg.min_driver}",
            "pack the fatbin uncompressed (buildtools/device_code.py pack_fatbin, nvFatbin "
            "-compress=false; with nvcc, no --compress-mode)",
        )


def build_record(wheel: Path) -> dict:
    with zipfile.ZipFile(wheel) as zf:
        names = [n for n in zf.namelist() if n.endswith("cuda_ext_example/_build_info.json")]
        return json.loads(zf.read(names[0])) if names else {}


def gate_release_build(wheel: Path) -> None:
    """A dev build (make wheel ARCHS=90: a few SASS archs, no PTX) is for the author's
    machine only: its record says so, and it never ships."""
    record = build_record(wheel)
    if not record:
        raise GateFailure(
            "release-build",
            "the wheel has no build record (cuda_ext_example/_build_info.json)",
            "build it with make wheel (setup.py writes the record)",
        )
    if record.get("dev_build"):
        raise GateFailure(
            "release-build",
            f"this is a dev build for {' '.join(record.get('sass_archs', []))} only "
            "(make wheel ARCHS=...), not the declared archs and PTX",
            "rebuild without ARCHS: make wheel (or make release)",
        )


def gate_torch_shims(wheel: Path, cfg: config.BuildConfig, torch_include: Path) -> None:
    target = tuple(int(x) for x in cfg.torch_target.split("."))
    known = shim_versions.shim_versions(torch_include)
    with binary_info.extension_in(wheel) as so:
        imported = shim_versions.torch_shims(binary_info.undefined_symbols(so))
    too_new = {s: known[s] for s in imported if s in known and known[s] > target}
    unknown = [s for s in imported if s not in known]
    if too_new or unknown:
        detail = ", ".join(f"{s} (torch {'.'.join(map(str, v))})" for s, v in too_new.items())
        raise GateFailure(
            "torch-shims",
            f"{EXTENSION} imports shims newer than torch {cfg.torch_target}: {detail or 'none'}; "
            f"not in torch's stable shim headers: {unknown or 'none'}",
            f"compile with -DTORCH_TARGET_VERSION for {cfg.torch_target} and use only stable "
            "shims; look up what a newer one needs at run time (as csrc/ops.cpp does for the "
            "CUDA stream)",
        )


def wheel_arch(wheel: Path) -> str:
    """'x86_64' or 'aarch64', from the wheel's tags (repaired or not)."""
    return _arch_of(_wheel_tags(wheel))


def _arch_of(tags: list[str]) -> str:
    archs = {arch for tag in tags for arch in LOADERS if tag.endswith(arch)}
    if len(archs) != 1:
        raise GateFailure(
            "abi3-tag",
            f"wheel tags {tags} name no single CPU of {sorted(LOADERS)}",
            "build with make wheel (ARCH=aarch64 for the aarch64 wheel)",
        )
    return archs.pop()


def _wheel_tags(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as zf:
        (name,) = [n for n in zf.namelist() if n.endswith(".dist-info/WHEEL")]
        text = zf.read(name).decode()
    return [line.split(": ", 1)[1] for line in text.splitlines() if line.startswith("Tag: ")]


def _shared_objects(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as zf:
        return [n for n in zf.namelist() if ".so" in Path(n).name]


def all_gates(cfg: config.BuildConfig, torch_include: Path) -> list[tuple[str, Callable]]:
    return [
        ("release build (not a dev build)", gate_release_build),
        ("abi3 tag", lambda w: gate_abi3_tag(w, cfg)),
        ("abi3audit --strict", gate_abi3audit),
        ("twine check --strict", gate_twine_check),
        ("check-wheel-contents", gate_check_wheel_contents),
        ("ELF audit", lambda w: gate_elf(w, cfg)),
        ("device code", lambda w: gate_device_code(w, cfg)),
        (
            f"device code runs on driver >= {cfg.min_driver}",
            lambda w: gate_cuda12_device_code(w, cfg),
        ),
        ("fatbin uncompressed", lambda w: gate_uncompressed_fatbin(w, cfg)),
        (f"torch shims <= {cfg.torch_target}", lambda w: gate_torch_shims(w, cfg, torch_include)),
    ]


def run_gates(wheel: Path, log=print) -> None:
    """Runs every gate in order; the first failure raises GateFailure."""
    cfg = config.load(dev_spec="")  # what a release must carry, whatever $CEE_SASS_ARCHS says
    torch_include, _ = torch_paths()
    for name, gate in all_gates(cfg, torch_include):
        gate(Path(wheel))
        log(f"  gate ok: {name}", flush=True)
