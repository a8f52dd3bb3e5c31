"""Runs the gate table on one wheel: the gates of its platform, in the table's order; the
first failure raises GateFailure with what was wrong and how to fix it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from buildtools import config
from buildtools.toolchain import torch_paths
from scripts.cli_args import wheel_problem

from .failure import GateFailure
from .table import GATES, gates_for
from .tags import TARGETS, wheel_arch


def run_gates(wheel: Path, log=print) -> None:
    """Runs every gate of the wheel's platform in order; the first failure raises."""
    wheel = Path(wheel)
    problem = wheel_problem(wheel)  # before the gates, each of which opens it as a zip
    if problem:
        raise GateFailure(
            "wheel",
            f"{wheel}: {problem}",
            "pass the repaired wheel (make repair: wheelhouse/*.whl)",
        )
    cfg = config.load(dev_spec="")  # what a release must carry, whatever $CEE_SASS_ARCHS says
    torch_include, _ = torch_paths()
    for gate in gates_for(wheel_arch(wheel)):
        if gate.skipped:
            log(f"  gate skipped: {gate.name} ({gate.skipped})", flush=True)
            continue
        gate.bound(cfg, torch_include)(wheel)
        log(f"  gate ok: {gate.title(cfg)}", flush=True)


def all_gates(
    cfg: config.BuildConfig, torch_include: Path, target: str = "x86_64"
) -> list[tuple[str, Callable[[Path], None]]]:
    """(name, check of the wheel alone) of each gate run_gates runs for `target` here."""
    return [
        (gate.title(cfg), gate.bound(cfg, torch_include))
        for gate in gates_for(target)
        if not gate.skipped
    ]


def gate_list(cfg: config.BuildConfig) -> str:
    """The table as a release engineer reads it: each gate in the order they run, the
    platforms it runs for, what it refuses and the usual fix."""
    lines = []
    for number, gate in enumerate(GATES, 1):
        platforms = ", ".join(t for t in TARGETS if t in gate.platforms)
        skipped = f" (skipped here: {gate.skipped})" if gate.skipped else ""
        lines += [
            f"{number:2}. {gate.title(cfg)} [{platforms}]{skipped}",
            f"    refuses: {gate.refuses}",
            f"    fix:     {gate.fix}",
        ]
    return "\n".join(lines)
