"""Which Chroma collection holds a corpus, who owns it, and the client that reaches it.

Embedded (``data_dir/chroma``): one store per corpus folder, so the collection is simply
``settings.collection``. On a server (``SPECRAG_CHROMA_HOST``) many corpora, tenants and
replicas share one store: each corpus gets ``<collection>-<corpus key>`` (the corpus key is the
index folder name, ``workspace.corpus_key``), a tenant other than ``default`` gets a Chroma
tenant of its own (its ``default_database``), and a collection records its owner in its
metadata. A build refuses a collection of the same name that another corpus or tenant owns
rather than drop or mix it. Each corpus collection has a companion ``<name>.files`` holding
the files a replica needs beside the vectors (publish.py).
"""

from __future__ import annotations

import logging
import shutil
import sqlite3
import types
import uuid
from contextlib import closing, contextmanager
from contextvars import ContextVar
from pathlib import Path

from specrag.core.errors import ChromaUnavailableError
from specrag.core.settings import DEFAULT_TENANT, Settings

OWNER, TENANT, EMBED_MODEL, PUBLISHED = "specrag_corpus", "specrag_tenant", "specrag_embed_model", "specrag_generation"
FILES_SUFFIX = ".files"
MAX_NAME = 512
logger = logging.getLogger(__name__)


class ForeignCollectionError(ChromaUnavailableError):
    """A collection named like this corpus's is owned by another corpus or tenant (or by no specrag index)."""


def corpus_of(settings: Settings) -> str:
    """The corpus key: the name of the corpus's index folder (``settings.data_dir``)."""
    return settings.storage.data_dir.resolve().name


def collection_name(settings: Settings) -> str:
    """The corpus's collection: ``settings.collection`` embedded, ``<collection>-<corpus key>`` on a server."""
    if not settings.storage.chroma_host:
        return settings.storage.collection
    key = corpus_of(settings)
    return f"{settings.storage.collection[:MAX_NAME - len(key) - len(FILES_SUFFIX) - 1]}-{key}"


def files_name(settings: Settings) -> str:
    return collection_name(settings) + FILES_SUFFIX


def owner_metadata(settings: Settings) -> dict[str, str]:
    return {OWNER: corpus_of(settings), TENANT: settings.storage.tenant}


def check_owner(settings: Settings, name: str, metadata: dict | None) -> None:
    """One-line ForeignCollectionError unless the collection ``name`` belongs to this corpus and tenant."""
    if not settings.storage.chroma_host:
        return  # the embedded store holds this corpus only
    mine = owner_metadata(settings)
    theirs = {k: (metadata or {}).get(k) for k in mine}
    if theirs != mine:
        owner = f"corpus {theirs[OWNER]!r} of tenant {theirs[TENANT]!r}" if theirs[OWNER] else "no specrag index"
        raise ForeignCollectionError(
            f"the Chroma collection {name!r} on {settings.storage.chroma_host}:{settings.storage.chroma_port} belongs to {owner}, "
            f"not to corpus {mine[OWNER]!r} of tenant {mine[TENANT]!r}: left untouched; set SPECRAG_COLLECTION "
            "to another prefix")


def served_corpora(client, settings: Settings) -> list[str]:
    """Corpus keys with a published generation in this tenant's database on the server."""
    keys = []
    for collection in client.list_collections():
        meta = collection.metadata or {}
        if not collection.name.endswith(FILES_SUFFIX) and meta.get(TENANT) == settings.storage.tenant \
                and isinstance(meta.get(OWNER), str) and isinstance(meta.get(PUBLISHED), int) \
                and collection.name == f"{settings.storage.collection}-{meta[OWNER]}":
            keys.append(meta[OWNER])
    return sorted(keys)


def server_client(settings: Settings, chroma_settings):
    """An HttpClient on this tenant's Chroma tenant and database (created on first use); each of
    its requests, those made while it is created included, fails after ``settings.chroma_timeout_s``."""
    import chromadb
    from chromadb.config import DEFAULT_DATABASE
    from chromadb.config import DEFAULT_TENANT as CHROMA_DEFAULT_TENANT

    tenant = CHROMA_DEFAULT_TENANT if settings.storage.tenant == DEFAULT_TENANT else settings.storage.tenant
    with http_timeout(settings.storage.chroma_timeout_s):
        if tenant != CHROMA_DEFAULT_TENANT:
            _ensure_tenant(settings, tenant, DEFAULT_DATABASE)
        return chromadb.HttpClient(host=settings.storage.chroma_host, port=settings.storage.chroma_port, settings=chroma_settings,
                                   tenant=tenant, database=DEFAULT_DATABASE)


# chromadb (1.5) gives each server client an httpx session made with ``timeout=None`` and has no
# setting for it (chroma-core/chroma#5805); a server that accepts the connection and never answers
# (stopped, swapped out, deadlocked) holds the caller forever. The session is made, and the first
# requests sent, inside ``HttpClient()``, so setting a timeout afterwards is too late. Instead its
# module's ``httpx`` is replaced, once, by a view of httpx whose ``Client`` takes the timeout in
# force in this thread (``http_timeout``) when chromadb passes none. Clients made outside
# ``http_timeout`` (by other code in the process) are left as chromadb makes them.
_HTTP_TIMEOUT: ContextVar[float | None] = ContextVar("specrag_chroma_http_timeout", default=None)


