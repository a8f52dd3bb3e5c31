"""The py3-none wheel, run on a free-threaded CPython (3.14t) on this machine:

    make repair
    python -m lab.free_threaded_check check wheelhouse/*.whl [--log LOG]

No registry this machine reaches serves a free-threaded CPython binary (python.org and
GitHub are out of reach; Debian and Ubuntu ship none), so it sets up once, in
build/free-threaded/: CPython's source from Ubuntu's archive (the orig tarball of its
python3.14 package, checked by SHA-256), configured with --disable-gil and built (about 10
minutes on 2 cores); a venv of it with torch's cp314t wheel from PyPI (a CUDA build, about
5 GB with its CUDA libraries) and pytest. Then: the GIL stays off after importing the
package, the CPU ops against torch from 8 threads at once, doctor, the smoke test and
tests/ops.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

from buildtools.config import ROOT
from lab.aarch64_check.__main__ import OPS_CHECK
from lab.cli_args import wheel_check_command
from lab.gpu.facts import Log, header

ENV = ROOT / "build" / "free-threaded"
SOURCE_URL = "http://archive.ubuntu.com/ubuntu/pool/main/p/python3.14/python3.14_3.14.4.orig.tar.xz"
SOURCE_SHA256 = "d923c51303e38e249136fc1bdf3568d56ecb03214efdef48516176d3d7faaef8"
PREFIX = ENV / "cpython"
PYTHON = PREFIX / "bin" / "python3.14t"
VENV = ENV / "venv"
# The newest torch with a cp314t wheel; tests/ops needs pytest and hypothesis.
PACKAGES = ["torch==2.13.0", "pytest", "hypothesis", "numpy"]
# pip sees PyPI alone: the wheels a user gets, not this machine's mirrors.
PYPI_ONLY = dict(os.environ, PIP_CONFIG_FILE=os.devnull)

THREADS_CHECK = """
import sys, threading, torch
import cuda_ext_example
from cuda_ext_example import my_add, my_rms_norm
print("GIL enabled after import:", sys._is_gil_enabled())
failures = []
def work(i):
    for _ in range(50):
        a, b = torch.randn(10007), torch.randn(10007)
        x, w = torch.randn(64, 1000), torch.randn(1000)
        ref = torch.nn.functional.rms_norm(x, (1000,), w, 1e-6)
        if not torch.equal(my_add(a, b), a + b) or not torch.allclose(my_rms_norm(x, w), ref,
                                                                       atol=1e-5):
            failures.append(i)
threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
for t in threads: t.start()
for t in threads: t.join()
print(f"8 threads x 50 calls of my_add and my_rms_norm: {len(failures)} wrong;",
      "GIL enabled after:", sys._is_gil_enabled())
raise SystemExit(1 if failures or sys._is_gil_enabled() else 0)
"""


def sh(*cmd, **kwargs) -> None:
    print("+", " ".join(map(str, cmd)), flush=True)
    if subprocess.run([str(c) for c in cmd], **kwargs).returncode != 0:
        raise SystemExit(f"free_threaded_check: the set-up step above failed: {cmd[0]}")


def build_python() -> None:
    tarball = ENV / Path(SOURCE_URL).name
    if not tarball.exists():
        ENV.mkdir(parents=True, exist_ok=True)
        try:
            urllib.request.urlretrieve(SOURCE_URL, tarball)
        except OSError as exc:
            raise SystemExit(f"free_threaded_check: cannot fetch {SOURCE_URL}: {exc}") from None
    digest = hashlib.sha256(tarball.read_bytes()).hexdigest()
    if digest != SOURCE_SHA256:
        tarball.unlink()
        raise SystemExit(f"{SOURCE_URL}: SHA-256 {digest}, expected {SOURCE_SHA256}")
    sh("tar", "xJf", tarball, "-C", ENV)
    source = ENV / "Python-3.14.4"
    sh("./configure", "--disable-gil", f"--prefix={PREFIX}", "--without-ensurepip", cwd=source,
       stdout=subprocess.DEVNULL)  # fmt: skip
    sh("make", f"-j{os.cpu_count() or 1}", cwd=source, stdout=subprocess.DEVNULL)
    sh("make", "install", cwd=source, stdout=subprocess.DEVNULL)


def setup() -> None:
    if not PYTHON.exists():
        build_python()
    if not (VENV / "bin" / "python").exists():
        sh(PYTHON, "-m", "venv", VENV)
        sh(VENV / "bin" / "python", "-m", "pip", "install", "-q", *PACKAGES, env=PYPI_ONLY)


def check(wheel: Path, log_path: Path) -> int:
    setup()
    python = str(VENV / "bin" / "python")
    sh(python, "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall", wheel,
       env=PYPI_ONLY)  # fmt: skip
    log = Log(log_path)
    log.write(f"wheel: {wheel.name}")
    version = subprocess.run([python, "-VV"], capture_output=True, text=True).stdout.strip()
    log.write(f"python: {version}\n{header()}")
    here = tempfile.mkdtemp()  # not the checkout: the installed package is what runs
    log.run("CPU ops for every dtype", [python, "-c", OPS_CHECK], cwd=here)
    log.run("GIL off, 8 threads", [python, "-c", THREADS_CHECK], cwd=here)
    log.run("doctor", [python, "-m", "cuda_ext_example", "doctor"], cwd=here)
    log.run("smoke test", [python, "-m", "cuda_ext_example", "smoke-test"], cwd=here)
    log.run("tests/ops", [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/ops"],
            cwd=ROOT)  # fmt: skip
    log.write(f"\nfailed: {log.failed or 'none'}")
    return 1 if log.failed else 0


def main(argv: list[str] | None = None) -> int:
    return wheel_check_command(
        argv, prog="python -m lab.free_threaded_check", doc=__doc__,
        help="the wheel on a free-threaded CPython 3.14t", log=ENV / "check.log", check=check,
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
