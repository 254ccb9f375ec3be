"""``specrag``: thin command line over the library: parse, call, print."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Callable

from pipeline.errors import SpecragError
from pipeline.settings import Settings

COMMANDS: dict[str, Callable[[argparse.Namespace, Settings], int]] = {}


def command(name: str):
    def register(fn):
        COMMANDS[name] = fn
        return fn
    return register


def build_settings(args: argparse.Namespace) -> Settings:
    overrides = {}
    for field in ("data_dir", "catalog_dir", "prompts_dir"):
        value = getattr(args, field, None)
        if value is not None:
            overrides[field] = value
    return Settings(**overrides)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-dir", dest="data_dir", type=Path, help="index folder (env SPECRAG_DATA_DIR, default .specrag)")
    p.add_argument("--catalog-dir", dest="catalog_dir", type=Path, help="catalog folder (default <data-dir>/catalogs)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the human view")
    p.add_argument("-v", "--verbose", action="store_true")


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="specrag", description=__doc__)
    sub = root.add_subparsers(dest="command", required=True)
    p = sub.add_parser("ingest", help="read specs, chunk them, write catalogs, print the ingest report")
    p.add_argument("paths", nargs="+", type=Path)
    p.add_argument("--no-catalogs", action="store_true", help="only report; write no catalog files")
    _common(p)
    from pipeline import cli_commands  # noqa: F401  (registers the other commands)

    cli_commands.add_parsers(sub, _common)
    return root


@command("ingest")
def cmd_ingest(args: argparse.Namespace, settings: Settings) -> int:
    from pipeline.catalog.io import write_catalogs
    from pipeline.specs.ingest import ingest_paths

    result = ingest_paths(args.paths, settings.chunk_max_tokens, progress=not args.json)
    report = result.report
    if not args.no_catalogs:
        written = write_catalogs(result.apis, settings.catalogs_path)
        log = logging.getLogger("specrag")
        log.info("catalogs: %d written, %d unchanged in %s", len(written.written), written.unchanged, settings.catalogs_path)
    if args.json:
        print(report.model_dump_json())
        return 0
    print(format_ingest_report(report))
    return 0


def format_ingest_report(report) -> str:
    refs = report.refs
    pct = 100.0 * refs.resolved / refs.total if refs.total else 100.0
    lines = [
        f"specs read: {report.specs_read}   skipped: {len(report.specs_skipped)}   time: {report.seconds:.1f} s",
        "chunks: " + ", ".join(f"{k} {v}" for k, v in report.chunks.items()),
        f"$refs inside their spec: {refs.total} ({refs.resolved} resolved, {refs.unresolved} unresolved, {pct:.2f}%)",
    ]
    if refs.unresolved_by_kind:
        lines.append("  unresolved by kind: " + ", ".join(f"{k} {v}" for k, v in sorted(refs.unresolved_by_kind.items())))
    if refs.external:
        lines.append("  external (not followed): " + ", ".join(f"{k} {v}" for k, v in sorted(refs.external.items())))
    for skipped in report.specs_skipped:
        lines.append(f"  skipped {skipped.file}: {skipped.reason}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if getattr(args, "verbose", False) else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("bm25s").setLevel(logging.WARNING)  # it sets DEBUG on itself
    try:
        settings = build_settings(args)
        return COMMANDS[args.command](args, settings)
    except SpecragError as exc:
        print(f"specrag: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("specrag: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
