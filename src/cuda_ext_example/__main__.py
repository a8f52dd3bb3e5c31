"""python -m cuda_ext_example COMMAND

doctor      will this wheel run here, and if not, why
smoke-test  the classic int64 arange, then every op against its torch reference
"""

from __future__ import annotations

import argparse
import os
import sys

PROG = "python -m cuda_ext_example"
# The commands that take no arguments, with the line `--help` shows for each.
NO_ARGUMENTS = {
    "doctor": "Will this wheel run here, and if not, why: Python, torch, driver, GPUs against "
    "the wheel's build record, then every op against its torch reference. Exit 1 when "
    "something would fail.",
    "smoke-test": "The classic int64 arange, then every op against its torch reference on "
    "the CPU and, where there is one, the GPU. Exit 1 on a mismatch.",
}

# What a built binary contains is read by a tool of the repository, not by the package.
MOVED_INSPECT = (
    "inspect is a repository tool now: run `python -m scripts.inspect WHEEL_OR_SO` from a "
    "checkout of https://github.com/cuda-ext-example/cuda_ext_example"
)


def main(argv: list[str]) -> int:
    command, rest = (argv[0], argv[1:]) if argv else ("", [])
    if command in NO_ARGUMENTS:
        # --help prints the help and exits 0; a stray argument is an error (exit 2), not
        # silently ignored
        argparse.ArgumentParser(
            prog=f"{PROG} {command}", description=NO_ARGUMENTS[command]
        ).parse_args(rest)
    if command == "doctor":
        from .doctor import main as doctor

        return doctor()
    if command == "inspect":
        print(f"{PROG}: {MOVED_INSPECT}", file=sys.stderr)
        return 2
    if command == "smoke-test":
        from .smoke_test import main as smoke_test

        return smoke_test()
    if command in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    if command:
        print(f"{PROG}: unknown command {command!r}", file=sys.stderr)
    print(__doc__.strip(), file=sys.stderr)
    return 2


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BrokenPipeError:  # `... | head` closed the pipe: not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)
