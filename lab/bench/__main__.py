import sys

from .benchmark import main

sys.exit(main())
