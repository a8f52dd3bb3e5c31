"""A real package index (pypiserver) on 127.0.0.1, for releases that stay on this machine."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def local_index(package_dir: Path, log_file: Path):
    """Serves package_dir on http://127.0.0.1:PORT/ (uploads open, no fallback to
    pypi.org); yields the base URL and stops the server on exit."""
    package_dir.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    cmd = [
        sys.executable, "-m", "pypiserver",
        "run",
        "--host", "127.0.0.1",
        "--port", str(port),
        "--authenticate", ".",
        "--passwords", ".",
        "--disable-fallback",
        str(package_dir),
    ]  # fmt: skip
    url = f"http://127.0.0.1:{port}/"
    with open(log_file, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        try:
            _wait_until_up(url, proc, log_file)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()


def _wait_until_up(url: str, proc: subprocess.Popen, log_file: Path, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"pypiserver exited at start; see {log_file}")
        try:
            with urllib.request.urlopen(url + "simple/", timeout=2):
                return
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.2)
    raise RuntimeError(f"pypiserver did not answer on {url} within {timeout} s; see {log_file}")
