"""make wheel: bdist_wheel through `build`'s own API, in this environment (no isolation: the
locked venv is the build environment).

Why not `python -m build`: on a failure its command line adds closing lines (a TIP, "ERROR
Backend subprocess exited ...") after the backend's own last words, which are the
compiler's error with its file and line, then the one line naming the failed build step
(buildtools/build_ext.py). An author reads the end of the output: that must be the fault.
"""

from __future__ import annotations

import sys
from pathlib import Path

from build import BuildBackendException, ProjectBuilder


def main(argv: list[str]) -> int:
    outdir = Path(argv[0]) if argv else Path("dist")
    try:
        wheel = ProjectBuilder(".").build("wheel", outdir)
    except BuildBackendException:
        return 1  # the backend has said what failed, last
    print(f"built {wheel}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
