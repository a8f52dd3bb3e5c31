"""The release pipeline: build, auditwheel show, repair, gates, upload, prove.

    python -m scripts.release release [--wheel WHEEL] [--repository local|testpypi|pypi]
    python -m scripts.release repair WHEEL      # auditwheel show + repair only (make repair)
    python -m scripts.release gates WHEEL       # the blocking gates only
    python -m scripts.release gates --list      # what each gate refuses, and the fix

With no --repository, `release` starts a real package index (pypiserver) on
127.0.0.1, uploads there, installs cuda_ext_example from it into a fresh venv
and runs `python -m cuda_ext_example smoke-test` there: the whole path, on any machine.
Every step prints its start and its time; the first failure stops the run with
what was wrong and how to fix it.
"""

from __future__ import annotations

import argparse
import http.client
import os
import platform
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
import venv
import zipfile
from contextlib import ExitStack
from pathlib import Path

from buildtools import config
from scripts.cli_args import file_problem, wheel_problem

from .artifacts import normalize_sdist, read_sha256sums, verify_served, write_sha256sums
from .gates import GateFailure, gate_list, python_tool, run_gates, tool_name, wheel_arch
from .local_index import local_index
from .simple_index import project_files

ROOT = config.ROOT

# Never bundled: these come from the user's torch and NVIDIA driver. Bundling
# them would load a second copy next to torch's (or pin one CUDA/torch build).
REPAIR_EXCLUDES = (
    "libtorch_cpu.so",
    "libtorch_python.so",
    "libc10.so",
    "libtorch*",
    "libc10*",
    "libshm*",
    "libcudart.so*",
    "libcuda.so*",
    "libnvrtc*",
    "libcublas*",
    "libgomp*",
)
SIMPLE_URLS = {"pypi": "https://pypi.org/simple/", "testpypi": "https://test.pypi.org/simple/"}
NOTEBOOK = ROOT / "notebooks" / "colab_smoke_test.ipynb"
DEFAULT_OUT = ROOT / "build" / "release"


class StepFailure(Exception):
    def __init__(self, reason: str, fix: str):
        super().__init__(f"{reason}\n  how to fix: {fix}")


def run(cmd: list[str], fix: str, **kwargs) -> subprocess.CompletedProcess:
    """Runs a command, echoing it; its failure stops the pipeline with `fix`."""
    print("  +", " ".join(str(c) for c in cmd), flush=True)
    result = subprocess.run([str(c) for c in cmd], **kwargs)
    if result.returncode != 0:
        raise StepFailure(f"`{tool_name(cmd)} ...` exited with {result.returncode}", fix)
    return result


class Pipeline:
    def __init__(self, steps: int, earlier: list[tuple[str, float]] = ()):
        self.total = steps
        self.done = 0
        # (step, seconds) of every step, those the caller ran before (make's wheel builds) first.
        self.times: list[tuple[str, float]] = list(earlier)

    def summary(self) -> str:
        """Each step's time, and the total: where a release spends its minutes."""
        width = max(len(name) for name, _ in self.times)
        rows = [f"  {name:<{width}} {seconds:7.1f} s" for name, seconds in self.times]
        total = sum(seconds for _, seconds in self.times)
        return "\n".join(["step times:", *rows, f"  {'total':<{width}} {total:7.1f} s"])

    def step(self, name: str, func, *args):
        self.done += 1
        print(f"\n==> [{self.done}/{self.total}] {name}", flush=True)
        start = time.monotonic()
        try:
            result = func(*args)
        # BadZipFile: a damaged wheel (a whole zip file passes zipfile.is_zipfile's look).
        except (StepFailure, GateFailure, RuntimeError, OSError, zipfile.BadZipFile) as failure:
            took = time.monotonic() - start
            print(f"<== FAILED: {name} after {took:.1f} s\n{failure}", file=sys.stderr, flush=True)
            raise SystemExit(1) from None
        took = time.monotonic() - start
        self.times.append((name, took))
        print(f"<== {name}: ok ({took:.1f} s)", flush=True)
        return result


# ------------------------------------------------------------------ the steps


