"""`python -m cuda_ext_example doctor`: will this wheel run here, and if not, why?

Gathers the facts (Python, torch, driver, GPUs) into an Environment, judges
them against the wheel's build record, then runs every declared op on each device.
The judging is pure (no torch, no GPU) so every mismatch can be tested.
"""

from __future__ import annotations

import ctypes
import platform
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

OK, WARN, FAIL = "ok", "warn", "FAIL"
# The NVIDIA driver's library, which the launcher opens at the first CUDA call.
DRIVER_LIBRARY = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"


def cuda_version_number(version: str) -> int:
    """'12.9' -> 12090, the encoding of cuDriverGetVersion() (1000 * major + 10 * minor)."""
    major, minor = (int(x) for x in version.split(".")[:2])
    return 1000 * major + 10 * minor


def cuda_version_text(number: int) -> str:
    return f"{number // 1000}.{number % 1000 // 10}"


@dataclass
class Gpu:
    index: int
    name: str
    capability: tuple[int, int]


@dataclass
class Environment:
    python: tuple[int, int]
    torch_version: str | None  # None: torch is not installed
    torch_cuda: str | None  # torch.version.cuda; None for a CPU-only build
    driver: int | None  # cuDriverGetVersion(); None: no NVIDIA driver
    gpus: list[Gpu] = field(default_factory=list)
    load_error: str | None = None  # why `import cuda_ext_example` failed, if it did
    free_threaded: bool = False  # a CPython built without the GIL (3.13t, 3.14t)


@dataclass
class Finding:
    level: str
    topic: str
    message: str

    def __str__(self) -> str:
        return f"[{self.level:>4}] {self.topic}: {self.message}"


def _arch_number(arch: str) -> int:
    """'sm_90' / 'compute_120' / 'sm_90a' -> 90 / 120 / 90."""
    return int("".join(ch for ch in arch.split("_", 1)[1] if ch.isdigit()))


