"""A corpus as the user names it: spec files, folders, URLs, and ``@LIST`` files of them.

A list file holds one path or URL per line; blank lines and ``#`` comments (a line starting with
``#``, or `` #`` after an entry) are ignored, and a relative path is taken from the list file's
folder. List files do not nest. URLs are fetched (``remote``) into the data dir and stand in the
corpus as the files they were written to; a URL that cannot be fetched is a ``SkippedSpec`` with
its one-line reason, and the rest of the corpus goes on.
"""

from __future__ import annotations

import logging
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, Field
from specrag.core.errors import CorpusError, SpecError
from specrag.core.settings import Settings
from specrag.specs.files import decode_text, read_regular_file
from specrag.specs.models import IngestReport, SkippedSpec

logger = logging.getLogger(__name__)

LIST_PREFIX = "@"
MAX_LIST_BYTES = 4 * 1024 * 1024
_URL_THREADS = 4  # spec URLs fetched at once
_URL_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def is_url(text: str) -> bool:
    """``scheme://...``: an input that names a URL (of any scheme; only http/https are fetched)."""
    return bool(_URL_RE.match(text))


class CorpusInputs(BaseModel):
    paths: list[Path] = Field(default_factory=list, description="what the ingest reads: local paths and fetched entry files")
    skipped: list[SkippedSpec] = Field(default_factory=list, description="URLs that could not be fetched")
    urls: dict[str, str] = Field(default_factory=dict, description="fetched entry file -> its URL")
    fetched: dict[str, int] = Field(default_factory=dict, description="spec URLs by outcome")

    def merge_into(self, report: IngestReport) -> None:
        """Add the failed URLs to ``report`` and name each fetched spec by its URL, not its file."""
        if not self.fetched:
            return
        named = [s if s.file not in self.urls else SkippedSpec(file=self.urls[s.file], reason=s.reason)
                 for s in report.specs_skipped]
        report.specs_skipped = sorted(named + self.skipped, key=lambda s: s.file)
        report.fetched = dict(self.fetched)


def read_list_file(path: Path) -> list[str | Path]:
    """The entries of a list file: URLs as text, paths as ``Path`` (relative ones from its folder)."""
    try:
        text = decode_text(read_regular_file(path, MAX_LIST_BYTES))
    except SpecError as exc:
        raise CorpusError(f"corpus list {path}: {exc}") from None
    entries: list[str | Path] = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if " #" in line or "\t#" in line:
            line = line[:min(i for i in (line.find(" #"), line.find("\t#")) if i >= 0)].rstrip()
        if not line or line.startswith("#"):
            continue
        if line.startswith(LIST_PREFIX):
            raise CorpusError(f"corpus list {path}, line {number}: list files do not nest ({line})")
        entries.append(line if is_url(line) else path.parent / Path(line).expanduser())
    return entries


def expand_inputs(raw: list[str | Path]) -> list[str | Path]:
    """``@LIST`` arguments replaced by their entries; other text is a URL or a path."""
    out: list[str | Path] = []
    for item in raw:
        text = str(item) if isinstance(item, Path) else item
        if isinstance(item, str) and text.startswith(LIST_PREFIX):
            out.extend(read_list_file(Path(text[len(LIST_PREFIX):])))
        elif isinstance(item, str) and is_url(text):
            out.append(text)
        else:
            out.append(Path(item))
    return out


def shown_url(url: str) -> str:
    """``url`` as reports show it: a password in it replaced by ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{parts.netloc.rpartition('@')[2]}"))


def resolve_inputs(settings: Settings, raw: list[str | Path]) -> CorpusInputs:
    """Paths for the ingest: list files expanded, URLs fetched (CorpusError for a missing list file)."""
    # lazy: httpx (~0.2 s) only when an input is a URL
    from specrag.specs.remote import FetchError, RemoteFetcher, assign_stems

    entries = expand_inputs(raw)
    urls = list(dict.fromkeys(e for e in entries if isinstance(e, str)))
    result = CorpusInputs(paths=list(dict.fromkeys(e for e in entries if isinstance(e, Path))))
    if not urls:
        return result
    stems = assign_stems(urls)
    counts = {"downloaded": 0, "not_modified": 0, "failed": 0}
    with RemoteFetcher.from_settings(settings) as fetcher:
        def fetch(url: str):
            try:
                return fetcher.fetch(url, stems[url])
            except FetchError as exc:
                return exc

        with ThreadPoolExecutor(_URL_THREADS) as pool:
            outcomes = list(pool.map(fetch, urls))
    for url, outcome in zip(urls, outcomes):
        shown = shown_url(url)
        if isinstance(outcome, FetchError):
            counts["failed"] += 1
            result.skipped.append(SkippedSpec(file=shown, reason=str(outcome)))
            logger.info("fetch %s failed: %s", shown, outcome)
            continue
        counts["not_modified" if outcome.downloaded == 0 else "downloaded"] += 1
        result.paths.append(outcome.path)
        result.urls[str(outcome.path)] = shown
        logger.info("fetched %s -> %s (%d downloaded, %d not modified)", shown, outcome.path, outcome.downloaded,
                    outcome.not_modified)
    result.fetched = counts
    return result
