"""``specrag bench`` (and ``--scaling``): the benchmark's command. Its runs live in
``specrag.bench``, imported when the command runs, so ``specrag --help`` does not load them."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from specrag.cli.common import add_common
from specrag.cli.corpus import corpus_input
from specrag.cli.output import print_json, show_progress
from specrag.core.errors import SpecragError

if TYPE_CHECKING:
    from specrag.core.settings import Settings


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="time build, re-index, queries, memory and disk; compare with a plain "
                       "VectorStoreIndex; --scaling at several fleet sizes")
    p.add_argument("--corpus", nargs="+", type=corpus_input, required=True, help="spec files or folders to index")
    # default: the demo set shipped in the package (specrag.bench.query.DEFAULT_QUERIES), found when the command runs
    p.add_argument("--queries", nargs="+", type=Path, default=None, help="query sets (JSONL)")
    p.add_argument("--reuse", action="store_true", help="update the corpus's own index instead of a fresh build")
    p.add_argument("--keep", action="store_true", help="keep the fresh build's temporary folder")
    p.add_argument("--repeats", type=int, default=1, help="timed passes over the queries (default 1)")
    p.add_argument("--scaling", action="store_true", help="the same measures at several fleet sizes, as a table")
    p.add_argument("--sizes", default="100,300,all,4x",
                   help="scaling points: spec counts, 'all', and 'Nx' (N renamed copies of every spec)")
    p.add_argument("--plot", type=Path, default=None, help="scaling: write a PNG of the curves (needs matplotlib)")
    add_common(p)
    p.set_defaults(handler=cmd_bench)


def cmd_bench(args: argparse.Namespace, settings: Settings) -> int:
    if args.repeats < 1:  # before anything is imported or built
        raise SpecragError("--repeats must be at least 1")
    # lazy: keeps the bench, eval sets and LlamaIndex (~2.5 s) out of the CLI's parse
    from specrag.bench.query import DEFAULT_QUERIES, run_bench
    from specrag.bench.report import format_bench
    from specrag.evals.querysets import load_query_sets

    queries = [q.query for q in load_query_sets(args.queries or [DEFAULT_QUERIES])]
    if args.scaling:
        from specrag.bench.scaling import format_scaling, plot_scaling, run_scaling

        points = run_scaling(settings, args.corpus, queries, args.sizes.split(","), run_bench=run_bench,
                             repeats=args.repeats, progress=not args.json)
        if args.json:
            print(json.dumps([pt.model_dump(mode="json") for pt in points], indent=2))
        else:
            print(format_scaling(points))
        if args.plot is not None:
            print(plot_scaling(points, args.plot), file=sys.stderr)
        return 0
    report = run_bench(settings, args.corpus, queries, fresh=not args.reuse, repeats=args.repeats,
                       progress=show_progress(args), keep=args.keep)
    if args.json:
        print_json(report, indent=2)
    else:
        print(format_bench(report))
    return 0
