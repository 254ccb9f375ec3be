"""Specs at http(s) URLs: downloaded into the data dir, then ingested like local spec files.

Every server is hostile: only ``http``/``https`` URLs are fetched, redirects are followed by hand
(to http/https only, at most ``SPECRAG_REMOTE_MAX_REDIRECTS``), a body is streamed and dropped as
soon as it passes ``SPECRAG_REMOTE_MAX_BYTES``, and connecting, each read and each document's
whole download are bounded by ``SPECRAG_REMOTE_TIMEOUT_S``. A failure is a one-line ``FetchError``.

Each URL gets its own folder, ``<tenant dir>/remote/<hash of the URL>/``, and its entry file
there is ``<stem><.json|.yaml>``: the stem (the API's file_id) is made from the URL's host and
path (``url_stem``), so a re-run reads the same file. ``<hash>.json`` beside the folder keeps
each document's ETag and Last-Modified: a re-run sends If-None-Match / If-Modified-Since and, on
304, keeps the file it has (untouched, so the incremental ingest sees no change).

Multi-file specs: a relative ``$ref`` to a .json/.yaml/.yml document inside the entry URL's
folder (same scheme, host and port; a path under the entry's directory) is fetched too, to the
same place relative to the entry file, under the same bounds (all documents of one URL share the
byte limit; ``SPECRAG_REMOTE_MAX_DOCUMENTS`` caps their number). As the loader does, only the
part of a document a ref points at is followed further, and ``x-`` extensions are not. Any other ref (another origin,
above the entry's folder, a dot-file, a query) is not fetched, and the loader then counts it as
unresolved exactly as for a local spec: refs are still read only from the entry's folder tree.
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path, PurePosixPath
from typing import Any, Iterator
from urllib.parse import unquote, urljoin, urlsplit

import httpx
from filelock import FileLock
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from specrag.core.atomic import write_atomic
from specrag.core.errors import SpecError
from specrag.core.ids import pointer_to_tokens
from specrag.core.settings import Settings
from specrag.specs.files import decode_text, read_regular_file
from specrag.specs.limits import ParseBudget, SpecLimits
from specrag.specs.loader import MAX_REF_CHARS, SPEC_SUFFIXES, walk_pointer
from specrag.specs.parse import one_line, parse_text

REMOTE_DIR = "remote"
SCHEMES = ("http", "https")
MAX_STEM_CHARS = 80
_REDIRECTS = (301, 302, 303, 307, 308)
_FETCH_THREADS = 4  # documents of one multi-file spec fetched at once


class FetchError(SpecError):
    """A spec URL that could not be fetched; its message is one line."""


class RemoteLimits(BaseModel):
    model_config = ConfigDict(frozen=True)

    max_bytes: int
    timeout_s: float
    max_redirects: int
    max_documents: int

    @classmethod
    def from_settings(cls, settings: Settings) -> "RemoteLimits":
        return cls(max_bytes=settings.remote.remote_max_bytes, timeout_s=settings.remote.remote_timeout_s,
                   max_redirects=settings.remote.remote_max_redirects, max_documents=settings.remote.remote_max_documents)


class CachedDocument(BaseModel):
    url: str
    sha256: str
    etag: str | None = None
    last_modified: str | None = None


class RemoteRecord(BaseModel):
    """What the last fetch of one spec URL wrote into its folder."""

    url: str
    entry: str = Field(description="the entry file, relative to the URL's folder")
    documents: dict[str, CachedDocument] = Field(description="file relative to the folder -> where it came from")


class FetchedSpec(BaseModel):
    url: str
    path: Path = Field(description="the entry file, where the ingest reads it")
    downloaded: int = Field(description="documents whose body was downloaded")
    not_modified: int = Field(description="documents the server answered 304 for (the kept copy is used)")


def check_url(url: str, what: str = "URL") -> None:
    """FetchError unless ``url`` is an http(s) URL with a host (and a valid port)."""
    parts = urlsplit(url)
    if parts.scheme.lower() not in SCHEMES:
        raise FetchError(f"{what} has scheme {parts.scheme or '(none)'!r}: only http and https URLs are fetched")
    try:
        parts.port  # noqa: B018 - a bad port raises here
    except ValueError:
        raise FetchError(f"{what} has an invalid port") from None
    if not parts.hostname:
        raise FetchError(f"{what} has no host")


def url_stem(url: str) -> str:
    """A file stem (and file_id) from the URL's host, port and path: ``https://api.example.com/v1/openapi.json``
    -> ``api.example.com_v1_openapi``. Only ``A-Za-z0-9._-`` (no ``:`` of chunk ids, no ``/``, never
    a dot-file), at most 80 characters; the query is left out (``assign_stems`` parts colliding URLs)."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower().removeprefix("www.")
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is not None:
        host += f"-{port}"
    segments = [unquote(s) for s in parts.path.split("/") if s]
    if segments and PurePosixPath(segments[-1]).suffix.lower() in SPEC_SUFFIXES:
        segments[-1] = PurePosixPath(segments[-1]).stem
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", "_".join([host, *segments]))
    slug = re.sub(r"-{2,}", "-", slug).strip("._-")[:MAX_STEM_CHARS].rstrip("._-")
    return slug or "spec"


