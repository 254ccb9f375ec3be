"""``specrag ingest`` and ``specrag index``.

Both put the catalogs in the same place, the corpus's own catalog folder
(``<data-dir>/corpora/<name>-<hash>/catalogs``, or ``--catalog-dir``), which is where ``index``
and ``query`` read them. A corpus with no usable spec is a one-line error (exit 2): ``ingest``
prints its report first when it read files; ``index`` writes nothing (``workspace.update_index``).
"""

from __future__ import annotations

import argparse
import logging
from typing import TYPE_CHECKING

from specrag.cli.common import add_common, format_ingest_report
from specrag.cli.corpus import corpus_input
from specrag.cli.output import print_json, show_progress
from specrag.core.errors import CorpusError

if TYPE_CHECKING:
    from specrag.core.settings import Settings


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ingest", help="read specs, chunk them, write the corpus's catalogs, print the ingest report")
    _inputs(p)
    p.add_argument("--no-catalogs", action="store_true", help="only report; write no catalog files")
    add_common(p)
    p.set_defaults(handler=ingest)

    p = sub.add_parser("index", help="ingest + embed + store a corpus (incremental)")
    _inputs(p)
    add_common(p)
    p.set_defaults(handler=index)


def _inputs(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="*", type=corpus_input, metavar="PATH",
                   help="spec files, folders, http(s) URLs, or @FILE: a list of them, one a line")
    p.add_argument("--corpus", nargs="+", type=corpus_input, metavar="PATH", help="the same as PATH... (either or both)")


def _merge_fetched(args: argparse.Namespace, report) -> None:
    if (inputs := getattr(args, "corpus_inputs", None)) is not None:
        inputs.merge_into(report)


def _require_inputs(args: argparse.Namespace) -> None:
    if not args.paths:
        raise CorpusError(f"specrag {args.command} needs spec paths or URLs: PATH... or --corpus PATH...")


def ingest(args: argparse.Namespace, settings: Settings) -> int:
    # lazy: keeps the spec readers, catalogs and LlamaIndex (~2.5 s) out of the CLI's parse
    from specrag.catalog.io import RenderedApi, render_api, write_catalogs
    from specrag.index.workspace import corpus_settings
    from specrag.specs.ingest import ingest_paths, no_usable_spec, require_spec_files
    from specrag.specs.limits import SpecLimits
    from specrag.specs.pool import gc_paused

    _require_inputs(args)
    require_spec_files(args.paths)  # nothing to read: say so, without an empty report first
    rendered: dict[str, RenderedApi] = {}

    def render(api) -> None:  # while the workers read on, not after the last spec
        rendered[api.api.file_id] = render_api(api)

    # The chunks live until the command ends: a collection pass over them (~0.7 s) finds nothing.
    with gc_paused():
        result = ingest_paths(args.paths, settings.ingest.chunk_max_tokens, progress=show_progress(args),
                              limits=SpecLimits.from_settings(settings), on_api=None if args.no_catalogs else render)
        _merge_fetched(args, result.report)
        if not args.no_catalogs and result.apis:
            catalogs = corpus_settings(settings, args.paths).catalogs_path
            written = write_catalogs(result.apis, catalogs, rendered=rendered)
            logging.getLogger("specrag.cli").info("catalogs: %d written, %d unchanged in %s",
                                                   len(written.written), written.unchanged, catalogs)
    if args.json:
        print_json(result.report)
    else:
        print(format_ingest_report(result.report))
    if result.report.specs_read == 0:
        raise no_usable_spec(args.paths, result.report.specs_skipped, files_read=True)
    return 0


def index(args: argparse.Namespace, settings: Settings) -> int:
    # lazy: keeps the index builder and LlamaIndex (~2.5 s) out of the CLI's parse
    from specrag.index.workspace import update_index

    _require_inputs(args)
    local, run = update_index(settings, args.paths, progress=show_progress(args))
    _merge_fetched(args, run.ingest)
    idx = run.index
    if args.json:
        print_json(run)
    else:
        print(format_ingest_report(run.ingest))
        print(f"index {local.storage.data_dir}: {len(idx['apis_added'])} added, {len(idx['apis_updated'])} updated, "
              f"{len(idx['apis_unchanged'])} unchanged, {len(idx['apis_removed'])} removed, "
              f"{len(idx['apis_repaired'])} repaired; {idx['chunks_embedded']} chunks embedded "
              f"({idx['chunks_per_s']:.0f}/s), search mode {idx['search_mode']}, {run.seconds:.1f} s")
    return 0