def build_wheel_and_sdist(given_wheel: Path | None, out: Path) -> tuple[Path, Path]:
    dist = out / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    fix = "see the compiler output above; `make wheel` builds the same way"
    if given_wheel is None:
        for stale in [*ROOT.glob("build/lib.*"), *ROOT.glob("build/bdist.*")]:
            shutil.rmtree(stale)  # setuptools' staging keeps files the sources dropped
        run(
            [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", dist, ROOT],
            fix,
        )
        (given_wheel,) = dist.glob("*.whl")
    run([sys.executable, "-m", "build", "--sdist", "--no-isolation", "--outdir", dist, ROOT], fix)
    (sdist,) = dist.glob("*.tar.gz")
    normalize_sdist(sdist, config.source_date_epoch())
    return Path(given_wheel), sdist


def auditwheel_show(wheel: Path) -> None:
    run(
        [*python_tool("auditwheel"), "show", wheel],
        "auditwheel could not read the wheel; is it a Linux x86_64 wheel?",
    )


def keep_windows_wheel(wheel: Path, out_dir: Path, clean: bool = True) -> Path:
    """A Windows wheel has nothing to repair (auditwheel reads Linux wheels; the DLL needs
    only torch's DLL, the system's and the C runtime, which its gates check): it goes to the
    wheelhouse as built."""
    if clean:
        shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir(parents=True, exist_ok=True)
    kept = out_dir / wheel.name
    shutil.copy(wheel, kept)
    print(f"  {wheel.name}: a Windows wheel, kept as built (no auditwheel: nothing to graft)")
    return kept


def is_windows_wheel(wheel: Path) -> bool:
    return wheel_arch(wheel) == config.WINDOWS


def auditwheel_repair(wheel: Path, out_dir: Path, clean: bool = True) -> Path:
    if clean:
        shutil.rmtree(out_dir, ignore_errors=True)
    excludes = [arg for pattern in REPAIR_EXCLUDES for arg in ("--exclude", pattern)]
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    arch = wheel_arch(wheel)
    # The platform tag from pyproject's glibc floor (manylinux2014 for 2.17). auditwheel
    # names only this machine's CPU in --plat; for a cross-built wheel `auto` takes the CPU
    # from the wheel and the lowest policy it meets, and the py3-none tag gate checks that
    # this is the floor's tag for that CPU.
    cfg = config.load()
    target = cfg.manylinux_tag(arch)
    plat = target if arch == platform.machine() else "auto"
    run(
        [*python_tool("auditwheel"), "repair", "--plat", plat, *excludes, "-w", out_dir, wheel],
        f"the binary needs something {target} does not allow (see auditwheel); the extension "
        f"must be linked by zig for glibc {cfg.glibc} (buildtools/build_ext.py)",
        env=env,
    )
    (repaired,) = out_dir.glob(f"*{wheel_arch(wheel)}*.whl")
    return repaired


def check_sdist(sdist: Path) -> None:
    run(
        [*python_tool("twine"), "check", "--strict", sdist],
        "fix the sdist metadata in pyproject.toml",
    )


def refuse_existing(simple_url: str, files: list[Path]) -> None:
    version = config.load().version
    existing = project_files(simple_url, "cuda_ext_example")
    clash = [f.name for f in files if f.name in existing]
    same_version = [name for name in existing if f"-{version}-" in name or f"-{version}." in name]
    if clash or same_version:
        raise StepFailure(
            f"version {version} is already on {simple_url} ({sorted(set(clash + same_version))}); "
            "an index never takes the same version twice",
            "bump [project] version in pyproject.toml and release again",
        )


def verify_upload(simple_url: str, sums: Path) -> None:
    problems = verify_served(simple_url, read_sha256sums(sums))
    if problems:
        raise StepFailure(
            "the index does not serve what was built: " + "; ".join(problems),
            "do not announce this release; yank it and find who changed the files",
        )
    print(f"  every file of {sums.name} downloaded from the index: sha256 matches")


def upload(repository_args: list[str], files: list[Path], env: dict) -> None:
    # Credentials come from twine's own config (~/.pypirc, keyring) or TWINE_*
    # environment variables; they are never on the command line or printed.
    run(
        [*python_tool("twine"), "upload", "--non-interactive", "--disable-progress-bar",
         *repository_args, *files],
        "see twine's message (credentials: TWINE_USERNAME/TWINE_PASSWORD or ~/.pypirc)",
        env=env,
    )  # fmt: skip


def make_venv(path: Path, see_ours: bool = False) -> Path:
    """A fresh venv; see_ours: it also sees the running Python's packages (a .pth file:
    `--system-site-packages` would see the base interpreter's, not a venv's own)."""
    shutil.rmtree(path, ignore_errors=True)
    venv.EnvBuilder(with_pip=True, clear=True).create(path)
    if see_ours:
        paths = sysconfig.get_paths()
        ours = dict.fromkeys([*sys.path[1:], paths["purelib"], paths["platlib"]])
        (site,) = path.glob("lib/python3*/site-packages")
        (site / "see-ours.pth").write_text("".join(f"{p}\n" for p in ours if p))
    return path / "bin" / "python"


def prove(simple_url: str, torch_spec: str | None, notebook: bool, out: Path) -> None:
    """Fresh venv, torch first (so the resolver never pulls a multi-GB CUDA
    torch), then cuda_ext_example from the index, then the smoke test.
    torch_spec None: the venv sees this Python's packages (torch, and the notebook
    tools), for a machine with no network, such as a GPU machine."""
    python = make_venv(out / "verify-venv", see_ours=torch_spec is None)
    pip = [python, "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    if torch_spec is not None:
        extra = ["ipykernel", "nbclient", "nbformat"] if notebook else []
        run([*pip, torch_spec, *extra], f"could not install {torch_spec} (use --torch)")
    env = dict(os.environ, PIP_INDEX_URL=simple_url, PIP_NO_CACHE_DIR="1")
    if torch_spec is None:
        # The venv sees our packages, maybe an installed cuda_ext_example among them:
        # install the index's into the venv itself, which comes first on its path.
        run([*pip, "--ignore-installed", "--no-deps", "cuda_ext_example"], "see pip", env=env)
    if notebook:
        # The notebook's own `!pip install cuda_ext_example` is the install step.
        execute_notebook(python, env, out / "colab_smoke_test.executed.ipynb")
    else:
        run([*pip, "--index-url", simple_url, "cuda_ext_example"], "see pip's message", env=env)
    with tempfile.TemporaryDirectory() as tmp:  # not the source tree: test the install
        run(
            [python, "-c", "import sys, cuda_ext_example as c; print('  from', c.__file__); "
             "sys.exit(not c.__file__.startswith(sys.prefix))"],
            "the smoke test would not run the package from the index (see the path above)",
            cwd=tmp,
        )  # fmt: skip
        run(
            [python, "-m", "cuda_ext_example", "smoke-test"],
            "the installed package gave wrong results or failed to import (see above)",
            cwd=tmp,
        )


def execute_notebook(python: Path, env: dict, executed: Path) -> None:
    code = (
        "import sys, nbformat, nbclient\n"
        "nb = nbformat.read(sys.argv[1], as_version=4)\n"
        "nbclient.NotebookClient(nb, timeout=900, kernel_name='python3').execute()\n"
        "nbformat.write(nb, sys.argv[2])\n"
        "text = ''.join(o.get('text', '') for c in nb.cells for o in c.get('outputs', []))\n"
        "print(text)\n"
        "sys.exit(0 if 'SMOKE TEST PASSED' in text else 1)\n"
    )
    with tempfile.TemporaryDirectory() as tmp:
        run(
            [python, "-c", code, NOTEBOOK, executed],
            f"the notebook failed; the executed copy is {executed}",
            env=env,
            cwd=tmp,
        )
    print(f"  executed notebook written to {executed}")


# ---------------------------------------------------------------- commands


def refuse_bad_files(command: str, files: list[Path], fix: str, wheels: bool = True) -> None:
    """Before the slow steps (builds, venvs, the index): each file is there (with wheels: a
    .whl zip file); else one line naming it, and exit 1."""
    for path in files:
        problem = wheel_problem(path) if wheels else file_problem(path)
        if problem:
            raise SystemExit(f"scripts.release {command}: {path}: {problem}; {fix}")


def cmd_repair(args) -> Path:
    refuse_bad_files("repair", [args.wheel], "pass the wheel `make wheel` built (dist/*.whl)")
    windows = is_windows_wheel(args.wheel)
    pipeline = Pipeline((3 if args.gate else 2) - windows)
    if not windows:
        pipeline.step("auditwheel show", auditwheel_show, args.wheel)
    step, make = (
        ("keep the Windows wheel", keep_windows_wheel)
        if windows
        else ("auditwheel repair", auditwheel_repair)
    )
    repaired = pipeline.step(step, make, args.wheel, args.dest)
    if args.gate:
        pipeline.step("gates", run_gates, repaired)
    return repaired


def cmd_prove(args) -> None:
    """The prove step alone, for built files: served by a local index (copied in, as an
    upload would put them), installed into a fresh venv, smoke-tested."""
    fix = "pass the repaired wheel (and sdist) of the release (build/release/)"
    refuse_bad_files("prove", args.files, fix, wheels=False)  # a wheel and maybe an sdist
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as index_dir:
        for path in args.files:
            shutil.copy(path, index_dir)
        with local_index(Path(index_dir), out / "pypiserver.log") as base:
            print(f"  local index: {base} serving {[p.name for p in args.files]}")
            torch_spec = None if args.system_torch else args.torch or default_torch_spec()
            Pipeline(1).step(
                "prove: fresh venv, pip install cuda_ext_example, smoke test",
                prove, base + "simple/", torch_spec, args.notebook, out,
            )  # fmt: skip


def cmd_verify(args) -> None:
    """An index's files against SHA256SUMS, retried while they are not there yet
    (PyPI's CDN takes a moment after an upload)."""
    # The cheap checks first: the sums file and the URL, before any network.
    fix = "pass the SHA256SUMS the release wrote (build/release/SHA256SUMS)"
    try:
        expected = read_sha256sums(args.sums)
    except OSError as err:
        reason = f"cannot read {args.sums}: {err.strerror}"
        raise SystemExit(f"scripts.release verify: {reason}; {fix}") from None
    except ValueError as err:
        raise SystemExit(f"scripts.release verify: {err}; {fix}") from None
    if not args.index.startswith(("http://", "https://")):
        raise SystemExit(
            f"scripts.release verify: --index {args.index} is no http(s) URL; pass a simple "
            "index's, e.g. https://pypi.org/simple/"
        )
    deadline = time.monotonic() + args.wait
    while True:
        try:
            problems = verify_served(args.index, expected)
        except (OSError, http.client.HTTPException) as err:  # URLError is an OSError
            reason = getattr(err, "reason", None) or err
            raise SystemExit(
                f"scripts.release verify: cannot read the index {args.index}: {reason}; check "
                "the URL (a simple index, e.g. https://pypi.org/simple/) and the network"
            ) from None
        missing = [p for p in problems if p.endswith("not on the index")]
        if not problems or missing != problems or time.monotonic() > deadline:
            break
        time.sleep(15)
    if problems:
        print("\n".join(f"MISMATCH {p}" for p in problems), file=sys.stderr)
        raise SystemExit(1)
    print(f"{args.index} serves every file of {args.sums} with its sha256")


def cmd_gates(args) -> None:
    if args.list:
        print(gate_list(config.load(dev_spec="")))
        return
    if args.wheel is None:
        print(
            "python -m scripts.release gates: name the wheel to gate (or --list)", file=sys.stderr
        )
        raise SystemExit(2)
    Pipeline(1).step("gates", run_gates, args.wheel)


def default_torch_spec() -> str:
    import importlib.metadata

    version = importlib.metadata.version("torch").split("+")[0]
    return f"torch=={version}"


def cmd_release(args) -> None:
    # The given wheels before the sdist's build.
    fix = "pass the wheel `make wheel` built (dist/*.whl)"
    refuse_bad_files("release", args.wheel or [], fix)
    # Every step below (the build, auditwheel, the sdist) writes this time, not now's.
    os.environ.setdefault("SOURCE_DATE_EPOCH", str(config.source_date_epoch()))
    local = args.repository == "local"
    n_wheels = len(args.wheel or [None])
    n_windows = sum(is_windows_wheel(w) for w in args.wheel or [])
    steps = 4 + 3 * n_wheels - n_windows + (2 if args.repository != "none" else 0) + local
    pipeline = Pipeline(steps, earlier_steps(args.earlier_steps))
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    given = args.wheel or [None]  # several --wheel: one per CPU (make release)
    wheel, sdist = pipeline.step("build wheel and sdist", build_wheel_and_sdist, given[0], out)
    wheels = [wheel, *given[1:]]
    repaired = []
    for i, each in enumerate(wheels):
        if is_windows_wheel(each):
            repaired.append(
                pipeline.step(
                    f"keep the Windows wheel ({wheel_arch(each)})",
                    keep_windows_wheel,
                    each,
                    out / "wheelhouse",
                    i == 0,
                )  # fmt: skip
            )
            continue
        pipeline.step(f"auditwheel show ({wheel_arch(each)})", auditwheel_show, each)
        repaired.append(
            pipeline.step(
                f"auditwheel repair ({wheel_arch(each)})",
                auditwheel_repair,
                each,
                out / "wheelhouse",
                i == 0,
            )  # fmt: skip
        )
    for each in repaired:
        pipeline.step(f"gates ({wheel_arch(each)})", run_gates, each)
    pipeline.step("twine check --strict (sdist)", check_sdist, sdist)
    files = [*repaired, sdist]
    sums = pipeline.step("SHA256SUMS", write_sha256sums, files, out / "SHA256SUMS")
    if args.repository == "none":
        pipeline.step("ready (no upload)", lambda: print("\n".join(f"  {f}" for f in files)))
        print("\n" + pipeline.summary())
        return
    with ExitStack() as stack:
        if local:
            index_dir = args.index_dir or Path(stack.enter_context(tempfile.TemporaryDirectory()))
            base = stack.enter_context(local_index(index_dir, out / "pypiserver.log"))
            print(f"  local index: {base} (packages in {index_dir})")
            simple = base + "simple/"
            repo_args = ["--repository-url", base]
            env = dict(os.environ, TWINE_USERNAME="local", TWINE_PASSWORD="local")
        else:
            simple = SIMPLE_URLS[args.repository]
            repo_args = ["--repository", args.repository]
            env = dict(os.environ)
        pipeline.step(
            f"check {simple} has no {config.load().version}", refuse_existing, simple, files
        )
        pipeline.step("upload", upload, repo_args, files, env)
        pipeline.step("verify: the index serves the built bytes", verify_upload, simple, sums)
        if local:
            pipeline.step(
                "prove: fresh venv, pip install cuda_ext_example, smoke test",
                prove, simple, None if args.system_torch else args.torch or default_torch_spec(),
                args.notebook, out,
            )  # fmt: skip
    print("\n" + pipeline.summary())
    print("\nrelease done")


def earlier_steps(path: Path | None) -> list[tuple[str, float]]:
    """(step, seconds) lines `make release` wrote for the steps it ran first (the wheels)."""
    if path is None or not path.is_file():
        return []
    steps = []
    for line in path.read_text().splitlines():
        name, _, seconds = line.rpartition(" ")
        if name and seconds.isdigit():
            steps.append((name, float(seconds)))
    return steps


def add_prove_options(parser) -> None:
    parser.add_argument("--torch", help="torch to pre-install in the proving venv (default: ours)")
    parser.add_argument(
        "--notebook", action="store_true", help="also run the Colab notebook headless"
    )
    parser.add_argument(
        "--system-torch",
        action="store_true",
        help="prove in a venv that sees this Python's torch (no network needed)",
    )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("release", help="build, show, repair, gate, upload, prove")
    p.add_argument(
        "--wheel",
        type=Path,
        action="append",
        help="use this built (unrepaired) wheel instead of building; repeat for each CPU",
    )
    p.add_argument(
        "--repository",
        choices=["local", "testpypi", "pypi", "none"],
        default="local",
        help="local (default): a pypiserver started on 127.0.0.1; none: stop after the gates",
    )
    p.add_argument("--index-dir", type=Path, help="keep the local index's packages here")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where everything goes")
    p.add_argument(
        "--earlier-steps",
        type=Path,
        help="a file of `<step> <seconds>` lines (make release's wheel builds) for the summary",
    )
    add_prove_options(p)
    p.set_defaults(func=cmd_release)
    q = sub.add_parser("prove", help="the prove step alone, for built files")
    q.add_argument("files", type=Path, nargs="+", help="repaired wheel (and sdist) to serve")
    q.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where everything goes")
    add_prove_options(q)
    q.set_defaults(func=cmd_prove)
    q = sub.add_parser("repair", help="auditwheel show + repair (make repair, cibuildwheel)")
    q.add_argument("wheel", type=Path)
    q.add_argument("--dest", type=Path, default=ROOT / "wheelhouse")
    q.add_argument("--gate", action="store_true", help="then run the gates on the result")
    q.set_defaults(func=cmd_repair)
    q = sub.add_parser("verify", help="an index's files against SHA256SUMS")
    q.add_argument("sums", type=Path)
    q.add_argument("--index", required=True, help="simple index URL, e.g. https://pypi.org/simple/")
    q.add_argument("--wait", type=float, default=0, help="seconds to wait for missing files")
    q.set_defaults(func=cmd_verify)
    q = sub.add_parser("gates", help="the blocking gates only")
    q.add_argument("wheel", type=Path, nargs="?")
    q.add_argument("--list", action="store_true", help="list the gates: what each refuses, the fix")
    q.set_defaults(func=cmd_gates)
    args = parser.parse_args(argv)
    args.func(args)


if __name__ == "__main__":
    main()
