"""``specrag ingest`` and ``specrag index``."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from pipeline.cli.common import add_common, format_ingest_report
from pipeline.settings import Settings


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ingest", help="read specs, chunk them, write catalogs, print the ingest report")
    p.add_argument("paths", nargs="+", type=Path)
    p.add_argument("--no-catalogs", action="store_true", help="only report; write no catalog files")
    add_common(p)
    p.set_defaults(handler=ingest)

    p = sub.add_parser("index", help="ingest + embed + store a corpus (incremental)")
    p.add_argument("paths", nargs="+", type=Path)
    add_common(p)
    p.set_defaults(handler=index)


def ingest(args: argparse.Namespace, settings: Settings) -> int:
    from pipeline.catalog.io import write_catalogs
    from pipeline.specs.ingest import ingest_paths
    from pipeline.specs.limits import SpecLimits

    result = ingest_paths(args.paths, settings.chunk_max_tokens, progress=not args.json,
                          limits=SpecLimits.from_settings(settings))
    if not args.no_catalogs:
        written = write_catalogs(result.apis, settings.catalogs_path)
        logging.getLogger("specrag").info("catalogs: %d written, %d unchanged in %s", len(written.written),
                                          written.unchanged, settings.catalogs_path)
    print(result.report.model_dump_json() if args.json else format_ingest_report(result.report))
    return 0


def index(args: argparse.Namespace, settings: Settings) -> int:
    from pipeline.workspace import update_index

    local, run = update_index(settings, args.paths, progress=not args.json)
    if args.json:
        print(run.model_dump_json())
        return 0
    idx = run.index
    print(format_ingest_report(run.ingest))
    print(f"index {local.data_dir}: {len(idx['apis_added'])} added, {len(idx['apis_updated'])} updated, "
          f"{len(idx['apis_unchanged'])} unchanged, {len(idx['apis_removed'])} removed, "
          f"{len(idx['apis_repaired'])} repaired; {idx['chunks_embedded']} chunks embedded "
          f"({idx['chunks_per_s']:.0f}/s), search mode {idx['search_mode']}, {run.seconds:.1f} s")
    return 0
