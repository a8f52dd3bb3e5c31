"""The gates that are other people's tools, pinned in requirements/dev.lock: twine check,
check-wheel-contents and Quansight's torch-abi-audit. Each runs after the gates that make
sure the wheel's zip and binaries are whole: a tool that crashes on a damaged file gives no
verdict, and its own fix would be the wrong one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from buildtools import config
from scripts.inspect import binary_info

from .binaries import LIBRARY, Finding, binary_files, refuse_first
from .failure import GateFailure

# torch-abi-audit 0.3.0 runs on Python >= 3.11 (requirements/dev.in pins it there).
TORCH_ABI_AUDIT_RUNS = sys.version_info >= (3, 11)
TORCH_ABI_AUDIT_SKIPPED = (
    None
    if TORCH_ABI_AUDIT_RUNS
    else "it needs Python >= 3.11; the torch shims gate checks the same promise"
)


def python_tool(module: str) -> list[str]:
    """A release tool pinned in the venv, run as `python -m` by the running Python: found
    wherever the venv's packages come from, with or without its scripts on PATH."""
    return [sys.executable, "-m", module]


def tool_name(cmd: list) -> str:
    return str(cmd[2]) if cmd[1:2] == ["-m"] else Path(str(cmd[0])).name


def run_tool(gate: str, cmd: list[str], fix: str) -> None:
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        output = (result.stdout + result.stderr).strip()
        if "Traceback (most recent call last)" in output:
            # A crash is no verdict on the wheel: its fix would be the wrong one.
            raise GateFailure(
                gate,
                f"`{tool_name(cmd)}` crashed reading the wheel (no verdict):\n{output[-2000:]}",
                "find the file it could not read (the gates before it check that every ELF is "
                "whole); if the wheel is sound, report the crash to the tool and pin another "
                "version in requirements/dev.in",
            )
        raise GateFailure(gate, f"`{tool_name(cmd)} ...` failed:\n{output}", fix)


def gate_twine_check(wheel: Path) -> None:
    run_tool(
        "twine-check",
        [*python_tool("twine"), "check", "--strict", str(wheel)],
        "fix the package metadata in pyproject.toml (README must render)",
    )


def gate_check_wheel_contents(wheel: Path) -> None:
    run_tool(
        "check-wheel-contents",
        [*python_tool("check_wheel_contents"), str(wheel)],
        "remove stray or duplicate files from the package (see the codes above)",
    )


# ------------------------------------------------------------- torch-abi-audit


def torch_abi_audit_findings(
    so: Path, cfg: config.BuildConfig, uses_torch: bool = True
) -> list[Finding]:
    """Quansight's torch-abi-audit (PyPI) beside our own shim gate: a second, independent
    reading of the binary's torch symbols. `uses_torch`: the file must use torch (the
    library does; a reading without any torch symbol means nm could not read it)."""
    try:
        from torch_abi_audit.inspect import inspect_extension
    except ImportError:
        raise GateFailure(
            "torch-abi-audit",
            "torch-abi-audit is not installed in the release venv",
            "pip install torch-abi-audit==0.3.0 (requirements/dev.in; make venv)",
        ) from None
    report = inspect_extension(so)
    verdict = report.torch
    problems = []
    if report.error:
        problems.append(f"it could not read the binary: {report.error}")
    elif uses_torch and not verdict.uses_torch:
        # It reads symbols with the system's nm; one that cannot read this ELF makes an
        # empty list, which must not pass as a clean bill.
        problems.append(
            "it saw no torch symbol at all (is binutils' nm installed and able "
            "to read this CPU's ELF?)"
        )
    if verdict.unstable_symbols:
        problems.append(f"unstable libtorch symbols: {', '.join(verdict.unstable_symbols[:10])}")
    if verdict.unknown_shim_symbols:
        problems.append(f"shims it does not know: {', '.join(verdict.unknown_shim_symbols)}")
    minimum = verdict.min_torch_version
    if minimum and binary_info.version_key(minimum)[:2] > binary_info.version_key(cfg.torch_target):
        problems.append(
            f"min torch {minimum} (from {', '.join(verdict.version_defining_symbols)}) is above "
            f"the declared target {cfg.torch_target}"
        )
    if not problems:
        return []
    return [
        (
            "is refused by torch-abi-audit: " + "; ".join(problems),
            f"use only the LibTorch stable ABI (torch/csrc/stable, no c10::/at::/torch:: C++ "
            f"symbols) and compile with -DTORCH_TARGET_VERSION for {cfg.torch_target} "
            "(buildtools/build_ext.py)",
        )
    ]


def gate_torch_abi_audit(wheel: Path, cfg: config.BuildConfig) -> None:
    with binary_files(wheel) as found:
        for name, so in found.items():
            findings = torch_abi_audit_findings(so, cfg, uses_torch=name == LIBRARY)
            refuse_first("torch-abi-audit", name, findings)
