"""Facts about a built extension binary (.so, or the one inside a wheel).

Shared by the wheel tests, the release gates and `python -m cuda_ext_example inspect`.
ELF facts come from pyelftools (installed with auditwheel; `pip install pyelftools`);
the device-code listing comes from NVIDIA's cuobjdump.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from contextlib import contextmanager
from pathlib import Path


def _elf(path: Path):
    try:
        from elftools.elf.elffile import ELFFile
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise RuntimeError("reading ELF files needs pyelftools: pip install pyelftools") from exc
    return ELFFile(open(path, "rb"))  # noqa: SIM115 - closed by callers via .stream


def _dynamic_symbols(path: Path):
    elf = _elf(path)
    try:
        for sym in elf.get_section_by_name(".dynsym").iter_symbols():
            if sym.name:
                yield sym
    finally:
        elf.stream.close()


def needed_libraries(path: Path) -> list[str]:
    """DT_NEEDED entries, in order."""
    elf = _elf(path)
    try:
        dynamic = elf.get_section_by_name(".dynamic")
        return [tag.needed for tag in dynamic.iter_tags() if tag.entry.d_tag == "DT_NEEDED"]
    finally:
        elf.stream.close()


def exported_symbols(path: Path) -> list[str]:
    """Defined global/weak dynamic symbols (the T/W lines of `nm -D --defined-only`)."""
    return sorted(
        s.name
        for s in _dynamic_symbols(path)
        if s["st_shndx"] != "SHN_UNDEF" and s["st_info"]["bind"] in ("STB_GLOBAL", "STB_WEAK")
    )


def undefined_symbols(path: Path) -> list[str]:
    """Symbols the binary imports (the U lines of `nm -D`), without version suffixes."""
    return sorted({s.name for s in _dynamic_symbols(path) if s["st_shndx"] == "SHN_UNDEF"})


def symbol_versions(path: Path) -> dict[str, list[str]]:
    """Required symbol versions per library, e.g. {'libc.so.6': ['GLIBC_2.2.5', ...]}."""
    elf = _elf(path)
    try:
        section = elf.get_section_by_name(".gnu.version_r")
        if section is None:
            return {}
        return {
            verneed.name: sorted(aux.name for aux in auxes)
            for verneed, auxes in section.iter_versions()
        }
    finally:
        elf.stream.close()


def section_data(path: Path, name: str) -> bytes | None:
    """The bytes of one ELF section (e.g. '.nv_fatbin', the embedded device code)."""
    elf = _elf(path)
    try:
        section = elf.get_section_by_name(name)
        return section.data() if section is not None else None
    finally:
        elf.stream.close()


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version))


def newest_version(path: Path, prefix: str) -> str | None:
    """Newest required version with this prefix ('GLIBC_', 'GLIBCXX_', 'CXXABI_')."""
    found = [
        v
        for versions in symbol_versions(path).values()
        for v in versions
        if v.startswith(prefix) and re.fullmatch(re.escape(prefix) + r"[\d.]+", v)
    ]
    return max(found, key=version_key) if found else None


def find_cuda_tool(name: str) -> str | None:
    """A CUDA binary tool (cuobjdump, nvdisasm) on PATH, in the CUDA toolkit, or
    from NVIDIA's PyPI wheels (nvidia-cuda-cuobjdump, nvidia-cuda-nvdisasm)."""
    candidates = [shutil.which(name)]
    for env in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(env):
            candidates.append(os.path.join(os.environ[env], "bin", name))
    candidates.append(f"/usr/local/cuda/bin/{name}")
    paths = sysconfig.get_paths()
    for base in dict.fromkeys([paths["purelib"], paths["platlib"], *sys.path]):
        candidates.append(os.path.join(base, "nvidia", "cu13", "bin", name))
    return next((c for c in candidates if c and os.access(c, os.X_OK)), None)


def find_cuobjdump() -> str | None:
    return find_cuda_tool("cuobjdump")


def run_cuobjdump(flag: str, path: Path) -> str:
    """cuobjdump's output; clear errors when it (or, for SASS, nvdisasm) is missing."""
    tool = find_cuobjdump()
    if tool is None:
        raise RuntimeError(
            "cuobjdump not found (looked on PATH, in $CUDA_HOME and /usr/local/cuda, and in "
            "site-packages/nvidia/cu13): pip install nvidia-cuda-cuobjdump"
        )
    env = dict(os.environ)
    nvdisasm = find_cuda_tool("nvdisasm")
    if nvdisasm:  # cuobjdump --dump-sass runs nvdisasm
        env["PATH"] = os.path.dirname(nvdisasm) + os.pathsep + env.get("PATH", "")
    elif flag == "--dump-sass":
        raise RuntimeError("SASS needs nvdisasm: pip install nvidia-cuda-nvdisasm")
    result = subprocess.run([tool, flag, str(path)], capture_output=True, text=True, env=env)
    if result.returncode != 0:
        raise RuntimeError(f"cuobjdump {flag} failed: {result.stderr.strip()}")
    return result.stdout


