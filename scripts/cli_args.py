"""Argument types the tools' command lines share."""

from __future__ import annotations

import argparse
from collections.abc import Callable


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
