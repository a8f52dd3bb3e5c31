"""python -m scripts.tune measure [--out DIR] [--quick] [--rounds N]
                                                      on a GPU, with a tuning wheel
                                                      (make tune-wheel) installed
python -m scripts.tune table [MEASUREMENTS...]        here: rewrites
                                                      tuning/launch_shapes.toml
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from buildtools.launch_shapes import TABLE_FILE

MEASUREMENTS = TABLE_FILE.parent / "measurements"


def rounds_count(text: str) -> int:
    """--rounds: a whole number of rounds, at least 1 (a cell's median needs a round)."""
    try:
        rounds = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if rounds < 1:
        raise argparse.ArgumentTypeError(f"at least 1 round per cell, got {rounds}")
    return rounds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m scripts.tune",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("measure", help="time every compiled launch shape on this GPU")
    m.add_argument("--out", type=Path, default=MEASUREMENTS, help=f"default: {MEASUREMENTS}")
    m.add_argument("--quick", action="store_true", help="few sizes, one round (a dry run)")
    m.add_argument("--rounds", type=rounds_count, default=None, help="rounds per cell (default: 5)")
    t = sub.add_parser("table", help="derive tuning/launch_shapes.toml from measurements")
    t.add_argument("csv", nargs="*", type=Path, help=f"default: every {MEASUREMENTS}/*.csv")
    t.add_argument(
        "--check",
        action="store_true",
        help="only say whether the table file is what the measurements give",
    )
    args = parser.parse_args(argv)
    if args.command == "measure":
        from .measure import measure

        return measure(args.out, quick=args.quick, rounds=args.rounds)
    from .derive import write_table

    return write_table(args.csv or sorted(MEASUREMENTS.glob("*.csv")), TABLE_FILE, args.check)


if __name__ == "__main__":
    sys.exit(main())
