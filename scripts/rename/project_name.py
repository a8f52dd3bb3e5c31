"""Gives the project another name across its tracked files.

    python -m scripts.rename my_kernels

One name serves as the distribution name, the import name, the op namespace
(torch.ops.<name>), the pyproject table [tool.<name>] and the JIT namespace
(<name>_jit); so it must be a lowercase Python identifier that is also a C++ one.
Every tracked text file but the license has the old name replaced in its three spellings
(snake_case, kebab-case for URLs and installers' reports, UPPER_CASE for environment
variables); tracked paths that contain it are moved with `git mv`. Nothing is
committed: review with `git status` and `git diff`, then `make repair`.
"""

from __future__ import annotations

import argparse
import keyword
import re
import subprocess
import sys
from pathlib import Path

from buildtools import config

ROOT = config.ROOT
VALID_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
# Names a package of this project must not take: they would shadow what it imports.
TAKEN = {"torch", "triton", "numpy", "setuptools", "wheel", "build", "scripts", "buildtools", "lab"}
# The copyright notice names the authors of the original: the BSD license requires it
# to be kept as it is, so a renamed copy keeps it.
KEPT_AS_IS = re.compile(r"^(LICENSE|COPYING|NOTICE)(\.\w+)?$")


class RenameError(Exception):
    pass


def current_name(root: Path = ROOT) -> str:
    """The distribution name pyproject.toml declares now."""
    return config.tomllib.loads((root / "pyproject.toml").read_text())["project"]["name"]


def check_new_name(new: str, old: str) -> None:
    problems = []
    if not VALID_NAME.match(new):
        problems.append("use lowercase letters, digits and underscores, starting with a letter")
    if keyword.iskeyword(new) or new in sys.stdlib_module_names or new in TAKEN:
        problems.append(f"{new!r} is a Python keyword or a module it would shadow")
    if new == old:
        problems.append(f"the project is already called {old!r}")
    if problems:
        raise RenameError(
            f"cannot rename {old} to {new!r}: " + "; ".join(problems) + ". It becomes the "
            "import name, the op namespace torch.ops.<name> and a C++ identifier, e.g. my_kernels"
        )


def spellings(name: str) -> list[str]:
    """snake_case, kebab-case and UPPER_CASE: every form the name takes in the files."""
    return [name, name.replace("_", "-"), name.upper()]


def tracked_files(root: Path) -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True
    ).stdout.decode()
    return [name for name in out.split("\0") if name]


def renamed_text(text: str, old: str, new: str) -> str:
    for before, after in zip(spellings(old), spellings(new), strict=True):
        text = text.replace(before, after)
    return text


def rewrite_contents(root: Path, files: list[str], old: str, new: str) -> list[str]:
    """Replaces the name inside every tracked text file; returns the files changed."""
    changed = []
    for name in files:
        if KEPT_AS_IS.match(Path(name).name):
            continue
        path = root / name
        if path.is_symlink() or not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data:
            continue  # binary (images): no names to rename
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        new_text = renamed_text(text, old, new)
        if new_text != text:
            path.write_bytes(new_text.encode("utf-8"))
            changed.append(name)
    return changed


def move_paths(root: Path, files: list[str], old: str, new: str) -> list[tuple[str, str]]:
    """`git mv` of each tracked file whose path holds the name (src/<name>/...)."""
    moves = []
    for name in files:
        target = renamed_text(name, old, new)
        if target != name:
            (root / target).parent.mkdir(parents=True, exist_ok=True)
            subprocess.run(["git", "mv", name, target], cwd=root, check=True)
            moves.append((name, target))
    return moves


def remove_emptied_folders(root: Path, moves: list[tuple[str, str]]) -> list[str]:
    """Removes the folders the moves emptied; returns those that still hold untracked or
    ignored files (build outputs of the old name), for the user to clean."""
    left = []
    for folder in sorted({Path(old).parent for old, _ in moves}, key=lambda p: -len(p.parts)):
        path = root / folder
        if folder != Path(".") and path.is_dir():
            if any(path.iterdir()):
                left.append(str(folder))
            else:
                path.rmdir()
    return left


def rename(new: str, root: Path = ROOT) -> tuple[str, list[str], list[tuple[str, str]]]:
    old = current_name(root)
    check_new_name(new, old)
    files = tracked_files(root)
    changed = rewrite_contents(root, files, old, new)
    moves = move_paths(root, files, old, new)
    for folder in remove_emptied_folders(root, moves):
        print(f"  {folder}/ still holds untracked files of the old name: `make clean` removes them")
    return old, changed, moves


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("name", help="the new name, e.g. my_kernels")
    args = parser.parse_args(argv)
    try:
        old, changed, moves = rename(args.name)
    except RenameError as exc:
        print(f"rename refused: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    print(f"renamed {old} -> {args.name}: {len(changed)} files edited, {len(moves)} moved")
    print(f"  import {args.name}; torch.ops.{args.name}.my_add; pip install {args.name}")
    print("next: review `git status` and `git diff`, then `make repair` (or `make test`)")
