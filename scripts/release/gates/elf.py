"""The Linux wheel's ELF files: one library and nothing else, each file whole, search paths
inside the wheel, no executable stack, and what it links against (the allowlist, the glibc
floor, no libstdc++). Each audit judges a file's BinaryFacts and returns its findings; a
stray file is described by all of them at once, from the same facts."""

from __future__ import annotations

import importlib.util
import posixpath
import re
import zipfile
from pathlib import Path

from buildtools import config
from scripts.inspect import binary_info

from . import tools
from .binaries import LIBRARY, BinaryFacts, Finding, binary_files, facts_of, refuse_first
from .failure import GateFailure
from .symbols import export_findings, is_our_library, python_api_findings, torch_shim_findings
from .tags import wheel_arch

# Everything the library may link against: torch's CPU library (from the
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
# Names CPython's importer takes for an extension module: _C.so, _C.abi3.so,
# _C.cpython-314t-x86_64-linux-gnu.so (any <identifier>.so on Linux), _C.pyd.
EXTENSION_MODULE_NAME = re.compile(r"[A-Za-z_]\w*(\.[\w-]+)?\.(so|pyd)")


# ------------------------------------------------------ one library, each whole


def gate_one_library(wheel: Path, cfg: config.BuildConfig, torch_include: Path) -> None:
    """The build makes one binary, the library: any other binary (ELF or PE) of the wheel
    is refused as what it is, whatever its name, before any gate audits the library."""
    for name, facts in facts_of(wheel).items():
        if name == LIBRARY:
            continue
        if is_our_library(facts):
            module = EXTENSION_MODULE_NAME.fullmatch(posixpath.basename(name))
            raise GateFailure(
                "library-name",
                f"the library is {name}, not {LIBRARY}, which the loader hands to torch"
                + (
                    " (and CPython's importer takes its name for an extension module's)"
                    if module
                    else ""
                ),
                f"build with `make wheel`: buildtools/build_ext.py names it {config.LIBRARY} "
                "(buildtools/config.py LIBRARY); never rename a built library",
            )
        raise GateFailure(
            "unexpected-elf",
            f"unexpected shared library {name} in the wheel: "
            + describe_elf(facts, cfg, torch_include, wheel),
            f"ship only {LIBRARY}, which buildtools/build_ext.py builds: take {name} out "
            "of the package (a stray build output in src/cuda_ext_example/ or package "
            f"data; `make clean`, then `make repair`); code it carries belongs in csrc/, "
            "linked into the one library",
        )


def describe_elf(
    facts: BinaryFacts, cfg: config.BuildConfig, torch_include: Path, wheel: Path
) -> str:
    """A binary the build does not make, as every audit sees it: each judges the facts
    read once for the gates."""
    if facts.is_pe:
        return f"{facts.kind}, which no Linux loader reads"
    if facts.problem:
        return f"{facts.kind}, not a whole shared object ({facts.problem})"
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    findings = link_findings(facts, cfg, wheel_arch(wheel))
    findings += torch_shim_findings(facts, cfg, torch_include)
    # Its C++ symbols, where torch-abi-audit runs: describing a stray file, a missing
    # tool must not hide the fault (the torch-abi-audit gate names it).
    if tools.TORCH_ABI_AUDIT_RUNS and importlib.util.find_spec("torch_abi_audit"):
        with binary_files(wheel, [facts.name]) as found:
            findings += tools.torch_abi_audit_findings(found[facts.name], cfg, uses_torch=False)
    findings += python_api_findings(facts)
    findings += search_path_findings(facts, names) + stack_findings(facts)
    said = "; ".join(f"it {problem}" for problem, _ in findings)
    return f"{facts.kind}; {said or 'nothing else is wrong with it, but no build step makes it'}"


def gate_elf_readable(wheel: Path) -> None:
    """Every ELF file, and every file named as a library, is a whole ELF shared object."""
    known = facts_of(wheel)
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        if LIBRARY not in names:
            raise GateFailure(
                "elf-readable",
                f"the wheel has no {LIBRARY}",
                "build with `make wheel` and repair it (make repair)",
            )
        named = [n for n in names if ".so" in Path(n).name]
        for name in dict.fromkeys([LIBRARY, *known, *named]):
            read = known.get(name)
            # A PE file's facts say whether it is a whole DLL: here it must be a whole ELF.
            whole_elf = read is not None and not read.is_pe
            problem = read.problem if whole_elf else binary_info.elf_problem(zf.read(name))
            if problem:
                raise GateFailure(
                    "elf-readable",
                    f"{name} is not a readable ELF shared object ({problem})",
                    "never upload it: rebuild and repair the wheel (make repair); a file cut "
                    "short (full disk, interrupted copy or download) or not built by the "
                    "linker is no release",
                )


