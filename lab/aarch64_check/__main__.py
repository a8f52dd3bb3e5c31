"""The aarch64 wheel, run on this x86_64 machine under qemu-user emulation:

    make repair ARCH=aarch64
    python -m lab.aarch64_check check build/aarch64/wheelhouse/*.whl [--log LOG]

It sets up once, in build/cross/aarch64-env/: Debian's qemu-user; an aarch64 CPython 3.11
from Debian's arm64 packages, unpacked into a sysroot (never installed on this machine);
torch's aarch64 wheel with what it needs (PyPI's is a CUDA build: about 3 GB), installed
into a target folder. Then, each in a fresh emulated process: the CPU ops against
torch.add for every dtype, the ImportError a too-old torch gets, and `doctor`. The GPU
path needs an aarch64 GPU machine: the device code is the same bytes as the x86_64 wheel's,
which tests/release/test_newcomer.py checks.
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
from lab.cli_args import wheel_check_command
from lab.gpu.facts import Log, header

ENV = ROOT / "build" / "cross" / "aarch64-env"
SYSROOT = ENV / "sysroot"
SITE = ENV / "site"
# Debian 12's arm64 CPython 3.11 and the libraries it loads.
DEBS = [
    "python3.11",
    "python3.11-minimal",
    "libpython3.11-minimal",
    "libpython3.11-stdlib",
    "libc6",
    "libgcc-s1",
    "libstdc++6",
    "zlib1g",
    "libexpat1",
    "libssl3",
    "libffi8",
    "libbz2-1.0",
    "liblzma5",
    "libsqlite3-0",
    "libncursesw6",
    "libtinfo6",
    "libreadline8",
    "libuuid1",
    "libnsl2",
    "libtirpc3",
    "libgssapi-krb5-2",
    "libkrb5-3",
    "libk5crypto3",
    "libkrb5support0",
    "libkeyutils1",
    "libcom-err2",
    "libcrypt1",
    "libdb5.3",
    "libgdbm6",
    "libzstd1",
]
# pip --platform matches tags exactly: torch's CUDA dependencies use several.
PLATFORMS = [f"manylinux_2_{v}_aarch64" for v in range(28, 16, -1)] + [
    "manylinux2014_aarch64",
    "linux_aarch64",
    "any",
]
# qemu 7.2 shows the program the host's x86 /proc/cpuinfo, on which torch's cpuinfo
# crashes at import; qemu's -L maps absolute paths into the sysroot, so an aarch64 one
# there (Neoverse N1) is what torch reads.
CPUINFO = (
    "processor\t: {i}\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 "
    "crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp\nCPU implementer\t: 0x41\n"
    "CPU architecture: 8\nCPU variant\t: 0x3\nCPU part\t: 0xd0c\nCPU revision\t: 1\n\n"
)

OPS_CHECK = """
import platform, torch, cuda_ext_example
from cuda_ext_example import SUPPORTED_DTYPES, my_add, my_fast_add
print(platform.machine(), "| python", platform.python_version(), "| torch", torch.__version__,
      "| cuda_ext_example", cuda_ext_example.__version__,
      "| device code", cuda_ext_example.BUILD_INFO["device_compiler"])
bad = 0
for dtype in SUPPORTED_DTYPES:
    for n in (0, 1, 7, 1000, 100003):
        if dtype.is_floating_point:
            a, b = ((torch.randn(n) * 100).to(dtype) for _ in range(2))
        else:
            info = torch.iinfo(dtype)
            a, b = (torch.randint(info.min, info.max, (n,)).to(dtype) for _ in range(2))
        for op in (my_add, my_fast_add):
            out, ref = op(a, b), torch.add(a, b)
            as_bytes = (out.view(torch.uint8), ref.view(torch.uint8))
            same = out.dtype == ref.dtype and torch.equal(*as_bytes)
            if not same:
                bad += 1
                print("MISMATCH", op.__name__, dtype, n)
print(f"CPU ops, bitwise against torch.add: {len(SUPPORTED_DTYPES)} dtypes x 5 sizes x 2 ops, "
      f"{bad} mismatches")
