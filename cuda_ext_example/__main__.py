"""python -m cuda_ext_example doctor   (why the wheel would or would not run here)"""

import sys


def main(argv: list[str]) -> int:
    if argv[:1] == ["doctor"]:
        from .doctor import main as doctor

        return doctor()
    print(__doc__.strip(), file=sys.stderr)
    print("also: python -m cuda_ext_example.inspect WHEEL_OR_SO", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
