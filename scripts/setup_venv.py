"""Sets up the project venv (make venv): the tools of requirements/dev.lock, hashes checked.

Runs under whatever `python3` a newcomer has, so it first checks what the project needs
(CPython >= 3.10, Linux on x86_64 or aarch64, a working venv module, a reachable package
index) and ends a failure with one line saying what is wrong and what to do, never a
resolver dump: pip's own output goes to build/venv-setup.log.

Written in Python 3.6 syntax, so that an old python3 (Ubuntu 20.04's 3.8, say) reaches the
version check and its message instead of a SyntaxError.
"""

import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile

PYPI = "https://pypi.org/simple/"
SUPPORTED_CPUS = ("x86_64", "aarch64")
# What a first set-up fetches, measured (README "Set-up"): the size tells a user on a slow
# link what they are in for before pip's first progress line.
FIRST_DOWNLOAD = "about 3 GB, 5.8 GB installed, mostly torch and its CUDA libraries"
# Disk a first install needs, measured 2026-11-24 (PyPI, pip's cache off): the venv ends at
# 5.8 GB, and pip keeps the downloaded wheels (3.0 GB) in its temporary directory until the
# last package is installed. pip's cache, where it is on, stores the downloads once more.
VENV_BYTES = 5.8e9
DOWNLOAD_BYTES = 3.0e9


def fail(message):
    sys.stderr.write("setup failed: " + message + "\n")
    sys.exit(1)


def check_python():
    if sys.version_info < (3, 10):  # noqa: UP036 - runs under any python3 a newcomer has
        fail(
            f"cuda_ext_example needs CPython >= 3.10 as python3; this is "
            f"{platform.python_version()} ({sys.executable}). Install 3.10 to 3.14 and run make "
            "again, or name one: make PYTHON_BOOTSTRAP=python3.12 ..."
        )


def check_platform():
    system, machine = platform.system(), platform.machine()
    if system != "Linux" or machine not in SUPPORTED_CPUS:
        fail(
            f"the build and its tests need Linux on x86_64 or aarch64; this is {system} "
            f"{machine} (use a Linux machine, a container, or WSL2 on Windows)"
        )


def configured_index(python):
    """The index pip is told to use (environment or pip config), or None for PyPI."""
    if os.environ.get("PIP_NO_INDEX", "").lower() in ("1", "true", "yes", "on"):
        return "no index (PIP_NO_INDEX)"  # pip reads only its find-links: PyPI is not asked
    if os.environ.get("PIP_INDEX_URL"):
        return os.environ["PIP_INDEX_URL"]
    out = subprocess.run(
        [python, "-m", "pip", "config", "list"], capture_output=True, text=True
    ).stdout
    match = re.search(r"^\S*index-url='([^']+)'", out, re.M)
    return match.group(1) if match else None


def check_pypi_reachable(timeout=15):
    """A quick look at PyPI before pip starts: pip's own retries on a dead network take
    minutes before they give up."""
    import ssl
    import urllib.request

    cafile = os.environ.get("PIP_CERT") or os.environ.get("SSL_CERT_FILE")
    context = ssl.create_default_context(cafile=cafile)
    try:
        urllib.request.urlopen(PYPI + "pip/", timeout=timeout, context=context).close()
    except Exception as exc:  # any failure here means the same thing to the user
        fail(
            f"cannot reach PyPI ({PYPI}: {getattr(exc, 'reason', exc)}). The set-up downloads "
            "the tools from PyPI: check the network, or set HTTPS_PROXY (and PIP_CERT for a "
            "proxy's CA)."
        )


def space_needed(venv, temp_dir):
    """What a first install needs on each disk: [(a path on it, bytes)], one per disk."""
    needs = {}
    for path, size in ((venv, VENV_BYTES), (temp_dir, DOWNLOAD_BYTES)):
        path = os.path.abspath(path)
        while not os.path.exists(path):  # the venv folder may not exist yet
            path = os.path.dirname(path)
        device = os.stat(path).st_dev
        where, total = needs.get(device, (path, 0))
        needs[device] = (where, total + size)
    return list(needs.values())


