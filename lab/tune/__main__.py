"""python -m lab.tune measure [--out DIR] [--quick] [--rounds N] [--ops OP...]
                                                      on a GPU, with a tuning wheel
                                                      (make tune-wheel) installed
python -m lab.tune table [MEASUREMENTS...]            here: rewrites
                                                      tuning/launch_shapes.toml
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

from buildtools.launch_shapes import TABLE_FILE
from lab.cli_args import at_least_one
from scripts.cli_args import file_problem

from .derive import MEASUREMENTS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lab.tune",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("measure", help="time every compiled launch shape on this GPU")
    m.add_argument("--out", type=Path, default=MEASUREMENTS, help=f"default: {MEASUREMENTS}")
    m.add_argument("--quick", action="store_true", help="few sizes, one round (a dry run)")
    m.add_argument(
        "--rounds",
        type=at_least_one("round per cell"),
        default=None,
        help="rounds per cell (default: 5)",
    )
    m.add_argument(
        "--ops",
        nargs="+",
        metavar="OP",
        help="measure these ops' own lists (op-<name> in the table) instead of inputs-N's",
    )
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

        return measure(args.out, quick=args.quick, rounds=args.rounds, ops=args.ops)
    from .derive import write_table

    paths = args.csv or sorted(MEASUREMENTS.glob("*.csv"))
    # Each file read once here first, so a wrong one is named in one line (derive's own
    # reader, so what it expects stays in one place).
    for path in paths:
        problem = measurements_problem(path)
        if problem:
            print(
                f"lab.tune table: {path}: {problem}; pass the CSVs of `python -m lab.tune "
                f"measure` (default: every {MEASUREMENTS}/*.csv)",
                file=sys.stderr,
            )
            return 2
    return write_table(paths, TABLE_FILE, args.check)


def measurements_problem(path: Path) -> str | None:
    """Why `path` is no measurements CSV that derive.read_measurements takes, or None."""
    from .derive import read_measurements

    if problem := file_problem(path):
        return problem
    try:
        read_measurements(path)
    except UnicodeDecodeError:
        return "not a text file"
    except KeyError as missing:
        return f"not a measurements CSV (no {missing} column)"
    except (ValueError, csv.Error) as err:
        return f"not a measurements CSV ({err})"
    except (TypeError, AttributeError):  # csv gives None for the fields a short row lacks
        return "not a measurements CSV (a row has fewer fields than the header)"
    except OSError as err:
        return f"cannot read it: {err.strerror}"
    return None


if __name__ == "__main__":
    sys.exit(main())
