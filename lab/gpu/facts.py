"""The one header every GPU-machine log starts with (date, GPUs, driver, versions), and
the log that runs each step and records its output."""

from __future__ import annotations

import platform
import subprocess
from datetime import datetime, timezone
from pathlib import Path


def driver_version() -> str:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
        return out.splitlines()[0].strip()
    except (OSError, subprocess.SubprocessError, IndexError):
        return "unknown (no nvidia-smi)"


def machine_facts(now: datetime | None = None, measured: int | None = None) -> dict[str, str]:
    """Ordered facts for a log header; torch, Triton and the package where installed.
    `measured`: the CUDA device a benchmark runs on (see measured_gpu)."""
    now = now or datetime.now(timezone.utc)
    facts = {"date": now.strftime("%Y-%m-%d %H:%M UTC"), "python": platform.python_version()}
    try:
        import torch
    except ImportError:
        return facts
    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    facts.update(
        {
            "GPU": ", ".join(gpus) or "none",
            "driver": driver_version() if gpus else "none",
            "torch": torch.__version__,
            "CUDA": str(torch.version.cuda),
        }
    )
    if measured is not None:
        facts = measured_gpu(facts, gpus, measured)
    try:
        import triton

        facts["triton"] = triton.__version__
    except ImportError:
        pass
    try:
        import cuda_ext_example

        record = getattr(cuda_ext_example, "BUILD_INFO", {})  # {}: not a built package
        facts["cuda_ext_example"] = package_line(
            getattr(cuda_ext_example, "__version__", "?"), record
        )
    except ImportError as exc:
        facts["cuda_ext_example"] = f"not importable: {exc}"
    return facts


def package_line(version: str, record: dict) -> str:
    """'0.1.0 (83ec0f08d2e0+dirty, device code by ...)': a wheel built from uncommitted
    changes says so, so no log credits a commit with code it did not have."""
    commit = record.get("git_commit", "?")[:12] + ("+dirty" if record.get("git_dirty") else "")
    return f"{version} ({commit}, device code by {record.get('device_compiler', '?')})"


def measured_gpu(facts: dict[str, str], names: list[str], current: int) -> dict[str, str]:
    """The facts of a run that measures one GPU, the current one: "GPU" names that GPU (a
    benchmark's title and file names come from it), not every GPU of the machine."""
    if not names:
        return facts
    facts = dict(facts, GPU=names[current])
    if len(names) > 1:
        facts["measured"] = f"cuda:{current} of {len(names)} GPUs ({', '.join(names)})"
    return facts


def benchmark_facts(now: datetime | None = None) -> dict[str, str]:
    """machine_facts for a benchmark, which runs on the current CUDA device."""
    import torch

    current = torch.cuda.current_device() if torch.cuda.is_available() else None
    return machine_facts(now, measured=current)


def header(now: datetime | None = None) -> str:
    return "\n".join(f"{k}: {v}" for k, v in machine_facts(now).items())


class Log:
    """Prints and appends to a log file; counts failed steps."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.path.write_text("")
        self.failed: list[str] = []

    def write(self, text: str) -> None:
        print(text, flush=True)
        with self.path.open("a") as f:
            f.write(text + "\n")

    def run(self, title: str, cmd: list, **kwargs) -> int:
        """Runs cmd, its output streamed line by line into the log: a run cut off by a
        time limit still shows how far it got."""
        self.write(f"\n===== {title}")
        with subprocess.Popen(
            [str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            **kwargs,
        ) as child:  # fmt: skip
            for line in child.stdout:
                self.write(line.rstrip("\n"))
        self.write(f"[exit {child.returncode}]")
        if child.returncode != 0:
            self.failed.append(title)
        return child.returncode
