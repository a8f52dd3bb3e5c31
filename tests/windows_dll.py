"""Windows DLLs made here for the Windows gates' tests: zig (the build's own cross compiler)
compiles C for x86_64-windows-gnu and links it against import libraries that zig's dlltool
makes from a list of names, so a test can plant any import, a CUDA runtime's or a C++
symbol of torch's, without that DLL."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

from buildtools import toolchain
from scripts.release import gates as release_gates


def hooks() -> str:
    """dllexport definitions of every hook csrc/exports.map declares but the first, which a
    planted DLL defines itself (with its fault inside)."""
    first, *rest = release_gates.declared_exports()
    return "".join(f"__declspec(dllexport) int {hook}(void) {{ return -1; }}\n" for hook in rest)


def import_library(tmp: Path, dll: str, names: list[str]) -> Path:
    """An import library for `dll` that exports `names` (zig dlltool, from a .def file)."""
    stem = dll.removesuffix(".dll")
    definition = tmp / f"{stem}.def"
    definition.write_text(f"LIBRARY {dll}\nEXPORTS\n" + "".join(f"  {n}\n" for n in names))
    library = tmp / f"{stem}.lib"
    subprocess.run(
        [*toolchain.zig_command(), "dlltool", "-d", definition, "-l", library,
         "-m", "i386:x86-64"],
        check=True,
    )  # fmt: skip
    return library


def compile_dll(tmp: Path, source: str, imports: dict[str, list[str]]) -> Path:
    """A DLL from C `source` (plus the hooks but the first, which `source` defines), linked
    against an import library per {dll: [names]}."""
    first = release_gates.declared_exports()[0]
    src = tmp / "planted.c"
    src.write_text(textwrap.dedent(source).replace("FIRST_HOOK", first) + hooks())
    libraries = [import_library(tmp, dll, names) for dll, names in imports.items()]
    out = tmp / "planted.dll"
    subprocess.run(
        [*toolchain.zig_command(), "cc", "-target", "x86_64-windows-gnu", "-shared", src,
         *libraries, "-Wl,--strip-debug", f"-Wl,--out-implib,{tmp / 'planted.lib'}",
         "-o", out],
        check=True,
    )  # fmt: skip
    return out
