"""Refuses, at once and with the reason, to build where the build cannot serve.

The build links against glibc 2.17 with zig and against torch's Linux libtorch_cpu.so,
and its wheels are the only supported way to run the package: anything but 64-bit Linux
on x86_64 or aarch64 gets this message instead of a long failed compile (pyproject's build
requirements carry the same platform markers, so nothing large is installed first).
"""

from __future__ import annotations

import platform

SUPPORTED = {("Linux", "x86_64"), ("Linux", "aarch64")}
# Spelt out: this runs before anything reads pyproject.toml. tests/release/test_install_paths.py
# checks it against the declared floors (buildtools/config.py).
WHEELS = (
    "Linux x86_64 and aarch64 (py3-none-manylinux2014_x86_64 / _aarch64: every CPython >= "
    "3.10, free-threaded too, glibc >= 2.17) and Windows x86_64 (py3-none-win_amd64, "
    "cross-built on Linux)"
)


def unsupported_reason(system: str, machine: str) -> str | None:
    if (system, machine) in SUPPORTED:
        return None
    return (
        f"cuda_ext_example cannot be built on {system} {machine}. It ships wheels for "
        f"{WHEELS} only; the source build runs on Linux x86_64 or aarch64 alone (zig links "
        "against glibc 2.17 and torch's libraries; the Windows wheel is cross-built there). "
        "Install the wheel (pip picks it), or build on Linux, a container, or WSL2 on "
        "Windows; see https://github.com/cuda-ext-example/cuda_ext_example"
    )


def require_supported_platform(system: str | None = None, machine: str | None = None) -> None:
    reason = unsupported_reason(system or platform.system(), machine or platform.machine())
    if reason:
        raise SystemExit(reason)
