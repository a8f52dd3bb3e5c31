"""The build record (cuda_ext_example/_build_info.json): doctor, the loader and the gates
trust it, so after the build it is the one account of the binary. The gates check it both
ways: against the binary (each op, dtype and library the record names is looked up in the
binary by its exact name; nothing is read back out of the binary's names) and against
pyproject.toml and ops/*/ops.toml (what the build was asked for)."""

from __future__ import annotations

from pathlib import Path

from buildtools import config, declarations
from buildtools.build_ext import declared_record
from scripts.inspect import binary_info, shim_versions

from .binaries import BinaryFacts, DeviceCode, device_code_of, facts_of, library_of
from .failure import GateFailure
from .symbols import imported_shims, known_shims
from .tags import wheel_arch
from .wheel_files import BUILD_RECORD, read_build_record

REBUILD_RECORD = (
    "never edit the record: rebuild the wheel (make repair), which writes it from "
    "pyproject.toml [tool.cuda_ext_example] and ops/*/ops.toml next to the binary "
    "it describes"
)
# The oldest driver of each CUDA major (NVIDIA's CUDA Compatibility guide): a cubin from
# CUDA 12.x needs at least 12.0's.
DRIVER_OF_CUDA_MAJOR = {12: "525.60.13", 13: "580.65.06"}


def recorded_libraries(wheel: Path) -> list[str]:
    """The record's device_libraries: one per op and dtype, in the launcher's order."""
    libraries = read_build_record(wheel).get("device_libraries")
    if not isinstance(libraries, list) or not all(isinstance(n, str) for n in libraries):
        raise GateFailure(
            "build-record",
            f"the build record {BUILD_RECORD} has no list of device_libraries "
            f"(it says {libraries!r}): nothing says which fatbins the binary must hold",
            REBUILD_RECORD,
        )
    return libraries


def gate_release_build(wheel: Path) -> None:
    """A dev build (make wheel ARCHS=90: a few SASS archs, no PTX) is for the author's
    machine only: its record says so, and it never ships."""
    record = read_build_record(wheel)
    if record.get("dev_build"):
        raise GateFailure(
            "release-build",
            f"this is a dev build for {' '.join(record.get('sass_archs', []))} only "
            "(make wheel ARCHS=...), not the declared archs and PTX",
            "rebuild without ARCHS: make wheel (or make release)",
        )


def gate_build_record(wheel: Path, cfg: config.BuildConfig, torch_include: Path) -> None:
    """doctor and the loader trust the record: it must say what the binary is and what
    pyproject.toml declares."""
    record = read_build_record(wheel)
    library = facts_of(wheel)[library_of(wheel)]
    problems = record_vs_binary(record, library, device_code_of(wheel), torch_include)
    problems += record_vs_pyproject(record, cfg, wheel_arch(wheel))
    if problems:
        raise GateFailure(
            "build-record",
            f"the build record {BUILD_RECORD} disagrees with the binary or pyproject.toml: "
            + "; ".join(problems),
            REBUILD_RECORD,
        )


def record_vs_pyproject(record: dict, cfg: config.BuildConfig, target: str) -> list[str]:
    declared = {"version": cfg.version, **declared_record(cfg, target)}
    return [
        f"{key} is {record.get(key)!r}, pyproject.toml (or ops/*/ops.toml) says {want!r}"
        for key, want in declared.items()
        if record.get(key) != want
    ]


# ------------------------------------------------------- the record vs the binary


def record_vs_binary(
    record: dict, library: BinaryFacts, code: DeviceCode, torch_include: Path
) -> list[str]:
    problems = []
    newest, shims = _newest_shims(library, torch_include)
    target = binary_info.version_key(str(record.get("torch_target")))[:2]
    if newest > target:
        problems.append(
            f"torch_target {record.get('torch_target')} but the binary imports torch "
            f"{newest[0]}.{newest[1]} shims ({', '.join(shims[:5])})"
        )
    problems += _targets_vs_record(record, code)
    problems += _driver_floor_vs_binary(record, code)
    newest_glibc = library.newest_glibc
    floor = binary_info.version_key(str(record.get("glibc_floor")))
    if newest_glibc and binary_info.version_key(newest_glibc) > floor:
        problems.append(
            f"glibc_floor {record.get('glibc_floor')} but the binary needs {newest_glibc}"
        )
    return problems + _dtypes_vs_binary(record, code)


