"""A wheel with more ops, for the cold-start measurement: does an op's first call grow with
the number of ops in the library?

    python -m lab.gpu coldstart-wheel [--extra 10] [--archs 90]

Copies this checkout (its tracked and new files, as git sees them; build outputs and .venv
left out) into a temporary folder, adds `--extra` synthetic ops there, each a copy of
ops/add with a rule struct and a name of its own (extra_add_01 ... : rule ExtraAdd01, the
vectorized kernel, so 9 dtypes x every launch shape, like my_fast_add), and builds that
wheel with this environment's tools, as `make wheel ARCHS=...` does (a dev build: SASS for
--archs only, which the release gates refuse; `--archs all` builds every declared target).
`--extra 0` builds the checkout as it is, the same way: the baseline of equal archs. The
wheel lands in build/gpu/wheels/coldstart/<ops>-ops-<archs>/ (e.g. 13-ops-90), which `python
-m lab.gpu coldstart` takes on the GPU machine (a subfolder: the suite never installs it
next to the real wheel). The checkout itself is not changed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from buildtools import declarations
from buildtools.config import ROOT

OUT = ROOT / "build" / "gpu" / "wheels" / "coldstart"
# What a wheel build reads (buildtools/build_ext.py BUILD_INPUTS, and the sdist's files).
TREE = ("csrc", "ops", "src", "buildtools", "tuning", "requirements", "pyproject.toml",
        "setup.py", "MANIFEST.in", "README.md", "LICENSE")  # fmt: skip


class BuildFailed(RuntimeError):
    pass


def copy_checkout(dest: Path) -> Path:
    """The checkout's build inputs as git sees them (tracked and new, not ignored), or all of
    TREE where there is no git; the fetched NVRTC 12.0 (build/nvrtc-12.0) linked, so the
    copy downloads nothing."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", *TREE],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    if listed.returncode == 0:
        for name in filter(None, listed.stdout.split("\0")):
            if (ROOT / name).is_file():
                (dest / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / name, dest / name)
    else:
        for name in TREE:
            copy = shutil.copytree if (ROOT / name).is_dir() else shutil.copy2
            copy(ROOT / name, dest / name)
    for fetched in (ROOT / "build").glob("nvrtc-*"):
        (dest / "build").mkdir(exist_ok=True)
        (dest / "build" / fetched.name).symlink_to(fetched)
    return dest


def add_ops(tree: Path, count: int) -> list[str]:
    """`count` copies of ops/add under tree/ops/extra_add_NN/: rule ExtraAddNN, one vectorized
    op extra_add_NN each. Returns their names."""
    rule_h = (tree / "ops" / "add" / "rule.h").read_text()
    if "struct Add " not in rule_h:
        raise BuildFailed("ops/add/rule.h has no `struct Add`: nothing to copy the ops from")
    names = []
    for i in range(1, count + 1):
        name, rule = f"extra_add_{i:02d}", f"ExtraAdd{i:02d}"
        folder = tree / "ops" / name
        folder.mkdir(parents=True)
        (folder / "rule.h").write_text(
            "// A synthetic copy of ops/add/rule.h (lab/gpu/synthetic_ops.py).\n"
            + re.sub(r"\bstruct Add\b", f"struct {rule}", rule_h)
        )
        (folder / "ops.toml").write_text(
            "# A synthetic copy of ops/add (lab/gpu/synthetic_ops.py): the cold-start "
            "measurement's.\n"
            f'rule = "{rule}"\n'
            'inputs = ["a", "b"]\n'
            'reference = "torch.add(a, b)"\n\n'
            '[derivatives]\na = "1"\nb = "1"\n\n'
            f'[[op]]\nname = "{name}"\nkernel = "vectorized"\n'
            f'doc = "a + b: a synthetic copy of my_fast_add ({rule})."\n'
        )
        names.append(name)
    declared = [op.name for op in declarations.load(tree / "ops").ops]
    missing = [n for n in names if n not in declared]
    if missing:
        raise BuildFailed(f"the copy does not declare {missing}")
    return names


def build(tree: Path, archs: str) -> Path:
    """`make wheel ARCHS=<archs>` in the copy, with this Python (its tools); the wheel."""
    dist = tree / "dist"
    env = dict(os.environ, CEE_SASS_ARCHS="" if archs == "all" else archs)
    env.setdefault("SOURCE_DATE_EPOCH", _commit_time())
    run = subprocess.run([sys.executable, "-m", "buildtools.build_wheel", dist], cwd=tree, env=env)
    wheels = sorted(dist.glob("*.whl"))
    if run.returncode != 0 or len(wheels) != 1:
        raise BuildFailed(f"the wheel build in {tree} failed (exit {run.returncode}, see above)")
    return wheels[0]


def _commit_time() -> str:
    out = subprocess.run(["git", "log", "-1", "--format=%ct"], cwd=ROOT, capture_output=True,
                         text=True)  # fmt: skip
    return out.stdout.strip() or "0"


def build_wheel(extra: int, archs: str, out: Path = OUT) -> Path:
    """The checkout plus `extra` synthetic ops, built; the wheel's path under out/."""
    with tempfile.TemporaryDirectory(prefix="cee-ops-") as tmp:
        tree = copy_checkout(Path(tmp))
        names = add_ops(tree, extra)
        total = len(declarations.load(tree / "ops").ops)
        synthetic = f"{len(names)} synthetic: {', '.join(names[:2])} .." if names else "none added"
        print(f"coldstart-wheel: {total} ops ({synthetic}), archs {archs}, in {tree}", flush=True)
        wheel = build(tree, archs)
        dest = out / f"{total}-ops-{archs.replace(' ', '_')}"
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        return Path(shutil.copy2(wheel, dest / wheel.name))
