"""``python -m specrag``: the ``specrag`` command (as ``python -m specrag.cli``)."""

import sys

from specrag.cli import console

if __name__ == "__main__":
    sys.exit(console())
