"""Argument types and command lines the lab's tools share; the checks the release uses too
live in scripts/cli_args.py."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from scripts.cli_args import wheel_problem


def at_least_one(what: str) -> Callable[[str], int]:
    """An argparse type: a whole number >= 1 of `what` ("round per cell", "pass"), since a
    median needs one; argparse then prints the error with the usage, not a traceback."""

    def parse(text: str) -> int:
        try:
            count = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if count < 1:
            raise argparse.ArgumentTypeError(f"at least 1 {what}, got {count}")
        return count

    return parse


def wheel_check_command(
    argv, *, prog: str, doc: str, help: str, log: Path, check, more_commands=None
) -> int:
    """The command line of a tool that runs one wheel somewhere else, `check WHEEL [--log
    LOG]`: a wheel that is none is refused before the tool's slow set-up. `more_commands`
    adds the tool's other subcommands, each with a `run(args)` default that runs it."""
    parser = argparse.ArgumentParser(
        prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("check", help=help)
    p.add_argument("wheel", type=Path)
    p.add_argument("--log", type=Path, default=log)
    if more_commands:
        more_commands(sub)
    args = parser.parse_args(argv)
    if args.command != "check":
        return args.run(args)
    if problem := wheel_problem(args.wheel):
        parser.error(f"{args.wheel}: {problem}")
    return check(args.wheel.resolve(), args.log)
