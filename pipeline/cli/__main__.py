import sys

from pipeline.cli import console

sys.exit(console())