def free_space_problem(venv, temp_dir=None):
    """Why a first install would fill a disk, in one line; None when there is room."""
    for path, need in space_needed(venv, temp_dir or tempfile.gettempdir()):
        free = shutil.disk_usage(path).free
        if free < need:
            return (
                f"the first set-up needs about {need / 1e9:.1f} GB free on the disk of {path} "
                f"(the venv, and pip's downloads until it is done); {free / 1e9:.1f} GB are "
                "free. Free some space, or point TMPDIR at another disk, and run make again"
            )
    return None


def create_venv(venv):
    python = os.path.join(venv, "bin", "python")
    if os.access(python, os.X_OK):
        return python
    run = subprocess.run([sys.executable, "-m", "venv", venv], capture_output=True, text=True)
    if run.returncode != 0:
        if "ensurepip" in run.stdout + run.stderr:
            fail(
                "this Python cannot make a venv with pip (Debian/Ubuntu: apt install "
                f"python{sys.version_info[0]}.{sys.version_info[1]}-venv), then run make again"
            )
        fail(f"python3 -m venv {venv} failed: {(run.stderr or run.stdout).strip()}")
    return python


# pip's words in its log -> what is wrong, in one line. First match wins: a dead network
# also ends in 'no matching distribution', so it comes first.
DIAGNOSES = [
    (r"No space left on device",
     "the disk is full: the venv needs 5.8 GB, pip's downloads 3.0 GB more until it is "
     "done, and pip's cache 3 GB more again (PIP_NO_CACHE_DIR=1 turns it off)"),
    (r"THESE PACKAGES DO NOT MATCH THE HASHES",
     "a file from your package index does not have the hash that {lock} pins (a mirror "
     "that rebuilt a file?): use PyPI (PIP_CONFIG_FILE=/dev/null PIP_INDEX_URL= make ...)"),
    (r"NewConnectionError|Failed to establish|Name or service not known|Temporary failure "
     r"in name resolution|Max retries exceeded|ReadTimeout|ConnectTimeout|SSLError",
     "downloads from the package index failed (network, proxy or TLS)"),
    (r"(?:No matching distribution found for|Could not find a version that satisfies "
     r"the requirement) (\S+)",
     "{lock} pins {0}, which your package index has no file of for CPython {py} on "
     "{plat}; supported: CPython 3.10 to 3.14 on Linux x86_64/aarch64 with PyPI"),
]  # fmt: skip


def diagnose(log_text, lock):
    facts = {
        "lock": lock,
        "py": platform.python_version(),
        "plat": f"{platform.system()} {platform.machine()}",
    }
    for pattern, message in DIAGNOSES:
        match = re.search(pattern, log_text)
        if match:
            return message.format(*match.groups(), **facts)
    return f"pip could not install {lock}"


def install_lock(python, lock, log_path):
    print(f"setup: installing {lock} into {python} (first time: {FIRST_DOWNLOAD})")
    print(f"setup: pip's output goes to {log_path}")
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    with open(log_path, "w") as log:
        run = subprocess.run(
            [python, "-m", "pip", "install", "--disable-pip-version-check",
             "--progress-bar", "off", "--require-hashes", "-r", lock],
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    if run.returncode != 0:
        with open(log_path) as log:
            text = log.read()
        tail = [line for line in text.splitlines() if line.strip()][-8:]
        sys.stderr.write("".join(f"  | {line}\n" for line in tail))
        fail(f"{diagnose(text, lock)} (pip's whole output: {log_path})")


def main(argv):
    check_python()
    check_platform()
    venv, lock = argv[1], argv[2]
    log_path = argv[3] if len(argv) > 3 else os.path.join("build", "venv-setup.log")
    if not os.path.exists(venv):  # a first install: will it fit? (not minutes into pip)
        problem = free_space_problem(venv)
        if problem:
            fail(problem)
    python = create_venv(venv)
    if configured_index(python) is None:
        check_pypi_reachable()
    install_lock(python, lock, log_path)


if __name__ == "__main__":
    main(sys.argv)