def judge_gpu(
    gpu: Gpu, sass: list[str], ptx: str, driver: int | None = None, device_cuda: str | None = None
) -> Finding:
    """SASS for the exact arch, or an older minor of the same major (binary
    compatible), runs as is; else PTX no newer than the GPU is JIT-compiled by
    the driver at first call, if the driver knows that CUDA's PTX; else nothing
    in the wheel can run there."""
    major, minor = gpu.capability
    cc = major * 10 + minor
    label = f"cuda:{gpu.index} {gpu.name} (sm_{cc})"
    sass_numbers = [_arch_number(a) for a in sass]
    if cc in sass_numbers:
        return Finding(OK, label, f"SASS sm_{cc} in the wheel")
    same_major = [n for n in sass_numbers if n // 10 == major and n <= cc]
    if same_major:
        return Finding(OK, label, f"runs the wheel's sm_{max(same_major)} SASS (same major)")
    if ptx and _arch_number(ptx) <= cc:
        if driver and device_cuda and driver < cuda_version_number(device_cuda):
            return Finding(
                FAIL,
                label,
                f"no SASS for sm_{cc}, and the wheel's {ptx} PTX is CUDA {device_cuda}'s, which "
                f"this CUDA {cuda_version_text(driver)} driver cannot JIT-compile: update the "
                f"driver to one for CUDA >= {device_cuda}",
            )
        return Finding(
            WARN,
            label,
            f"no SASS for sm_{cc}; the driver JIT-compiles the wheel's {ptx} PTX at the first "
            "call (seconds; cached afterwards in ~/.nv/ComputeCache)",
        )
    return Finding(
        FAIL,
        label,
        f"NOT COVERED: this wheel has no code for sm_{cc}, so its CUDA kernels cannot "
        f"run on this GPU (the CPU kernels still do). The wheel has SASS {', '.join(sass)} "
        f"and PTX {ptx or 'none'}. CUDA 12 compiles for sm_50 and newer: for a GPU it knows, "
        f'build from source with "{cc}" under its CUDA in pyproject.toml '
        "[tool.cuda_ext_example.sass-archs] and `make wheel`",
    )


def judge_launch_shapes(gpu: Gpu, tables: dict[str, str]) -> Finding:
    """Which launch-shape table the vectorized kernels take on this GPU: its own, measured
    (looked up by the name the driver reports, as torch prints it), or the default (correct,
    and the least worst over the measured GPUs, but not tuned for this one)."""
    label = f"cuda:{gpu.index} launch shapes"
    if gpu.name in tables:
        return Finding(OK, label, f"measured on this GPU ({tables[gpu.name]})")
    measured = ", ".join(name for name in tables if name != "default") or "none"
    return Finding(
        OK,
        label,
        f"the default table: no table was measured on a {gpu.name} (measured: {measured}). A "
        "checkout's `make tune-wheel` then `python -m lab.tune measure` on this GPU make one",
    )


def judge(env: Environment, record: dict) -> list[Finding]:
    """Every finding about this machine against the wheel's build record (pure)."""
    findings = []
    if not record:
        from ._loader import UNBUILT

        findings.append(Finding(FAIL, "build", f"{UNBUILT}: `make install` in the checkout"))
    findings += judge_python(env.python, env.free_threaded, record.get("requires_python"))
    findings += judge_torch(env, record.get("torch_target"))
    if env.load_error:
        findings.append(Finding(FAIL, "import", env.load_error))

    findings += judge_driver(env.driver, record)
    findings += judge_torch_cuda(env.torch_cuda, env.driver)
    if env.driver is not None and not env.gpus:
        findings.append(Finding(WARN, "gpus", "driver present but torch sees no GPU"))
    for gpu in env.gpus if record else []:
        findings.append(
            judge_gpu(
                gpu,
                record.get("sass_archs", []),
                record.get("ptx_arch", ""),
                env.driver,
                record.get("device_cuda"),
            )
        )
        if "launch_shapes" in record:
            findings.append(judge_launch_shapes(gpu, record["launch_shapes"]["tables"]))
    return findings


def judge_python(
    python: tuple[int, int], free_threaded: bool, requires: str | None
) -> list[Finding]:
    """The library uses no CPython API (py3-none): any CPython at or above the Python
    code's floor, free-threaded ones included."""
    py = ".".join(map(str, python)) + ("t (free-threaded)" if free_threaded else "")
    floor = (requires or "").removeprefix(">=")
    if not floor:
        return [Finding(OK, "python", py)]
    from ._loader import version_tuple

    if python >= version_tuple(floor):
        return [
            Finding(
                OK,
                "python",
                f"{py} (the wheel is py3-none: its library uses no CPython API; the package "
                f"needs CPython >= {floor})",
            )
        ]
    return [Finding(FAIL, "python", f"{py}; the package needs CPython >= {floor}")]


def judge_torch(env: Environment, minimum: str | None) -> list[Finding]:
    from ._loader import version_tuple

    needs = f">={minimum}" if minimum else ""
    if env.torch_version is None:
        return [Finding(FAIL, "torch", f"not installed; pip install 'torch{needs}'")]
    if minimum is None:
        findings = [Finding(OK, "torch", env.torch_version)]
    elif version_tuple(env.torch_version) >= version_tuple(minimum):
        findings = [Finding(OK, "torch", f"{env.torch_version} (needs >= {minimum})")]
    else:
        findings = [
            Finding(
                FAIL,
                "torch",
                f"{env.torch_version} is older than {minimum}, the stable ABI this wheel "
                f"targets; pip install -U 'torch>={minimum}'",
            )
        ]
    if env.torch_cuda is None:
        findings.append(
            Finding(WARN, "torch CUDA", "CPU-only torch build: only the CPU kernels can run")
        )
    else:
        findings.append(Finding(OK, "torch CUDA", f"built with CUDA {env.torch_cuda}"))
    return findings


def judge_driver(driver: int | None, record: dict) -> list[Finding]:
    """CUDA minor-version compatibility: the wheel's CUDA 12 device code runs on any
    driver of CUDA >= 12.0 (>= 525.60.13) for every GPU it has SASS for."""
    floor = record.get("min_driver_cuda")
    floor_driver = record.get("min_driver")
    device_cuda = record.get("device_cuda")
    if driver is None:
        return [Finding(WARN, "driver", f"no NVIDIA driver found ({DRIVER_LIBRARY}): CPU only")]
    have = cuda_version_text(driver)
    if not (floor and device_cuda):
        return [Finding(OK, "driver", f"supports CUDA {have}")]
    if driver < cuda_version_number(floor):
        return [
            Finding(
                FAIL,
                "driver",
                f"CUDA {have} driver; the wheel's GPU kernels need a driver for CUDA >= {floor} "
                f"(>= {floor_driver}). Update the NVIDIA driver",
            )
        ]
    findings = [
        Finding(
            OK,
            "driver",
            f"supports CUDA {have}; the wheel's CUDA {device_cuda} device code needs >= {floor} "
            f"(>= {floor_driver})",
        )
    ]
    if driver < cuda_version_number(device_cuda):
        findings.append(
            Finding(
                WARN,
                "driver",
                f"GPUs with SASS in the wheel run; a GPU newer than the wheel's archs would need "
                f"the driver to JIT-compile CUDA {device_cuda} PTX, which needs a driver for "
                f"CUDA >= {device_cuda}",
            )
        )
    return findings


# The oldest driver each CUDA major runs on (NVIDIA's minor-version compatibility), and
# torch's own index of builds for that major (torch >= 2.10 has none for CUDA 11).
DRIVER_FOR_CUDA_MAJOR = {12: "525.60.13", 13: "580.65.06"}
TORCH_INDEX_FOR_CUDA_MAJOR = {12: "https://download.pytorch.org/whl/cu128"}


def judge_torch_cuda(torch_cuda: str | None, driver: int | None) -> list[Finding]:
    """torch's CUDA build against the driver: PyPI's default torch is a CUDA 13 build,
    which a driver for CUDA 12 cannot run, while this wheel's kernels would. torch then
    sees no GPU: torch's problem, said apart from ours, with what to install instead."""
    if torch_cuda is None or driver is None:
        return []
    major = int(torch_cuda.split(".")[0])
    if driver >= 1000 * major:
        return []
    index = TORCH_INDEX_FOR_CUDA_MAJOR.get(driver // 1000)
    instead = (
        f"pip install torch --index-url {index} (a torch built for CUDA {driver // 1000}) "
        "or update the NVIDIA driver"
        if index
        else "update the NVIDIA driver"
    )
    return [
        Finding(
            FAIL,
            "torch vs driver",
            f"torch is built with CUDA {torch_cuda}, which needs a driver for CUDA >= {major}.0 "
            f"(>= {DRIVER_FOR_CUDA_MAJOR.get(major, 'a newer driver')}); this driver supports "
            f"CUDA {cuda_version_text(driver)}, so torch cannot use the GPU (this wheel's "
            f"kernels could): {instead}",
        )
    ]


# ------------------------------------------------------------- fact gathering


def system_floor(record: dict) -> str:
    """'glibc >= 2.17' for a Linux wheel's record; the Windows wheel's has no glibc floor."""
    floor = record.get("glibc_floor")
    return f"glibc >= {floor}" if floor else "Windows x86_64"


def driver_version() -> int | None:
    """cuDriverGetVersion through libcuda directly: works without nvidia-smi."""
    try:
        libcuda = ctypes.CDLL(DRIVER_LIBRARY)
    except OSError:
        return None
    version = ctypes.c_int(0)
    if libcuda.cuDriverGetVersion(ctypes.byref(version)) != 0:
        return None
    return version.value


def gather(load_error: ImportError | None) -> Environment:
    env = Environment(
        python=sys.version_info[:2],
        free_threaded=bool(sysconfig.get_config_var("Py_GIL_DISABLED")),
        torch_version=None,
        torch_cuda=None,
        driver=driver_version(),
        load_error=str(load_error) if load_error else None,
    )
    try:
        import torch
    except ImportError:
        return env
    env.torch_version = torch.__version__
    env.torch_cuda = torch.version.cuda
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            cap = torch.cuda.get_device_capability(i)
            env.gpus.append(Gpu(i, torch.cuda.get_device_name(i), cap))
    return env


def tiny_runs(env: Environment) -> list[Finding]:
    """Every declared op against its reference (1000 elements, float32 or the op's first
    dtype; bit for bit or within its declared tolerance) and the classic int64 arange
    add, per device."""

    import cuda_ext_example
    from cuda_ext_example.op_checks import classic_arange, mismatches

    names = " ".join(cuda_ext_example.OP_NAMES)
    findings = []
    devices = ["cpu"] + [f"cuda:{g.index}" for g in env.gpus]
    for device in devices:
        try:
            wrong = mismatches(cuda_ext_example, device, dtype=None)
            if not classic_arange(cuda_ext_example.my_add, device):
                wrong.append("my_add on torch.arange(5)")
            if wrong:
                raise RuntimeError(f"wrong results: {', '.join(wrong)}")
            findings.append(Finding(OK, f"run on {device}", f"{names} match their references"))
        except Exception as exc:  # report every failure, keep checking the other devices
            findings.append(Finding(FAIL, f"run on {device}", f"{type(exc).__name__}: {exc}"))
    return findings


def built_from(record: dict) -> str:
    """When and from what: a clean build carries its commit's time (same commit, same
    bytes); a build of uncommitted changes carries the time it was made."""
    commit = str(record.get("git_commit", "?"))[:12]
    when = record.get("build_time_utc")
    if record.get("git_dirty"):
        return f"built {when} from uncommitted changes on {commit}"
    return f"built from commit {commit} (commit time {when})"


def compilers_line(record: dict) -> str:
    """'compiled by: NVRTC 12.0: sm_50 ... sm_90; NVRTC 12.9: sm_100 ... compute_120'."""
    by_compiler: dict[str, list[str]] = {}
    for target, compiler in record.get("device_compilers", {}).items():
        by_compiler.setdefault(compiler, []).append(target)
    parts = [f"{compiler}: {' '.join(targets)}" for compiler, targets in by_compiler.items()]
    return "compiled by: " + ("; ".join(parts) or "unknown (an older build record)")


def main() -> int:
    import cuda_ext_example

    record = cuda_ext_example.BUILD_INFO
    print(f"cuda_ext_example doctor ({platform.machine()}, {platform.platform()})")
    if record:
        print(
            f"wheel: {record.get('version')} {built_from(record)}"
            f", device code by {record.get('device_compiler')}"
            f"{' (DEV BUILD: not for release)' if record.get('dev_build') else ''}\n"
            f"       SASS {' '.join(record.get('sass_archs', []))}, PTX {record.get('ptx_arch')}, "
            f"torch stable ABI {record.get('torch_target')}, {system_floor(record)}, "
            f"driver >= {record.get('min_driver')} (CUDA {record.get('min_driver_cuda')})\n"
            f"       {compilers_line(record)}"
        )
    else:
        print(f"wheel: no build record next to {Path(__file__).parent}")
    env = gather(cuda_ext_example.LOAD_ERROR)
    findings = judge(env, record)
    if cuda_ext_example.LOAD_ERROR is None:
        findings += tiny_runs(env)
    for finding in findings:
        print(finding)
    failed = [f for f in findings if f.level == FAIL]
    print(
        f"\nverdict: {'will NOT run as is' if failed else 'ready'} "
        f"({len(failed)} problems, {sum(f.level == WARN for f in findings)} warnings)"
    )
    return 1 if failed else 0
