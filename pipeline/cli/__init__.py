"""specrag: answers "how do I do X with these APIs?" over a fleet of OpenAPI specs.

Each command module adds its parsers and sets ``handler`` (``(args, settings) -> exit code``).
"""

from __future__ import annotations

import argparse
import logging
import sys

from pipeline.cli import evaluate, ingest, query, serve
from pipeline.cli.common import add_common, build_settings
from pipeline.errors import SpecragError


def parser() -> argparse.ArgumentParser:
    from pipeline.bench import add_bench_parser

    root = argparse.ArgumentParser(prog="specrag", description=__doc__.splitlines()[0])
    sub = root.add_subparsers(dest="command", required=True)
    for module in (ingest, query, evaluate, serve):
        module.add_parsers(sub)
    add_bench_parser(sub, add_common)
    return root


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if getattr(args, "verbose", False) else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("bm25s").setLevel(logging.WARNING)  # it sets DEBUG on itself
    try:
        return args.handler(args, build_settings(args))
    except SpecragError as exc:
        print(f"specrag: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("specrag: interrupted", file=sys.stderr)
        return 130
