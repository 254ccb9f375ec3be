"""Subcommands beyond ingest: index, query, eval, bench (registered on import)."""

from __future__ import annotations

import argparse
from typing import Callable


def add_parsers(sub: argparse._SubParsersAction, common: Callable[[argparse.ArgumentParser], None]) -> None:
    return None