def assign_stems(urls: list[str]) -> dict[str, str]:
    """URL -> stem for the URLs of one corpus. Two URLs with the same ``url_stem`` (a query, a
    long path cut short) are told apart deterministically: in sorted order the first keeps it,
    each later one gets ``-<8 hex of its URL's SHA-256>``."""
    stems: dict[str, str] = {}
    taken: set[str] = set()
    for url in sorted(set(urls)):
        stem = url_stem(url)
        if stem in taken:
            stem = f"{stem}-{_digest(url)[:8]}"
        taken.add(stem)
        stems[url] = stem
    return stems


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class _Budget:
    """Bytes one spec URL may still take, shared by the threads fetching its documents."""

    def __init__(self, limit: int):
        self.limit = limit
        self.used = 0
        self._lock = threading.Lock()

    def take(self, n: int) -> None:
        with self._lock:
            self.used += n
            if self.used > self.limit:
                raise FetchError(f"larger than {self.limit} bytes (SPECRAG_REMOTE_MAX_BYTES)")


class _Answer(BaseModel):
    body: bytes | None = Field(description="None: 304, the kept copy is still current")
    final_url: str
    content_type: str = ""
    etag: str | None = None
    last_modified: str | None = None


class RemoteFetcher:
    """Fetches spec URLs into ``root`` (``<tenant dir>/remote``); use as a context manager."""

    def __init__(self, root: Path, limits: RemoteLimits, spec_limits: SpecLimits):
        self.root = Path(root)
        self.limits = limits
        self.spec_limits = spec_limits
        timeout = httpx.Timeout(limits.timeout_s)
        self.client = httpx.Client(follow_redirects=False, timeout=timeout,
                                   headers={"User-Agent": "specrag",
                                            "Accept": "application/json, application/yaml, text/yaml, */*;q=0.5"})

    @classmethod
    def from_settings(cls, settings: Settings) -> "RemoteFetcher":
        return cls(settings.tenant_dir / REMOTE_DIR, RemoteLimits.from_settings(settings),
                   SpecLimits.from_settings(settings))

    def __enter__(self) -> "RemoteFetcher":
        return self

    def __exit__(self, *exc) -> None:
        self.client.close()

    def fetch(self, url: str, stem: str) -> FetchedSpec:
        """Bring the spec at ``url`` (and the documents it references) up to date in its folder;
        FetchError with a one-line reason, leaving what an earlier fetch wrote as it was."""
        check_url(url)
        if "/" in stem or not safe_relative(stem + ".json"):
            raise ValueError(f"not a file stem: {stem!r}")
        key = _digest(url)[:16]
        folder = self.root / key
        self.root.mkdir(parents=True, exist_ok=True)
        with FileLock(self.root / f"{key}.lock", thread_local=False):
            previous = self._load_record(key, url)
            return _SpecFetch(self, url, stem, folder, previous).run(key)

    def _load_record(self, key: str, url: str) -> RemoteRecord | None:
        try:
            record = RemoteRecord.model_validate_json((self.root / f"{key}.json").read_bytes())
        except (OSError, ValueError, ValidationError):
            return None  # none yet, or damaged: everything is downloaded again
        if record.url != url or not all(safe_relative(rel) for rel in [record.entry, *record.documents]):
            return None  # another URL's, or altered: never read or delete by its names
        return record

    def get(self, url: str, cached: CachedDocument | None, origin: tuple[str, str] | None,
            budget: _Budget) -> _Answer:
        """GET ``url``, following redirects by hand; ``cached``: send its validators (a 304 is then
        an answer); ``origin``: (scheme, netloc) every redirect must keep (referenced documents)."""
        headers = {}
        if cached is not None and cached.etag:
            headers["If-None-Match"] = cached.etag
        if cached is not None and cached.last_modified:
            headers["If-Modified-Since"] = cached.last_modified
        deadline = time.monotonic() + self.limits.timeout_s
        current = url
        try:
            for _ in range(self.limits.max_redirects + 1):
                with self.client.stream("GET", current, headers=headers) as response:
                    if response.status_code in _REDIRECTS and "location" in response.headers:
                        target = urljoin(current, response.headers["location"])
                        check_url(target, f"redirect to {_shown(target)}")
                        if origin is not None and _origin(target) != origin:
                            raise FetchError(f"redirect to another origin ({_shown(target)})")
                        current = target
                        continue
                    return self._answer(response, url, current, cached, deadline, budget)
        except httpx.TimeoutException:
            raise FetchError(f"timed out after {self.limits.timeout_s:g} s (SPECRAG_REMOTE_TIMEOUT_S)") from None
        except httpx.ConnectError as exc:
            raise FetchError(f"cannot connect: {one_line(exc) or type(exc).__name__}") from None
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise FetchError(f"{type(exc).__name__}: {one_line(exc)}") from None
        raise FetchError(f"more than {self.limits.max_redirects} redirects (SPECRAG_REMOTE_MAX_REDIRECTS)")

    def _answer(self, response: httpx.Response, url: str, current: str, cached: CachedDocument | None,
                deadline: float, budget: _Budget) -> _Answer:
        meta = {"final_url": current, "content_type": response.headers.get("content-type", ""),
                "etag": response.headers.get("etag"), "last_modified": response.headers.get("last-modified")}
        if response.status_code == 304 and cached is not None:
            return _Answer(body=None, **{**meta, "etag": meta["etag"] or cached.etag,
                                         "last_modified": meta["last_modified"] or cached.last_modified})
        if response.status_code != 200:
            where = f" (at {_shown(current)})" if current != url else ""
            raise FetchError(f"HTTP {response.status_code} {response.reason_phrase}".rstrip() + where)
        length = response.headers.get("content-length", "")
        if length.isdigit() and budget.used + int(length) > budget.limit:
            raise FetchError(f"larger than {budget.limit} bytes (SPECRAG_REMOTE_MAX_BYTES; "
                             f"Content-Length {length})")
        chunks = []
        for chunk in response.iter_bytes():
            budget.take(len(chunk))
            if time.monotonic() > deadline:
                raise httpx.ReadTimeout("download took too long")
            chunks.append(chunk)
        return _Answer(body=b"".join(chunks), **meta)


