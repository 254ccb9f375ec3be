"""What every command shares: the common options, settings from them, opening an engine or an index.

Building the parser imports no model, engine or store (``specrag --help`` and a bad argument
answer at once): what a command needs is imported when it runs; a flag's range is read from its
model only when the flag is given (``number_of``).
"""

from __future__ import annotations

import argparse
import sys
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING

from specrag.cli.output import show_progress

if TYPE_CHECKING:
    from pydantic import BaseModel
    from specrag.core.settings import Settings
    from specrag.index.lookup import IndexLookup

OFFLINE_NOTICE = "offline mode: no OPENAI_API_KEY / SPECRAG_LLM_BASE_URL; stages 1-2 use keyword methods"


class CommandParser(argparse.ArgumentParser):
    """An ArgumentParser whose first word may name a nested command (``eval compare A B``) while
    its own positionals stay free (``eval SET.jsonl...``); each nested command has its own --help."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.nested: dict[str, CommandParser] = {}

    def add_nested(self, name: str, **kwargs) -> "CommandParser":
        self.nested[name] = CommandParser(prog=f"{self.prog} {name}", **kwargs)
        return self.nested[name]

    def parse_known_args(self, args=None, namespace=None):
        args = list(sys.argv[1:] if args is None else args)
        if args and args[0] in self.nested:
            return self.nested[args[0]].parse_known_args(args[1:], namespace)
        return super().parse_known_args(args, namespace)


def number_in(low: float, high: float, kind: type = int):
    """An argparse type: ``kind`` within [low, high], else the usual one-line argparse error
    (flags bypass the settings' own validation of the variables they stand for)."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or not low <= value <= high:  # NaN fails the comparison too
            raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'} "
                                             f"from {low} to {high}")
        return value

    return parse


def field_range(model: type[BaseModel], field: str) -> tuple[float, float, type]:
    """(low, high, type) of a numeric field, from its own constraints: the range of a flag that
    stands for a setting or a request field (``--port`` for SPECRAG_PORT) is said once, there."""
    info = model.model_fields[field]
    low = next(m.ge for m in info.metadata if hasattr(m, "ge"))
    high = next(m.le for m in info.metadata if hasattr(m, "le"))
    return low, high, info.annotation


def number_of(model: str, field: str):
    """An argparse type for a flag that stands for ``field`` of ``model`` (``"module:Class"``):
    ``number_in`` the field's own range. The model is imported only for a number to check (a
    settings model takes longer to import than the rest of the parser): text that is no number
    at all is refused at once."""
    def parse(text: str):
        try:
            float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        module, _, name = model.partition(":")
        return number_in(*field_range(getattr(import_module(module), name), field))(text)

    return parse


def add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-dir", dest="data_dir", type=Path, help="index folder (env SPECRAG_DATA_DIR, default .specrag)")
    p.add_argument("--catalog-dir", dest="catalog_dir", type=Path,
                   help="catalog folder (default: the corpus's index folder, <data-dir>/corpora/<name>/catalogs)")
    p.add_argument("--tenant", help="whose indexes to read and write (env SPECRAG_TENANT, default 'default')")
    p.add_argument("--env-file", dest="env_file", type=Path,
                   help="read settings from this .env (default: $SPECRAG_ENV_FILE, else the specrag project's .env)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the human view")
    p.add_argument("-v", "--verbose", action="store_true", help="also log what specrag does (info level)")


def build_settings(args: argparse.Namespace) -> Settings:
    # lazy: keeps pydantic-settings and python-dotenv (~0.3 s) out of the CLI's parse
    from specrag.core.envfile import explicit_env_file
    from specrag.core.settings import Settings

    overrides: dict = {}
    for field in ("data_dir", "catalog_dir", "prompts_dir", "tenant"):
        value = getattr(args, field, None)
        if value is not None:
            overrides[field] = value
    if getattr(args, "env_file", None) is not None:
        overrides["_env_file"] = explicit_env_file(args.env_file, "--env-file")
    return Settings(**overrides)