# ------------------------------------------------------------- search paths


def search_path_outside(entry: str, so_name: str, names: list[str]) -> bool:
    """True unless `entry` is $ORIGIN-relative and names a folder of the wheel itself."""
    origin = re.match(r"^(\$ORIGIN|\$\{ORIGIN\})(/.*)?$", entry)
    if origin is None:
        return True
    folder = posixpath.normpath(posixpath.dirname(so_name) + (origin.group(2) or ""))
    if folder.startswith("..") or folder == ".":
        return True
    return not any(n.startswith(folder + "/") for n in names)


def search_path_findings(facts: BinaryFacts, names: list[str]) -> list[Finding]:
    findings = []
    for kind, value in facts.search_paths:
        outside = [e for e in value.split(":") if search_path_outside(e, facts.name, names)]
        if outside:
            findings.append(
                (
                    f"has {kind[3:]} {value!r}: {outside} is not a folder inside the wheel "
                    "($ORIGIN-relative), so every user's loader searches the build machine's "
                    "path (or any folder of that name) first",
                    "remove it (`patchelf --remove-rpath`; no -Wl,-rpath in "
                    "buildtools/build_ext.py): torch's libraries are found because torch "
                    "is imported first; grafted ones through $ORIGIN/../<package>.libs",
                )
            )
    return findings


def gate_search_paths(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    for name, facts in facts_of(wheel).items():
        refuse_first("search-path", name, search_path_findings(facts, names))


# -------------------------------------------------------------------- stack


def stack_findings(facts: BinaryFacts) -> list[Finding]:
    if facts.stack is not None and "E" not in facts.stack:
        return []
    return [
        (
            f"asks for an executable stack (PT_GNU_STACK {facts.stack or 'missing'}): loading "
            "it makes the whole process's stack executable, and hardened systems (SELinux) "
            "refuse to load it",
            "mark every assembly file non-executable (`.section .note.GNU-stack, "
            '"", @progbits`, as buildtools/device_code.py writes device_code.S) or link '
            "with -Wl,-z,noexecstack",
        )
    ]


def gate_no_executable_stack(wheel: Path) -> None:
    for name, facts in facts_of(wheel).items():
        refuse_first("exec-stack", name, stack_findings(facts))


# ------------------------------------------------------- what it links against


def link_findings(facts: BinaryFacts, cfg: config.BuildConfig, arch: str) -> list[Finding]:
    """DT_NEEDED against the allowlist, glibc versions against the floor, no libstdc++."""
    findings = []
    allowed = ALLOWED_NEEDED | {LOADERS[arch]}
    unexpected = sorted(set(facts.needed) - allowed)
    if unexpected:
        findings.append(
            (
                f"needs {unexpected}, which are not on the allowlist {sorted(allowed)}",
                "link only against libtorch_cpu.so (buildtools/build_ext.py): no CUDA runtime "
                "(the launcher uses the driver API), never libstdc++",
            )
        )
    newest = facts.newest_glibc
    if newest and binary_info.version_key(newest) > binary_info.version_key(cfg.glibc):
        findings.append(
            (
                f"needs {newest}, newer than GLIBC_{cfg.glibc} ({cfg.manylinux_tag(arch)})",
                f"link with zig's {arch}-linux-gnu.{cfg.glibc} target (buildtools/build_ext.py), "
                "not with the system compiler",
            )
        )
    if facts.newest_glibcxx:
        findings.append(
            (
                f"needs libstdc++ ({facts.newest_glibcxx})",
                "link the C++ runtime statically (zig's libc++)",
            )
        )
    return findings


def gate_elf(wheel: Path, cfg: config.BuildConfig) -> None:
    arch = wheel_arch(wheel)
    for name, facts in facts_of(wheel).items():
        exports = export_findings(facts) if name == LIBRARY else []
        refuse_first("elf-audit", name, link_findings(facts, cfg, arch) + exports)