class _SpecFetch:
    """One spec URL's fetch: the entry, then the documents its relative refs name, level by level."""

    def __init__(self, fetcher: RemoteFetcher, url: str, stem: str, folder: Path, previous: RemoteRecord | None):
        self.fetcher = fetcher
        self.url = url
        self.stem = stem
        self.folder = folder
        self.previous = previous
        self.kept = {doc.url: (rel, doc) for rel, doc in (previous.documents.items() if previous else [])}
        self.budget = _Budget(fetcher.limits.max_bytes)
        self.parse_budget = ParseBudget(fetcher.spec_limits)
        self.files: dict[str, str] = {}  # file relative to the folder -> its URL
        self.bodies: dict[str, bytes] = {}  # URL -> body
        self.documents: dict[str, CachedDocument] = {}  # URL -> validators
        self.parsed: dict[str, Any] = {}  # URL -> parsed document (None: does not parse)
        self.downloaded = 0
        self.not_modified = 0
        self._lock = threading.Lock()  # _document runs in the pool's threads

    def run(self, key: str) -> FetchedSpec:
        """The entry, then level by level the documents its refs reach: as the loader does, only
        the part of a document a ref points at is followed further (a ref to ``models.yaml#/A``
        reaches what ``A`` references, not every ref of ``models.yaml``)."""
        entry = self._document(self.url, None)
        entry_rel = self.stem + self._entry_suffix(entry)
        self.files[entry_rel] = self.url
        root, origin = _folder_of(entry.final_url), _origin(entry.final_url)
        bases = {self.url: entry.final_url}  # where a document's relative refs resolve from
        frontier: list[tuple[str, tuple[str, ...]]] = [(self.url, ())]
        walked: set[tuple[str, tuple[str, ...]]] = set()
        with ThreadPoolExecutor(_FETCH_THREADS) as pool:
            while frontier:
                wanted: list[str] = []
                reached = []
                for url, tokens in frontier:
                    if any((url, tokens[:n]) in walked for n in range(len(tokens) + 1)):
                        continue  # that part was walked already, within a larger one or itself
                    walked.add((url, tokens))
                    for ref_url, ref_tokens in self._refs(url, bases[url], root, tokens):
                        if ref_url not in bases:
                            bases[ref_url] = ref_url
                            wanted.append(ref_url)
                        reached.append((ref_url, ref_tokens))
                list(pool.map(lambda url: self._document(url, origin), wanted))
                frontier = reached
        self._write(key, entry_rel)
        return FetchedSpec(url=self.url, path=self.folder / entry_rel, downloaded=self.downloaded,
                           not_modified=self.not_modified)

    def _refs(self, url: str, base: str, root: str, tokens: tuple[str, ...]) -> Iterator[tuple[str, tuple[str, ...]]]:
        """(document URL, pointer tokens) of each ref in the part of ``url``'s document at ``tokens``
        that lies inside ``root``; a document that does not parse references nothing (the ingest
        reports it). A new document is given its file (``files``), within the document cap."""
        doc = self._parsed(url)
        if doc is None:
            return
        for ref in _ref_strings(walk_pointer(doc, tokens)):
            file_part, _, fragment = ref.partition("#")
            try:
                ref_tokens = tuple(pointer_to_tokens("#" + unquote(fragment)))
            except ValueError:
                continue
            if not file_part:
                yield url, ref_tokens
                continue
            target = _inside(file_part, base, root)
            if target is None:
                continue
            ref_url, rel = target
            if rel not in self.files:
                if len(self.files) >= self.fetcher.limits.max_documents:
                    raise FetchError(f"more than {self.fetcher.limits.max_documents} documents "
                                     "(SPECRAG_REMOTE_MAX_DOCUMENTS)")
                self.files[rel] = ref_url
            if self.files[rel] == ref_url:  # (a sibling named like the entry file reads the entry, as locally)
                yield ref_url, ref_tokens

    def _parsed(self, url: str) -> Any:
        if url not in self.parsed:
            body = self.bodies[url]
            try:
                self.parsed[url] = parse_text(decode_text(body), _is_json(url, body), self.parse_budget)
            except SpecError:
                self.parsed[url] = None
        return self.parsed[url]

    def _document(self, url: str, origin: tuple[str, str] | None) -> _Answer:
        """Fetch one document (conditionally, when a kept copy is still intact) into ``bodies``."""
        kept_rel, cached = self.kept.get(url, (None, None))
        kept_body = self._kept_body(kept_rel, cached)
        what = "" if origin is None else f"referenced document {_shown(url)}: "
        try:
            answer = self.fetcher.get(url, cached if kept_body is not None else None, origin, self.budget)
        except FetchError as exc:
            raise FetchError(what + str(exc)) from None
        if answer.body is None:
            self.budget.take(len(kept_body))
        body = kept_body if answer.body is None else answer.body
        document = CachedDocument(url=url, sha256=hashlib.sha256(body).hexdigest(), etag=answer.etag,
                                  last_modified=answer.last_modified)
        with self._lock:
            if answer.body is None:
                self.not_modified += 1
            else:
                self.downloaded += 1
            self.bodies[url] = body
            self.documents[url] = document
        return answer

    def _kept_body(self, rel: str | None, cached: CachedDocument | None) -> bytes | None:
        """The bytes an earlier fetch wrote, if the file is still there and unchanged."""
        if rel is None or cached is None or not (cached.etag or cached.last_modified):
            return None
        try:
            body = read_regular_file(self.folder / rel, self.fetcher.limits.max_bytes)
        except SpecError:
            return None
        return body if hashlib.sha256(body).hexdigest() == cached.sha256 else None

    def _entry_suffix(self, entry: _Answer) -> str:
        """.json/.yaml/.yml: the URL's own suffix, else the media type, else the first byte."""
        for url in (entry.final_url, self.url):
            suffix = PurePosixPath(urlsplit(url).path).suffix.lower()
            if suffix in SPEC_SUFFIXES:
                return suffix
        if entry.body is None and self.previous is not None:  # a 304 has no media type: keep the last choice
            return PurePosixPath(self.previous.entry).suffix
        media = entry.content_type.split(";")[0].strip().lower()
        if "json" in media:
            return ".json"
        if "yaml" in media or "yml" in media:
            return ".yaml"
        return ".json" if self.bodies[self.url].lstrip()[:1] in (b"{", b"[") else ".yaml"

    def _write(self, key: str, entry_rel: str) -> None:
        """Write what changed (an unchanged file keeps its mtime), drop files no longer referenced,
        then the record: an interrupted fetch leaves a record that no longer matches, never a wrong one."""
        for rel, url in self.files.items():
            path = self.folder / rel
            body = self.bodies[url]
            try:
                same = path.is_file() and not path.is_symlink() and path.read_bytes() == body
            except OSError:
                same = False
            if not same:
                write_atomic(path, body)
        if self.previous is not None:
            for rel in set(self.previous.documents) - set(self.files):
                (self.folder / rel).unlink(missing_ok=True)
        record = RemoteRecord(url=self.url, entry=entry_rel,
                              documents={rel: self.documents[url] for rel, url in sorted(self.files.items())})
        write_atomic(self.fetcher.root / f"{key}.json", record.model_dump_json(indent=1).encode())


