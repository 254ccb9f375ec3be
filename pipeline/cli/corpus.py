"""Corpus arguments that are URLs or ``@LIST`` files, turned into paths before a command runs.

argparse's ``type=Path`` would fold ``http://host`` into ``http:/host``, so corpus arguments use
``corpus_input``: text stays text for a URL or a list file. ``resolve_corpus_args`` then fetches
(``specrag.specs.inputs``) once, for every command alike, and leaves the command plain paths in
``args.paths`` / ``args.corpus``; ``args.corpus_inputs`` keeps what was fetched and what failed.
``ingest`` and ``index`` count the failures in their report; other commands print one
``specrag: warning:`` line per failed URL on stderr.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from specrag.core.settings import Settings

REPORTING_COMMANDS = ("ingest", "index")


def corpus_input(text: str) -> str | Path:
    """An argparse type: a URL or ``@LIST`` as text, anything else a ``Path``."""
    # lazy: keeps the spec readers and LlamaIndex (~2.5 s) out of the CLI's parse; only for commands given a corpus
    from specrag.specs.inputs import LIST_PREFIX, is_url

    return text if is_url(text) or text.startswith(LIST_PREFIX) else Path(text)


def needs_resolving(values) -> bool:
    return any(isinstance(v, str) for v in values or [])


def resolve_corpus_args(args: argparse.Namespace, settings: Settings) -> None:
    """Replace URL and list-file arguments by paths (fetching the URLs); EmptyCorpusError when an
    argument group is left with nothing to read. ``args.corpus_inputs``: None when nothing was fetched."""
    if getattr(args, "command", None) in REPORTING_COMMANDS:  # PATH... and --corpus are one corpus there
        args.paths = [*(args.paths or []), *(getattr(args, "corpus", None) or [])]
        args.corpus = None
    groups = []
    for field in ("paths", "corpus"):
        value = getattr(args, field, None)
        if value and isinstance(value[0], list):  # serve/mcp: one --corpus per knowledge base
            groups += [(field, i, g) for i, g in enumerate(value)]
        elif value:
            groups.append((field, None, value))
    args.corpus_inputs = None
    groups = [group for group in groups if needs_resolving(group[2])]
    if not groups:
        return
    # lazy: keeps the spec readers and LlamaIndex (~2.5 s) out of the CLI's parse
    from specrag.specs.ingest import no_usable_spec
    from specrag.specs.inputs import CorpusInputs, resolve_inputs

    merged = CorpusInputs()
    for field, index, raw in groups:
        inputs = resolve_inputs(settings, raw)
        if not inputs.paths:
            raise no_usable_spec(raw, inputs.skipped)
        if index is None:
            setattr(args, field, inputs.paths)
        else:
            getattr(args, field)[index] = inputs.paths
        merged.paths += inputs.paths
        merged.skipped += inputs.skipped
        merged.urls.update(inputs.urls)
        for outcome, n in inputs.fetched.items():
            merged.fetched[outcome] = merged.fetched.get(outcome, 0) + n
    args.corpus_inputs = merged
    if getattr(args, "command", None) not in REPORTING_COMMANDS:
        for skipped in merged.skipped:
            print(f"specrag: warning: skipped {skipped.file}: {skipped.reason}", file=sys.stderr)
