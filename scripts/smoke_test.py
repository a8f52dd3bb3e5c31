"""Smoke test of the installed cuda_ext_example (the logic ships in the package,
so users can run it too: python -m cuda_ext_example.smoke_test). Exits non-zero
on any mismatch."""

import sys

from cuda_ext_example.smoke_test import main

if __name__ == "__main__":
    sys.exit(main())