def device_code(path: Path) -> dict[str, list[str]]:
    """{'sass': ['sm_75', ...], 'ptx': ['sm_120', ...]} embedded in the binary's fatbin."""
    result = {}
    for kind, flag in (("sass", "--list-elf"), ("ptx", "--list-ptx")):
        found = re.findall(r"\.(sm_\d+a?f?)\.(?:cubin|ptx)", run_cuobjdump(flag, path))
        result[kind] = sorted(set(found), key=version_key)
    return result


def _toolkit_version(text: str) -> tuple[int, int]:
    """cuobjdump's toolkit field: '129' (ELF ABI 7) or '12.9' (ABI 8) -> (12, 9)."""
    if "." in text:
        major, minor = text.split(".", 1)
        return int(major), int(minor)
    return int(text[:-1]), int(text[-1])


def cubin_toolkits(path: Path) -> dict[str, tuple[int, int]]:
    """{'sm_90': (12, 9), ...}: the CUDA version of the compiler that made each cubin."""
    listing = run_cuobjdump("-elf", path)
    found = re.findall(r"\bsm=(\d+a?f?), toolkit=([\d.]+)", listing)
    return {f"sm_{arch}": _toolkit_version(version) for arch, version in found}


def ptx_isa_versions(path: Path) -> dict[str, tuple[int, int]]:
    """{'sm_120': (8, 8)}: the PTX ISA version (`.version`) of each embedded PTX."""
    listing = run_cuobjdump("-ptx", path)
    found = re.findall(r"^\.version (\d+)\.(\d+)\s*\n\.target (sm_\d+a?f?)", listing, re.M)
    return {target: (int(major), int(minor)) for major, minor, target in found}


@contextmanager
def extension_in(path: Path):
    """Yields the path of the extension .so: `path` itself, or extracted from a wheel."""
    path = Path(path)
    if path.is_dir():
        inside = sorted(p.name for p in path.iterdir() if p.suffix in (".whl", ".so"))
        hint = f": name one of {inside}" if inside else ": name a wheel (.whl) or a .so"
        raise RuntimeError(f"{path} is a directory{hint}")
    if path.suffix != ".whl":
        require_elf(path)
        yield path
        return
    with zipfile.ZipFile(path) as wheel, tempfile.TemporaryDirectory() as tmp:
        names = [n for n in wheel.namelist() if n.endswith(".so")]
        if len(names) != 1:
            raise RuntimeError(f"{path.name}: expected one extension .so, found {names}")
        so = Path(wheel.extract(names[0], tmp))
        require_elf(so)
        yield so


def elf_errors() -> tuple[type[BaseException], ...]:
    """pyelftools' exception for a damaged ELF file (truncated, bad tables)."""
    try:
        from elftools.common.exceptions import ELFError
    except ImportError:
        return ()
    return (ELFError,)


def require_elf(path: Path) -> None:
    """Refuses, with a plain reason, what no ELF tool can read whole: not ELF at all, or an
    ELF cut short (the tools' own errors on such input are tracebacks or 'Memory allocation
    failure')."""
    data = Path(path).read_bytes()
    if not data.startswith(b"\x7fELF"):
        raise RuntimeError(f"{Path(path).name} is neither a wheel (.whl) nor an ELF shared library")
    problem = elf_problem(data)
    if problem:
        raise RuntimeError(f"{Path(path).name} is not a readable ELF shared object ({problem})")


def elf_problem(data: bytes) -> str | None:
    """Why these bytes are not a whole ELF shared object, or None: checked against the
    file's size before any tool parses it (a truncated file makes parsers crash)."""
    from elftools.elf.elffile import ELFFile  # pyelftools: see the module's docstring

    size = len(data)
    if not data.startswith(b"\x7fELF"):
        return f"it does not start with the ELF magic (first bytes {data[:4]!r})"
    try:
        elf = ELFFile(io.BytesIO(data))
        header = elf.header
        ends = {
            "the program headers": header["e_phoff"] + header["e_phnum"] * header["e_phentsize"],
            "the section headers": header["e_shoff"] + header["e_shnum"] * header["e_shentsize"],
        }
        for what, end in ends.items():
            if end > size:
                return f"truncated: {what} end at byte {end}, the file has {size} bytes"
        for segment in elf.iter_segments():
            end = segment["p_offset"] + segment["p_filesz"]
            if end > size:
                kind = segment["p_type"]
                return f"truncated: segment {kind} ends at byte {end}, the file has {size}"
        for section in elf.iter_sections():
            end = section["sh_offset"] + section["sh_size"]
            if section["sh_type"] != "SHT_NOBITS" and end > size:
                return f"truncated: section {section.name} ends at byte {end}, the file has {size}"
        if elf.get_section_by_name(".dynamic") is None:
            return "it has no .dynamic section: not a shared library"
    # Whatever a malformed file makes pyelftools raise (ELFError, struct.error, ...) means
    # the same: not a readable ELF; never a traceback.
    except Exception as exc:
        return f"pyelftools cannot parse it: {exc}"
    return None