def _is_json(url: str, body: bytes) -> bool:
    suffix = PurePosixPath(urlsplit(url).path).suffix.lower()
    return suffix == ".json" if suffix in SPEC_SUFFIXES else body.lstrip()[:1] in (b"{", b"[")


def _ref_strings(doc: Any) -> Iterator[str]:
    """Every ``$ref`` in ``doc`` outside ``x-`` extensions (code samples and the like, which the
    chunker drops: a spec's examples folder is not fetched for nothing)."""
    stack = [doc]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str):
                yield ref
            stack.extend(v for k, v in node.items() if not (isinstance(k, str) and k.startswith("x-")))
        elif isinstance(node, list):
            stack.extend(node)


def _origin(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.scheme.lower(), parts.netloc.lower()


def _folder_of(url: str) -> str:
    """The entry's folder as a URL: scheme, host and the path up to its last ``/``."""
    parts = urlsplit(url)
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}{parts.path[:parts.path.rfind('/') + 1] or '/'}"


def _inside(file_part: str, base: str, root: str) -> tuple[str, str] | None:
    """(URL, relative file) of a ref's document when it lies inside ``root`` and the loader may read
    it (a .json/.yaml/.yml file, no dot-file or dot-folder); else None (never fetched)."""
    if not file_part or len(file_part) > MAX_REF_CHARS or urlsplit(file_part).scheme or file_part.startswith("//") \
            or "?" in file_part or "\\" in file_part:
        return None
    target = urljoin(base, file_part)
    parts = urlsplit(target)
    prefix = urlsplit(root).path
    if _origin(target) != _origin(root) or not parts.path.startswith(prefix):
        return None
    rel = unquote(parts.path[len(prefix):])
    return (f"{root}{parts.path[len(prefix):]}", rel) if safe_relative(rel) else None


def safe_relative(rel: str) -> bool:
    """A file the loader may read below a spec's folder: relative, canonical, no ``..`` and no
    dot-file or dot-folder, a .json/.yaml/.yml suffix."""
    pure = PurePosixPath(rel)
    return bool(rel) and "\x00" not in rel and "\\" not in rel and not rel.startswith("/") and rel == str(pure) \
        and not any(p in (".", "..") or p.startswith(".") for p in pure.parts) and pure.suffix.lower() in SPEC_SUFFIXES


def _shown(url: str) -> str:
    return url if len(url) <= 200 else url[:200] + "..."
