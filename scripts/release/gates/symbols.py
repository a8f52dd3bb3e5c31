"""What a binary imports and exports, judged the same for an ELF file and a DLL: the hooks
of csrc/exports.map only, no CPython symbol (the wheel is py3-none), and torch's stable
shims no newer than the declared torch."""

from __future__ import annotations

import functools
import re
from pathlib import Path

from buildtools import config
from scripts.inspect import binary_info, shim_versions

from .binaries import BinaryFacts, Finding, facts_of, refuse_first

# What the library exports: the hooks of the linker's version script, nothing else.
EXPORTS_MAP = config.ROOT / "csrc" / "exports.map"
# CPython's own symbols: its C API and its internals.
CPYTHON_SYMBOL = re.compile(r"_?Py")


def declared_exports(exports_map: Path = EXPORTS_MAP) -> list[str]:
    """The `global:` names of the linker version script."""
    text = re.sub(r"/\*.*?\*/", "", exports_map.read_text(), flags=re.S)
    block = re.search(r"global:(.*?)local:", text, re.S)
    return sorted(re.findall(r"([A-Za-z_]\w*)\s*;", block.group(1))) if block else []


def is_our_library(facts: BinaryFacts) -> bool:
    """The build's library by content: it exports csrc/exports.map's hooks."""
    return facts.problem is None and list(facts.exported) == declared_exports()


def export_findings(facts: BinaryFacts) -> list[Finding]:
    exported, declared = list(facts.exported), declared_exports()
    if exported == declared:
        return []
    return [
        (
            f"exports {exported[:10]}, not the hooks of csrc/exports.map {declared}",
            "keep csrc/exports.map as the linker version script (buildtools/build_ext.py)",
        )
    ]


# ---------------------------------------------------------- no CPython symbol


def cpython_symbols(facts: BinaryFacts) -> tuple[list[str], list[str]]:
    """(imported, defined) CPython symbols (Py*, _Py*) of a binary."""
    imported = [s for s in facts.undefined if CPYTHON_SYMBOL.match(s)]
    defined = [s for s in facts.exported if CPYTHON_SYMBOL.match(s)]
    return imported, defined


def python_api_findings(facts: BinaryFacts) -> list[Finding]:
    """Any CPython symbol, imported or defined: the wheel is py3-none, for every CPython 3,
    and each CPython (3.10, 3.14, a free-threaded 3.14t) has its own ABI: a symbol of one
    is missing from another, or means another object layout there."""
    imported, defined = cpython_symbols(facts)
    if not imported and not defined:
        return []
    said = [f"imports {', '.join(imported[:10])}" * bool(imported)]
    said += [f"defines {', '.join(defined[:10])}" * bool(defined)]
    return [
        (
            f"uses the CPython ABI ({'; '.join(x for x in said if x)}), which no py3-none "
            "wheel may: it fails to load, or corrupts objects, on a CPython whose ABI differs "
            "(another version, a free-threaded build)",
            "keep csrc/ free of Python.h and every Py* call: torch loads the library "
            "(torch.ops.load_library), and what Python needs of it goes through plain C "
            "functions (csrc/launch_shape_hooks.cpp) and ctypes "
            "(src/cuda_ext_example/_launch_shapes.py)",
        )
    ]


def gate_no_cpython_symbols(wheel: Path) -> None:
    for name, facts in facts_of(wheel).items():
        refuse_first("cpython-symbols", name, python_api_findings(facts))


# ------------------------------------------------------------- torch's shims


@functools.lru_cache(maxsize=2)
def known_shims(torch_include: Path) -> dict[str, tuple[int, int]]:
    """{shim: the first torch that has it}, read from torch's headers once per run."""
    return shim_versions.shim_versions(torch_include)


def imported_shims(facts: BinaryFacts) -> list[str]:
    return shim_versions.torch_shims(list(facts.undefined))


def torch_shim_findings(
    facts: BinaryFacts, cfg: config.BuildConfig, torch_include: Path
) -> list[Finding]:
    target = binary_info.version_key(cfg.torch_target)
    known = known_shims(torch_include)
    imported = imported_shims(facts)
    too_new = {s: known[s] for s in imported if s in known and known[s] > target}
    unknown = [s for s in imported if s not in known]
    if not too_new and not unknown:
        return []
    detail = ", ".join(f"{s} (torch {'.'.join(map(str, v))})" for s, v in too_new.items())
    return [
        (
            f"imports shims newer than torch {cfg.torch_target}: {detail or 'none'}; "
            f"not in torch's stable shim headers: {unknown or 'none'}",
            f"compile with -DTORCH_TARGET_VERSION for {cfg.torch_target} and use only stable "
            "shims; look up what a newer one needs at run time (as csrc/ops.cpp does for the "
            "CUDA stream)",
        )
    ]


def gate_torch_shims(wheel: Path, cfg: config.BuildConfig, torch_include: Path) -> None:
    for name, facts in facts_of(wheel).items():
        refuse_first("torch-shims", name, torch_shim_findings(facts, cfg, torch_include))
