import sys

from specrag.cli import console

sys.exit(console())
