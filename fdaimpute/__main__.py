"""``python -m fdaimpute``: the ``fdaimpute`` command."""

import sys

from fdaimpute.cli import command

if __name__ == "__main__":
    sys.exit(command())
