"""Fresh clones of this repository, run as a newcomer would: with this venv's tools, or
with nothing but python3 and PyPI (this machine's local package mirrors hidden)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# pip configuration keys that add places packages come from.
SOURCE_KEYS = ("index-url", "extra-index-url", "find-links", "constraint", "requirement")
# Environment that points pip or uv at other sources; what is left (PIP_CERT, proxies)
# is how this machine reaches PyPI at all.
SOURCE_ENV = tuple(
    f"{tool}_{key.upper().replace('-', '_')}" for tool in ("PIP", "UV") for key in SOURCE_KEYS
) + ("PIP_NO_INDEX", "UV_INDEX", "UV_DEFAULT_INDEX", "UV_CONFIG_FILE", "UV_OVERRIDE")


def typed_make_env() -> dict[str, str]:
    """This environment without what a make running the tests (`make test`) hands its
    children: a make started with it acts as one a user typed (no "make[1]:" prefixes)."""
    return {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}


def readme_commands() -> list[str]:
    """The README's first code block: the main job's command, then the tests'."""
    block = re.search(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)
    return [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]


def doc_files(doc: Path) -> dict[str, str]:
    """path -> content of every ```lang file=PATH block of a page: a recipe's files."""
    return dict(re.findall(r"^```\w+ file=(\S+)\n(.*?)^```$", doc.read_text(), re.M | re.S))


def clone_with_doc_files(tmp_path: Path, doc: Path) -> Path:
    """A clone with this venv's tools and a page's recipe files written into it, repaired
    (`make repair`: built, audited, gated by the release's repair step)."""
    repo = clone_with_tools(tmp_path)
    for path, text in doc_files(doc).items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    built = make(repo, "repair")
    assert built.returncode == 0, (built.stdout + built.stderr)[-4000:]
    return repo


def pip_config() -> dict[str, list[str]]:
    """`pip config list` (files and PIP_* variables) as key -> values."""
    out = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True
    ).stdout
    config: dict[str, list[str]] = {}
    for key, value in re.findall(r"^(\S+?)='(.*)'$", out, re.M):
        config.setdefault(key.rsplit(".", 1)[-1], []).extend(value.split())
    return config


def local_path(value: str) -> Path | None:
    """A local path named by a pip setting (a file:// URL or a plain path)."""
    if value.startswith("file://"):
        return Path(value[len("file://") :])
    return Path(value) if value.startswith("/") else None


def local_package_sources() -> list[Path]:
    """The local places this machine's pip configuration takes packages from."""
    config = pip_config()
    paths = [local_path(v) for key in SOURCE_KEYS for v in config.get(key, [])]
    return sorted({p for p in paths if p is not None and p.exists()})


def configured_paths() -> list[str]:
    """Every local path pip's configuration names (sources, certificates, ...); a
    configuration switched off (PIP_CONFIG_FILE=/dev/null) names none."""
    paths = [local_path(v) for values in pip_config().values() for v in values]
    return sorted({str(p) for p in paths if p is not None and str(p) != os.devnull})


def pypi_only(command: str) -> list[str]:
    """`command` in a private mount namespace where every local package source is covered
    (a directory by an empty tmpfs, a file by /dev/null), run with pypi_only_env()."""
    mounts = [
        f"mount -t tmpfs none {shlex.quote(str(p))}"
        if p.is_dir()
        else f"mount --bind /dev/null {shlex.quote(str(p))}"
        for p in local_package_sources()
    ]
    script = " && ".join([*mounts, command])
    return ["unshare", "-m", "--propagation", "private", "sh", "-c", script]


def pypi_only_env() -> dict[str, str]:
    """This environment with pip's configuration files off and no variable naming a
    package source: pip and uv see PyPI alone."""
    env = {k: v for k, v in os.environ.items() if k not in SOURCE_ENV}
    env = {k: v for k, v in env.items() if not k.startswith(("VIRTUAL_ENV", "CUDA"))}
    return {**env, "PIP_CONFIG_FILE": os.devnull}


def clone(dest: Path) -> Path:
    subprocess.run(["git", "clone", "-q", ROOT, dest], check=True)
    return dest


def clone_with_tools(tmp_path: Path) -> Path:
    """A fresh clone whose .venv reuses this venv's installed tools (a .pth file), so the
    test needs no download; the clone installs its own wheel into its own .venv."""
    repo = clone(tmp_path / "clone")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", repo / ".venv"], check=True)
    purelib = Path(sysconfig.get_paths()["purelib"])
    (site,) = (repo / ".venv" / "lib").glob("python3*/site-packages")
    (site / "project-tools.pth").write_text(f"{purelib}\n")
    (repo / ".venv" / ".installed").touch()  # make's venv stamp: tools are there
    return repo


def make(repo: Path, *targets: str, hide_cuda: bool = False) -> subprocess.CompletedProcess:
    """make TARGETS in a clone made by clone_with_tools; hide_cuda: /usr/local (and so any
    CUDA toolkit) covered, nvcc and ptxas off PATH."""
    tools = str(Path(sys.executable).parent)  # auditwheel, twine, pre-commit, ...
    path = [tools] + [p for p in os.environ["PATH"].split(os.pathsep) if p != tools]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUDA", "VIRTUAL_ENV"))}
    command = shlex.join(["make", "-C", str(repo), *targets])
    if hide_cuda:
        path = [p for p in path if not p.startswith("/usr/local")]
        command = (
            "mount -t tmpfs none /usr/local && test ! -e /usr/local/cuda && "
            f"! command -v nvcc && ! command -v ptxas && {command}"
        )
        cmd = ["unshare", "-m", "--propagation", "private", "sh", "-c", command]
    else:
        cmd = ["sh", "-c", command]
    return subprocess.run(
        cmd, capture_output=True, text=True, env={**env, "PATH": os.pathsep.join(path)}
    )
