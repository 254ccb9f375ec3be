"""specrag: answers "how do I do X with these APIs?" over a fleet of OpenAPI specs.

Each command module adds its parsers and sets ``handler`` (``(args, settings) -> exit code``).

Building the parser imports nothing heavy (the command modules import what they run with inside
their handlers): ``specrag --help`` and a bad argument answer before any model, store or engine
is loaded (tests/cli/test_cli_startup.py).

Exit codes: 0 done; 2 a user error (bad argument, missing or unusable path, bad setting, unknown
API, empty corpus), one line on stderr; 3 an ``eval --mode llm`` run in which every LLM call failed; 130
interrupted; 141 stdout's reader went away (``| head``).
"""

from __future__ import annotations

import argparse
import gc
import logging
import sys

from specrag.cli import bench, browse, evaluate, graph, ingest, query, serve
from specrag.cli.common import CommandParser, build_settings
from specrag.cli.corpus import resolve_corpus_args
from specrag.cli.output import cli_logging, reader_gone, safe_streams
from specrag.core.errors import SpecragError

EXIT_USER_ERROR, EXIT_INTERRUPTED, EXIT_BROKEN_PIPE = 2, 130, 141


class _Version(argparse.Action):
    """``--version``: the installed version, looked up only when asked for."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0,
                         help=help or "show the installed version and exit")

    def __call__(self, parser, namespace, values, option_string=None):
        # lazy: importlib.metadata (~35 ms) only for --version, not on every parse
        from specrag.core.versions import package_versions

        version = package_versions(("specrag",)).get("specrag", "unknown (not installed)")
        print(f"specrag {version}")
        parser.exit()


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="specrag", description=__doc__.splitlines()[0])
    root.add_argument("--version", action=_Version)
    sub = root.add_subparsers(dest="command", required=True, parser_class=CommandParser)
    for module in (ingest, query, browse, graph, evaluate, serve, bench):
        module.add_parsers(sub)
    return root


def console() -> int:
    """The ``specrag`` command. Before the interpreter exits, what is still alive is frozen out of
    the collector: its exit collections would otherwise walk every object of the opened index and
    the corpus's sources once more (measured: ~1 s of a one-spec re-index's 5 s under load, 0.15 s
    frozen). Not in ``main``: a process that calls ``main`` and goes on must keep collecting."""
    code = main()
    gc.freeze()
    return code


def main(argv: list[str] | None = None) -> int:
    safe_streams()
    args = parser().parse_args(argv)
    with cli_logging(getattr(args, "verbose", False)):
        try:
            settings = build_settings(args)
            resolve_corpus_args(args, settings)  # URLs fetched, @LIST files read: the command gets paths
            code = args.handler(args, settings)
            sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit flush
            return code
        except SpecragError as exc:
            print(f"specrag: error: {_one_line(exc)}", file=sys.stderr)
            return EXIT_USER_ERROR
        except BrokenPipeError:
            reader_gone()
            return EXIT_BROKEN_PIPE
        except OSError as exc:  # a path that cannot be used: not a folder, no permission, disk full
            logging.getLogger("specrag.cli").info("file system error", exc_info=True)  # the trace with -v
            where = f": {exc.filename}" if exc.filename else ""
            print(f"specrag: error: {exc.strerror or _one_line(exc)}{where}", file=sys.stderr)
            return EXIT_USER_ERROR
        except KeyboardInterrupt:
            print("specrag: interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())
