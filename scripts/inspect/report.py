"""python -m scripts.inspect PATH [--ptx] [--sass] [--symbols]

What a built binary (a wheel, or the extension .so itself) really contains:
device code per architecture and the CUDA version that compiled each cubin (read from
the embedded fatbins: one per op and dtype, each listed with its size and targets), whether any
entry is compressed, the vectorized loads in PTX/SASS
(SASS through nvdisasm), dynamic symbols, DT_NEEDED, newest GLIBC/GLIBCXX versions, and
the torch shim symbols with the oldest torch that provides each.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import subprocess
import sys
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from . import binary_info, shim_versions

# 16-byte and 8-byte global loads, as PTX and SASS spell them (my_fast_add uses 16-byte
# vectors; the shapes of tuning/launch_shapes.toml, chosen per GPU): read-only (.nc,
# .CONSTANT) or plain, and a shape's evict-first loads (L1::no_allocate.L2::cache_hint, SASS
# .NA; sm_80 on).
_PTX_HINTS = r"(?:\.nc|\.L1::no_allocate|\.L2::cache_hint)*"
LOADS = {
    "ptx": (
        re.compile(rf"ld\.global{_PTX_HINTS}\.v(?:4\.[bfsu]32|2\.[bfsu]64)"),
        re.compile(rf"ld\.global{_PTX_HINTS}\.(?:v2\.[bfsu]32|[bfsu]64)"),
    ),
    "sass": (re.compile(r"LDG\.E(?:\.NA)?\.128"), re.compile(r"LDG\.E(?:\.NA)?\.64")),
}


def torch_include() -> Path | None:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "include"
    return path if path.exists() else None


def demangle(names: list[str]) -> list[str]:
    """C++ names as people read them (c++filt where there is one)."""
    try:
        out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True)
        return out.stdout.splitlines() if out.returncode == 0 else names
    except OSError:
        return names


def loads_per_kernel(listing: str, pattern: re.Pattern) -> dict[str, int]:
    """Counts the loads `pattern` matches per kernel in a PTX or nvdisasm listing."""
    counts: dict[str, int] = {}
    kernel = None
    for line in listing.splitlines():
        # PTX ".entry name", nvdisasm ".section .text.name"
        entry = re.search(r"(?:\.entry|\.section\s+\.text\.)\s*(\w+)", line)
        if entry:
            kernel = entry.group(1)
            counts.setdefault(kernel, 0)
        elif kernel and pattern.search(line):
            counts[kernel] += 1
    return counts


def report_device_code(so: Path, out) -> None:
    try:
        code = binary_info.device_code(so)
    except RuntimeError as exc:
        print(f"device code: unknown: {exc}", file=out)
        return
    print(f"device code: SASS {' '.join(code['sass']) or 'none'}", file=out)
    print(f"             PTX  {' '.join(code['ptx']) or 'none'}", file=out)
    toolkits = binary_info.cubin_toolkits(so)
    by_version: dict[tuple[int, int], list[str]] = {}
    for arch, version in toolkits.items():
        by_version.setdefault(version, []).append(arch)
    for (major, minor), archs in sorted(by_version.items()):
        print(f"             cubins from CUDA {major}.{minor}: {' '.join(archs)}", file=out)
    for target, (major, minor) in binary_info.ptx_isa_versions(so).items():
        print(f"             PTX ISA {major}.{minor} ({target})", file=out)
    compressed = binary_info.compressed_entries(so)
    print(
        f"             compressed entries: {', '.join(compressed) or 'none'}"
        + (" (need driver >= 550)" if compressed else ""),
        file=out,
    )
    report_libraries(so, code, out)


def report_libraries(so: Path, code: dict[str, list[str]], out) -> None:
    """One line per embedded fatbin (the launcher's libraries, one per op and dtype, named by their
    entries' identifier): its size, its targets where they differ from the whole's."""
    found = binary_info.embedded_fatbins(so)
    symbols = binary_info.fatbin_symbols(so, [fatbin.name for fatbin in found])
    section = binary_info.fatbin_section(so)
    print(f"libraries: {len(found)} fatbins in {section}, one per op and dtype, each loaded "
          "at the first call of its op in its dtype", file=out)  # fmt: skip
    for index, fatbin in enumerate(found):
        sass, ptx = fatbin.archs("sass"), fatbin.archs("ptx")
        targets = (
            "every target above"
            if sass == code["sass"] and ptx == code["ptx"]
            else f"SASS {' '.join(sass) or 'none'}, PTX {' '.join(ptx) or 'none'}"
        )
        # The symbols are the link's (the shipped binary has no .symtab); a linked binary
        # that kept them shows each over its fatbin's bytes.
        symbol = binary_info.FATBIN_SYMBOL + fatbin.name
        if symbols is not None and symbols.get(fatbin.name) == (fatbin.offset, fatbin.size):
            targets += f"; symbol {symbol}"
        elif symbols is not None:
            targets += f"; no symbol {symbol} over its bytes"
        print(f"  {fatbin.label(index):<24} {fatbin.size:>10} bytes  {targets}", file=out)


def _listings(so: Path, dump: str) -> dict[str, str]:
    """{library: all its PTX (from its fatbin) or all its SASS (nvdisasm per cubin), one
    arch after the other}. nvdisasm 13 refuses the archs CUDA 13 dropped (sm_50 .. sm_70):
    those are named, not disassembled."""
    found = binary_info.embedded_fatbins(so)
    if dump == "ptx":
        return {
            fatbin.label(i): "\n".join(
                f"// {e.arch} ({fatbin.label(i)})\n{e.payload.decode(errors='replace')}"
                for e in fatbin.entries
                if e.kind == "ptx"
            )
            for i, fatbin in enumerate(found)
        }
    # One nvdisasm process per cubin, side by side: the threads only wait for them.
    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        jobs = [
            [(e, pool.submit(_disassembled, e)) for e in fatbin.entries if e.kind == dump]
            for fatbin in found
        ]
    listings, disassembled = {}, 0
    for i, (fatbin, fatbin_jobs) in enumerate(zip(found, jobs, strict=True)):
        parts, skipped = [], []
        for entry, job in fatbin_jobs:
            text, error = job.result()
            label = f"{entry.arch} ({fatbin.label(i)})"
            if error is None:
                parts.append(f"// {label}\n{text}")
            else:
                skipped.append(f"// {label}: not disassembled: {error}")
        disassembled += len(parts)
        listings[fatbin.label(i)] = "\n".join(parts + skipped)
    if not disassembled:
        raise RuntimeError("nvdisasm read none of the cubins:\n" + "\n".join(listings.values()))
    return listings


def _disassembled(entry) -> tuple[str, str | None]:
    """(SASS listing, None), or ("", the first line of nvdisasm's refusal); a missing nvdisasm
    raises."""
    try:
        return binary_info.disassemble(entry), None
    except binary_info.ToolMissing:
        raise
    except RuntimeError as exc:
        return "", str(exc).splitlines()[0]


def report_loads(so: Path, out, dump: str) -> bool:
    """The dump and its loads per kernel and library; False (said in the output) where it
    cannot be made."""
    try:
        listings = _listings(so, dump)
    except RuntimeError as exc:
        print(f"{dump}: unavailable: {exc}", file=out)
        return False
    for listing in listings.values():
        print(listing, file=out)
    print(f"{dump.upper()} loads per kernel (summed over archs): 16-byte, 8-byte", file=out)
    for library, listing in listings.items():
        wide, narrow = (loads_per_kernel(listing, pattern) for pattern in LOADS[dump])
        names = sorted(wide)
        print(f" library {library}:", file=out)
        for name, readable in zip(names, demangle(names), strict=True):
            print(f"  {wide[name]:4d} {narrow[name]:4d}  {readable}", file=out)
    return True


def report_symbols(so: Path, out) -> None:
    exported = binary_info.exported_symbols(so)
    undefined = binary_info.undefined_symbols(so)
    print(f"defined dynamic symbols (T): {len(exported)}", file=out)
    for name in exported:
        print(f"  T {name}", file=out)
    print(f"undefined dynamic symbols (U): {len(undefined)}", file=out)
    for name in undefined:
        print(f"  U {name}", file=out)


def report_elf(so: Path, out) -> None:
    print(f"DT_NEEDED: {', '.join(binary_info.needed_libraries(so))}", file=out)
    for prefix in ("GLIBC_", "GLIBCXX_", "CXXABI_"):
        print(f"newest {prefix[:-1]}: {binary_info.newest_version(so, prefix) or 'none'}", file=out)


def report_shims(so: Path, out) -> None:
    include = torch_include()
    shims = shim_versions.torch_shims(binary_info.undefined_symbols(so))
    if not shims:  # a library that is no stable-ABI extension: nothing to date
        print("torch shims: none (it calls no torch stable-ABI shim)", file=out)
        return
    if include is None:
        print(f"torch shims: {len(shims)} (install torch to see their versions)", file=out)
        return
    known = shim_versions.shim_versions(include)
    print(f"torch shims: {len(shims)}, oldest torch that provides each:", file=out)
    for name in shims:
        version = shim_versions.format_version(known[name]) if name in known else "NOT IN torch"
        print(f"  {version:>8}  {name}", file=out)
    newest = max((known[s] for s in shims if s in known), default=None)
    if newest:
        print(f"=> needs torch >= {newest[0]}.{newest[1]}", file=out)


def main(argv: list[str] | None = None, out=sys.stdout) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.inspect", description=__doc__)
    parser.add_argument("path", type=Path, help="a wheel (.whl) or an extension .so")
    parser.add_argument("--ptx", action="store_true", help="dump PTX; count 16/8-byte loads")
    parser.add_argument("--sass", action="store_true", help="dump SASS; count LDG.E.128/64")
    parser.add_argument("--symbols", action="store_true", help="list every dynamic symbol")
    args = parser.parse_args(argv)
    missing = []  # dumps asked for that could not be made: the exit status says so
    try:
        with binary_info.extension_in(args.path) as so:
            print(f"{args.path} -> {so.name} ({so.stat().st_size} bytes)", file=out)
            report_device_code(so, out)
            report_elf(so, out)
            report_shims(so, out)
            if args.symbols:
                report_symbols(so, out)
            for dump in ("ptx", "sass"):
                if getattr(args, dump) and not report_loads(so, out, dump):
                    missing.append(dump)
    except BrokenPipeError:  # the reader went away (`| head`): not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no error at exit
        return 0
    except (OSError, RuntimeError, zipfile.BadZipFile, *binary_info.elf_errors()) as exc:
        print(f"inspect: cannot read {args.path}: {exc}", file=sys.stderr)
        return 1
    if missing:  # the rest of the report is there; what was asked for is not
        print(f"inspect: no {', '.join(missing)} dump (see the line above)", file=sys.stderr)
        return 1
    return 0