raise SystemExit(1 if bad else 0)
"""
OLD_TORCH = """
import torch
torch.__version__ = "2.9.1"  # what an older torch would report
try:
    import cuda_ext_example
except ImportError as exc:
    print("ImportError:", exc)
    raise SystemExit(0 if "needs torch>=2.10" in str(exc) else 1)
raise SystemExit("imported under torch 2.9.1: no ImportError")
"""


def sh(*cmd, **kwargs) -> None:
    print("+", " ".join(map(str, cmd)), flush=True)
    subprocess.run([str(c) for c in cmd], check=True, **kwargs)


def python_cmd() -> list[str]:
    return ["qemu-aarch64", "-L", str(SYSROOT), str(SYSROOT / "usr" / "bin" / "python3.11")]


def setup() -> None:
    if shutil.which("qemu-aarch64") is None:
        sh("apt-get", "update", "-qq")
        sh("apt-get", "install", "-y", "-qq", "qemu-user")
    if not (SYSROOT / "usr" / "bin" / "python3.11").exists():
        arches = subprocess.run(
            ["dpkg", "--print-foreign-architectures"], capture_output=True, text=True
        ).stdout
        if "arm64" not in arches.split():
            sh("dpkg", "--add-architecture", "arm64")  # for apt-get download only
        sh("apt-get", "update", "-qq")
        debs = ENV / "debs"
        debs.mkdir(parents=True, exist_ok=True)
        sh("apt-get", "download", *(f"{d}:arm64" for d in DEBS), cwd=debs)
        for deb in sorted(debs.glob("*.deb")):
            sh("dpkg", "-x", deb, SYSROOT)
        (SYSROOT / "proc").mkdir(exist_ok=True)
        cpus = os.cpu_count() or 1
        (SYSROOT / "proc" / "cpuinfo").write_text("".join(CPUINFO.format(i=i) for i in range(cpus)))
    if not (SITE / "torch").exists():
        import importlib.metadata

        version = importlib.metadata.version("torch").split("+")[0]
        pip = [
            "--only-binary=:all:", *(a for p in PLATFORMS for a in ("--platform", p)),
            "--python-version", "3.11", "--implementation", "cp",
            "--abi", "cp311", "--abi", "abi3", "--abi", "none",
        ]  # fmt: skip
        wheels = ENV / "wheels"
        sh(sys.executable, "-m", "pip", "download", "-q", *pip, "-d", wheels, f"torch=={version}")
        sh(sys.executable, "-m", "pip", "install", "-q", "--no-index", "--find-links", wheels,
           "--target", SITE, *pip, f"torch=={version}")  # fmt: skip


def check(wheel: Path, log_path: Path) -> int:
    setup()
    target = Path(tempfile.mkdtemp(prefix="cee-aarch64-"))
    with zipfile.ZipFile(wheel) as zf:  # what pip --target installs (a wheel is a zip)
        zf.extractall(target)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(target), str(SITE)]))
    qemu = subprocess.run(["qemu-aarch64", "--version"], capture_output=True, text=True)
    log = Log(log_path)
    log.write(f"wheel: {wheel.name}")
    log.write(f"emulated: {qemu.stdout.splitlines()[0]}, Debian 12 arm64 CPython 3.11")
    log.write(f"the x86_64 machine that runs it:\n{header()}")
    here = tempfile.mkdtemp()
    emulated = [*python_cmd(), "-W", "ignore"]
    log.run("CPU ops for every dtype", [*emulated, "-c", OPS_CHECK], env=env, cwd=here)
    log.run("a too-old torch is refused", [*emulated, "-c", OLD_TORCH], env=env, cwd=here)
    log.run("doctor", [*emulated, "-m", "cuda_ext_example", "doctor"], env=env, cwd=here)
    log.write(f"\nfailed: {log.failed or 'none'}")
    return 1 if log.failed else 0


def main(argv: list[str] | None = None) -> int:
    return wheel_check_command(
        argv, prog="python -m lab.aarch64_check", doc=__doc__,
        help="the aarch64 wheel under qemu", check=check,
        log=ROOT / "build" / "cross" / "aarch64-check.log",
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
