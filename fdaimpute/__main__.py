"""``python -m fdaimpute``: the ``fdaimpute`` command."""

import sys

from fdaimpute.cli import main

if __name__ == "__main__":
    sys.exit(main())