@contextmanager
def http_timeout(seconds: float):
    """Chroma server clients made inside the block time out each request after ``seconds``."""
    _bound_chroma_sessions()
    token = _HTTP_TIMEOUT.set(seconds)
    try:
        yield
    finally:
        _HTTP_TIMEOUT.reset(token)


class _HttpxWithTimeout(types.ModuleType):
    """httpx as chromadb's HTTP client module sees it: the same, but for ``Client``'s timeout."""

    def __init__(self, real):
        super().__init__(real.__name__, real.__doc__)
        self._real = real

        class Client(real.Client):
            def __init__(self, *args, timeout=None, **kwargs):
                if timeout is None and (seconds := _HTTP_TIMEOUT.get()) is not None:
                    timeout = real.Timeout(seconds)
                super().__init__(*args, timeout=timeout, **kwargs)

        self.Client = Client

    def __getattr__(self, name: str):
        return getattr(self._real, name)


def _bound_chroma_sessions() -> None:
    import chromadb.api.fastapi as fastapi

    if not isinstance(fastapi.httpx, _HttpxWithTimeout):
        fastapi.httpx = _HttpxWithTimeout(fastapi.httpx)


def session_timeout(client) -> float | None:
    """The read timeout of a server client's httpx session (None: unbounded); for checks and tests."""
    session = getattr(getattr(client, "_server", None), "_session", None)
    return None if session is None else session.timeout.read


def _ensure_tenant(settings: Settings, tenant: str, database: str) -> None:
    import chromadb
    from chromadb.config import Settings as ChromaSettings
    from chromadb.errors import NotFoundError

    admin = chromadb.AdminClient(ChromaSettings(
        anonymized_telemetry=False, chroma_api_impl="chromadb.api.fastapi.FastAPI",
        chroma_server_host=settings.storage.chroma_host, chroma_server_http_port=settings.storage.chroma_port))
    try:
        admin.get_tenant(tenant)
    except NotFoundError:
        admin.create_tenant(tenant)
    try:
        admin.get_database(database, tenant=tenant)
    except NotFoundError:
        admin.create_database(database, tenant=tenant)


def open_collection(client, settings: Settings, name: str, configuration: dict | None = None):
    """The collection ``name``, created (with this corpus as owner) when missing; a foreign one
    is refused. Not ``get_or_create``: that may rewrite an existing collection's metadata."""
    from chromadb.errors import NotFoundError, UniqueConstraintError

    for _ in range(2):  # another replica may create it between our two calls
        try:
            collection = client.get_collection(name, embedding_function=None)
            check_owner(settings, name, collection.metadata)
            return collection
        except NotFoundError:
            pass
        try:
            return client.create_collection(name, embedding_function=None, configuration=configuration,
                                            metadata=owner_metadata(settings) if settings.storage.chroma_host else None)
        except UniqueConstraintError:
            continue
    raise ForeignCollectionError(f"the Chroma collection {name!r} could neither be read nor created")


CHROMA_DATABASE = "chroma.sqlite3"  # an embedded store's database, in its folder


def remove_orphan_segments(path: Path) -> int:
    """Delete the segment folders of an embedded store that no collection uses any more; the
    count removed. Chroma 1.x drops a deleted collection from its database but leaves its HNSW
    folder (chroma-core/chroma#5259: removal was moved to a garbage collector the embedded
    client does not run): 120 MB left behind per rebuild of the fleet. The live segments are read
    from the store's own database, read-only; if it cannot be read, nothing is removed."""
    try:
        with closing(sqlite3.connect(f"file:{path / CHROMA_DATABASE}?mode=ro", uri=True)) as db:
            live = {str(row[0]) for row in db.execute("SELECT id FROM segments")}
    except sqlite3.Error as exc:
        logger.warning("Chroma store %s: segments not read (%s); unused segment folders are kept", path, exc)
        return 0
    removed = 0
    for folder in path.iterdir() if path.is_dir() else []:
        if folder.is_dir() and not folder.is_symlink() and _is_uuid(folder.name) and folder.name not in live:
            shutil.rmtree(folder, ignore_errors=True)
            removed += 1
    return removed


def vacuum_store(path: Path) -> bool:
    """Hand back the free pages of an embedded store's database (what ``chroma utils vacuum``
    does): a dropped collection leaves its rows' pages free, which later writes reuse but the
    file keeps (rebuilding a per-chunk store left 16 of its 18 MB free). Run with no client
    open; a database that is busy or unreadable is left as it is (False)."""
    try:
        with closing(sqlite3.connect(path / CHROMA_DATABASE, timeout=5)) as db:
            db.execute("VACUUM")
        return True
    except sqlite3.Error as exc:
        logger.warning("Chroma store %s: not compacted (%s)", path, exc)
        return False


def _is_uuid(name: str) -> bool:
    try:
        return str(uuid.UUID(name)) == name
    except ValueError:
        return False
