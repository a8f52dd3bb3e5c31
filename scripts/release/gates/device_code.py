"""The device code the wheel promises: one fatbin per library (op and dtype) the build record
names, each with every SASS arch and the PTX of pyproject.toml, from the CUDA each arch is
declared for, uncompressed (the driver floor loads no compressed entry). The fatbins are
read from the binary itself (.nv_fatbin; a DLL's .nv_fatb): no CUDA tool needed."""

from __future__ import annotations

from pathlib import Path

from buildtools import config
from scripts.inspect import binary_info

from .binaries import device_code_of
from .build_record import recorded_libraries
from .failure import GateFailure


def gate_device_code(wheel: Path, cfg: config.BuildConfig) -> None:
    """The device code the wheel promises, per library: one fatbin per op and dtype of the
    build record in .nv_fatbin (.nv_fatb in the Windows DLL; the launcher loads each at its
    first call), each with every SASS arch and the PTX of pyproject.toml."""
    code = device_code_of(wheel)
    want_sass = [f"sm_{a}" for a in cfg.sass_archs]
    want_ptx = [f"sm_{cfg.ptx_arch}"]
    fix = (
        "build with the arch list of pyproject.toml [tool.cuda_ext_example] "
        "(buildtools/device_code.py)"
    )
    if code.fatbins is None:
        raise GateFailure(
            "device-code",
            f"{code.library} carries SASS [] and PTX [] (no {code.section} section); promised "
            f"SASS {want_sass} and PTX {want_ptx}",
            fix + f": device_code.S embeds the fatbins in {code.section}; never strip it",
        )
    # Each recorded library looked up by its exact name; any other fatbin is refused.
    names, declared = code.names(), recorded_libraries(wheel)
    missing = [name for name in declared if name not in names]
    extra = [name for name in names if name not in declared or names.count(name) > 1]
    if missing or extra:
        raise GateFailure(
            "device-code",
            f"{code.library}'s {code.section} holds the fatbins {names}; the build record "
            f"(from ops/*/ops.toml) declares one per op and dtype, {declared}: no fatbin for "
            f"{missing or 'none'}, unexpected {sorted(set(extra)) or 'none'}",
            "rebuild with make wheel: buildtools/device_code.py packs one fatbin per declared "
            "op and dtype (each entry named after it) and device_code.S embeds every one; a "
            "fatbin the launcher lacks fails that op's first call in that dtype on every GPU",
        )
    short = []
    for name, fatbin in zip(names, code.fatbins, strict=True):
        sass, ptx = fatbin.archs("sass"), fatbin.archs("ptx")
        lacking = [a for a in want_sass if a not in sass]
        if lacking or ptx != want_ptx:
            short.append(
                f"{name}'s fatbin carries SASS {sass} and PTX {ptx} (missing SASS: {lacking})"
            )
    if short:
        raise GateFailure(
            "device-code",
            f"{code.library}: " + "; ".join(short) + f"; every library's promised SASS "
            f"{want_sass} and PTX {want_ptx}",
            fix + ": every fatbin gets every target",
        )


def _arch_versions(found: dict[str, tuple[int, int]]) -> str:
    return ", ".join(f"{arch}: {v[0]}.{v[1]}" for arch, v in found.items()) or "none"


def gate_cuda12_device_code(wheel: Path, cfg: config.BuildConfig) -> None:
    """Device code no newer than the promised driver floor can run: every cubin from the
    CUDA pyproject.toml declares for its arch (the oldest that knows it), PTX ISA <=
    <ptx-isa>. The CUDA of a cubin is read from its ELF header (binary_info.FatbinEntry)."""
    declared = {f"sm_{a}": binary_info.version_key(c)[:2] for a, c in cfg.sass_cuda.items()}
    isa = binary_info.version_key(cfg.ptx_isa)[:2]
    code = device_code_of(wheel)
    # Every entry of every library (one fatbin per op), each checked.
    wrong: dict[str, tuple[int, int]] = {}
    too_new: dict[str, tuple[int, int]] = {}
    where: set[str] = set()
    cubins = 0
    for name, fatbin in zip(code.names(), code.fatbins or (), strict=True):
        for entry in fatbin.entries:
            cubins += entry.toolkit is not None
            if entry.toolkit and entry.toolkit != declared.get(entry.arch):
                wrong.setdefault(entry.arch, entry.toolkit)
                where.add(name)
            if entry.ptx_isa and entry.ptx_isa > isa:
                too_new.setdefault(entry.arch, entry.ptx_isa)
                where.add(name)
    if wrong or too_new or not cubins:
        expected = ", ".join(f"{a}: {'.'.join(map(str, declared.get(a, ('?',))))}" for a in wrong)
        raise GateFailure(
            "cuda12-device-code",
            f"{code.library} is not the device code it declares for drivers >= "
            f"{cfg.min_driver} "
            f"(CUDA {cfg.min_driver_cuda}): cubins not from their declared CUDA: "
            f"{_arch_versions(wrong)} (declared {expected or 'none'}); PTX ISA newer than "
            f"{cfg.ptx_isa}: {_arch_versions(too_new)}"
            + (f" (in the fatbins of {', '.join(sorted(where))})" if where else "")
            + ("" if cubins else "; no cubin found"),
            "compile each arch with the NVRTC pyproject.toml [tool.cuda_ext_example.sass-archs] "
            "names (buildtools/device_code.py; NVRTC 12.0 from requirements/nvrtc-12.0.txt), "
            "never with a CUDA 13 nvcc or NVRTC",
        )


def gate_uncompressed_fatbin(wheel: Path, cfg: config.BuildConfig) -> None:
    """No compressed fatbin entry: drivers before 550.54.14 cannot load one, and the
    wheel promises >= 525.60.13."""
    code = device_code_of(wheel)
    compressed = [
        f"{name} {e.kind} {e.arch}"
        for name, fatbin in zip(code.names(), code.fatbins or (), strict=True)
        for e in fatbin.entries
        if e.compressed
    ]
    if compressed:
        raise GateFailure(
            "uncompressed-fatbin",
            f"{code.library} carries compressed fatbin entries "
            f"({', '.join(compressed)}), which need driver >= 550.54.14; the wheel promises "
            f">= {cfg.min_driver}",
            "pack the fatbin uncompressed (buildtools/device_code.py pack_fatbin, nvFatbin "
            "-compress=false; with nvcc, no --compress-mode)",
        )