def _newest_shims(library: BinaryFacts, torch_include: Path) -> tuple[tuple[int, int], list[str]]:
    known = known_shims(torch_include)
    imported = imported_shims(library)
    versions = [known[s] for s in imported if s in known]
    newest = max(versions, default=shim_versions.BASELINE)
    return newest, sorted(s for s in imported if known.get(s) == newest)


def recorded_ops(record: dict) -> list[dict]:
    """The record's ops."""
    return [op for op in record.get("ops") or [] if isinstance(op, dict)]


def kernel_dtypes(record: dict, code: DeviceCode) -> dict[str, list[str]]:
    """{op: the dtypes the binary has device code for}: for each op of the record and each
    dtype the project knows, its library <op>_<dtype> looked up by exact name among the
    binary's fatbins."""
    fatbins = set(code.names())
    return {
        str(op.get("name")): [
            dtype
            for dtype in declarations.DTYPES
            if declarations.library_name(str(op.get("name")), dtype) in fatbins
        ]
        for op in recorded_ops(record)
    }


def _dtypes_vs_binary(record: dict, code: DeviceCode) -> list[str]:
    problems = []
    by_op = kernel_dtypes(record, code)
    every = sorted({d for dtypes in by_op.values() for d in dtypes})
    if not set(every) <= set(record.get("dtypes") or []):
        problems.append(f"dtypes {record.get('dtypes')} but the binary has kernels for {every}")
    for op in recorded_ops(record):
        has = by_op[str(op.get("name"))]
        if sorted(has) != sorted(op.get("dtypes") or []):
            problems.append(
                f"{op.get('name')} declares dtypes {op.get('dtypes')} but the binary has "
                f"kernels for {has}"
            )
    return problems


def _targets_vs_record(record: dict, code: DeviceCode) -> list[str]:
    """The record's SASS archs and PTX against every embedded fatbin (one per op and dtype); a
    disagreement is said once, with the fatbins it holds for."""
    ptx = str(record.get("ptx_arch")).replace("compute_", "sm_")
    fatbins = code.fatbins or ()
    found: dict[str, list[str]] = {}
    for name, fatbin in zip(code.names(), fatbins, strict=True):
        sass, has_ptx = fatbin.archs("sass"), fatbin.archs("ptx")
        if record.get("sass_archs") != sass:
            found.setdefault(
                f"sass_archs {record.get('sass_archs')} but the fatbin has SASS {sass}", []
            ).append(name)
        if [ptx] != has_ptx:
            found.setdefault(
                f"ptx_arch {record.get('ptx_arch')} but the fatbin has PTX {has_ptx}", []
            ).append(name)
    every = len(fatbins) > 1
    return [
        f"{problem} ({'every op' if every and len(names) == len(fatbins) else ', '.join(names)})"
        for problem, names in found.items()
    ]


def _driver_floor_vs_binary(record: dict, code: DeviceCode) -> list[str]:
    """The record's driver floor against the CUDA that made the cubins."""
    by_arch = code.cubin_toolkits()
    toolkits = sorted(set(by_arch.values()))
    newest = binary_info.version_key(str(record.get("device_cuda")))[:2]
    problems = []
    if toolkits and toolkits[-1] > newest:  # device_cuda: the newest CUDA of the device code
        shown = [f"{v[0]}.{v[1]}" for v in toolkits]
        problems.append(
            f"device_cuda {record.get('device_cuda')} but the cubins are from CUDA {shown}"
        )
    named = record.get("device_compilers") or {}
    wrong = [
        f"{arch}: CUDA {v[0]}.{v[1]}, recorded {named.get(arch)}"
        for arch, v in sorted(by_arch.items())
        if named.get(arch) != f"NVRTC {v[0]}.{v[1]}"
    ]
    if wrong:
        problems.append("device_compilers disagree with the cubins (" + "; ".join(wrong) + ")")
    for major in sorted({v[0] for v in toolkits}):
        needs = DRIVER_OF_CUDA_MAJOR.get(major)
        floor = binary_info.version_key(str(record.get("min_driver")))
        if needs and floor < binary_info.version_key(needs):
            problems.append(
                f"min_driver {record.get('min_driver')} but cubins from CUDA {major} need "
                f">= {needs}"
            )
        if binary_info.version_key(str(record.get("min_driver_cuda")))[:1] != (major,):
            problems.append(
                f"min_driver_cuda {record.get('min_driver_cuda')} but the cubins are CUDA {major}'s"
            )
    return problems