def offline(settings: Settings) -> Settings:
    return settings.model_copy(update={"openai_api_key": None, "llm_base_url": None})


def corpus_index(args: argparse.Namespace, settings: Settings, corpus: list[Path] | None) -> Settings:
    """The corpus's settings: ``corpus`` indexed first (incrementally), else the last indexed one."""
    # lazy: keeps the index builder and LlamaIndex (~2.5 s) out of the CLI's parse
    from specrag.index.workspace import synced_corpus_settings, update_index

    if corpus:
        local, _ = update_index(settings, corpus, progress=show_progress(args))
        return local
    return synced_corpus_settings(settings)


def open_engine(args: argparse.Namespace, settings: Settings, corpus: list[Path] | None, **overrides):
    """(corpus settings, engine); ``corpus`` is indexed first (incrementally), else the last one is
    used. ``overrides``: settings the command's flags set for this engine (``query --top-k``). The
    offline notice is said here, by the commands whose stages would use an LLM."""
    # lazy: keeps the engine and LlamaIndex (~3 s) out of the CLI's parse
    from specrag.engine.factory import build_engine

    local = corpus_index(args, settings, corpus)
    if overrides:
        local = local.model_copy(update=overrides)
    engine = build_engine(local)
    if not local.llm_configured and not getattr(args, "json", False):
        print(OFFLINE_NOTICE, file=sys.stderr)
    return local, engine


def open_index(args: argparse.Namespace, settings: Settings, corpus: list[Path] | None) -> tuple[Settings, IndexLookup]:
    """(corpus settings, its index without an engine): the catalogs and chunks that listings,
    lookups and the dependency graph read; no embedding model is loaded, no LLM is involved."""
    # lazy: keeps the store and LlamaIndex (~2.5 s) out of the CLI's parse
    from specrag.index.lookup import IndexLookup
    from specrag.index.store import ChunkStore

    local = corpus_index(args, settings, corpus)
    return local, IndexLookup(local.storage.data_dir.name, ChunkStore.open(local, embed_model=None))


def format_ingest_report(report) -> str:
    refs = report.refs
    pct = 100.0 * refs.resolved / refs.total if refs.total else 100.0
    lines = [
        f"specs read: {report.specs_read}   skipped: {len(report.specs_skipped)}   time: {report.seconds:.1f} s",
        "chunks: " + ", ".join(f"{k} {v}" for k, v in report.chunks.items()),
        f"$refs inside their spec: {refs.total} ({refs.resolved} resolved, {refs.unresolved} unresolved, {pct:.2f}%)",
    ]
    fit = report.closure
    if fit.operations:
        lines.append(f"closure fit: {fit.fit:.1%} of {fit.operations} operations within {fit.token_limit} tokens "
                     f"(compact references; {fit.fit_full_text:.1%} in full text, {fit.fit_with_slots:.1%} also within "
                     f"{fit.max_chunks} chunks); closure tokens p50 {fit.tokens_p50:.0f}, p90 {fit.tokens_p90:.0f}, "
                     f"p99 {fit.tokens_p99:.0f}")
    if report.fetched:
        got = report.fetched
        lines.append(f"spec URLs: {got.get('downloaded', 0)} downloaded, {got.get('not_modified', 0)} not modified "
                     f"(kept copy read), {got.get('failed', 0)} failed")
    if refs.unresolved_by_kind:
        lines.append("  unresolved by kind: " + ", ".join(f"{k} {v}" for k, v in sorted(refs.unresolved_by_kind.items())))
    if refs.external:
        lines.append("  external (not followed): " + ", ".join(f"{k} {v}" for k, v in sorted(refs.external.items())))
    for skipped in report.specs_skipped:
        lines.append(f"  skipped {skipped.file}: {skipped.reason}")
    return "\n".join(lines)
