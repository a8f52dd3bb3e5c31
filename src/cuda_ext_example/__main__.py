"""python -m cuda_ext_example COMMAND

doctor                     will this wheel run here, and if not, why
inspect WHEEL_OR_SO [...]  what a built binary contains (pip install 'cuda_ext_example[tools]')
smoke-test                 the classic int64 arange, then every op against its torch reference
"""

from __future__ import annotations

import os
import sys


def main(argv: list[str]) -> int:
    command, rest = (argv[0], argv[1:]) if argv else ("", [])
    if command == "doctor":
        from .doctor import main as doctor

        return doctor()
    if command == "inspect":
        from .inspect_binary import main as inspect_binary

        return inspect_binary(rest)
    if command == "smoke-test":
        from .smoke_test import main as smoke_test

        return smoke_test()
    print(__doc__.strip(), file=sys.stderr)
    return 0 if command in ("-h", "--help") else 2


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BrokenPipeError:  # `... | head` closed the pipe: not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)
