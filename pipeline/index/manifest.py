"""``data_dir/manifest.json``: what the index holds, and the settings that shaped it.

The manifest is the commit record of the index. APIs about to change are marked ``pending``
(and the manifest written) before Chroma is touched; they become ``complete`` in the same atomic
write that switches ``local_dir`` to the generation holding their rows. A pending API keeps the
``content_hash`` of the version the live generation holds ('' when it holds none), so a run
killed at any point leaves a local generation that matches the manifest and is served whole
(queries never read Chroma), and pending APIs that the next build redoes. Every write goes to
a unique temp file, then ``os.replace``. The same write names the generation's catalogs snapshot
(``catalogs``), so what a reader opens through one manifest is one generation.

The settings that shape chunks and vectors (chunker version, ``chunk_max_tokens``, embedding
model, lexical analysis, formats) are recorded: a change rebuilds what it affects.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError
from specrag.core.atomic import write_atomic
from specrag.core.errors import IndexDamagedError, IndexFormatError
from specrag.core.versions import package_versions

MANIFEST_NAME = "manifest.json"
FORMAT_VERSION = 2
TEXT_ROWS, CHUNK_ROWS = "embed_text", "chunk"
_VERSIONED_PACKAGES = ("chromadb", "bm25s", "llama-index-core")


class ApiState(str, Enum):
    PENDING = "pending"
    COMPLETE = "complete"


class ApiEntry(BaseModel):
    content_hash: str = Field(description="ApiInfo.content_hash of the spec the live generation's chunks came "
                                          "from ('' for a pending API the live generation does not hold)")
    state: ApiState = Field(description="pending while a build rewrites it (its new vectors added to Chroma), until the commit")
    n_chunks: int = 0
    chunks_digest: str = Field("", description="hash of the stored chunks (a re-chunk that changes none keeps it)")


class IndexShape(BaseModel):
    """Everything besides the specs that decides what is stored."""

    embed_model: str = Field(description="embedding identity ('none' = lexical only); a change re-embeds")
    chunker_version: str = Field(description="a change re-chunks every spec")
    chunk_max_tokens: int = Field(description="SPECRAG_CHUNK_MAX_TOKENS; a change re-chunks every spec")
    lexical_version: str = Field(description="BM25 analysis; a change re-tokenizes the stored texts")


class Manifest(IndexShape):
    format_version: int = FORMAT_VERSION
    generation: int = Field(0, description="bumped whenever the stored chunks (or the catalogs) change")
    apis: dict[str, ApiEntry] = Field(default_factory=dict)
    local_dir: str | None = Field(None, description="folder under data_dir/local holding the live local index")
    catalogs: str | None = Field(None, description="file under data_dir/local listing the live generation's catalogs "
                                                   "(specrag.catalog.snapshot; a .zip in older indexes); None: read "
                                                   "the catalogs folder")
    vector_rows: str = Field(CHUNK_ROWS, description="what one Chroma row is: 'embed_text' (one per distinct embed "
                             "text, chroma_rows.py); 'chunk' (absent) in indexes of earlier versions, whose "
                             "collection the next build rebuilds from the local index's vectors")
    versions: dict[str, str] = Field(default_factory=dict, description="package versions that wrote it")
    updated_at: str = ""

    def live_files(self) -> tuple[str | None, str | None]:
        """What a reader of this manifest opens: (local_dir, catalogs); another pair is another generation."""
        return self.local_dir, self.catalogs

    def complete_ids(self) -> set[str]:
        """The APIs the live local generation holds as committed: the complete ones, and the pending
        ones a build had committed before (a build that changes or removes them, or was killed doing
        so, has not committed anything new yet: until it does, they are served as they were)."""
        return {fid for fid, entry in self.apis.items() if entry.state is ApiState.COMPLETE or entry.content_hash}

    def settled_ids(self) -> set[str]:
        """The complete APIs: committed, and no build has touched their Chroma rows since."""
        return {fid for fid, entry in self.apis.items() if entry.state is ApiState.COMPLETE}

    def pending_ids(self) -> set[str]:
        return {fid for fid, entry in self.apis.items() if entry.state is ApiState.PENDING}

    @property
    def shape(self) -> IndexShape:
        return IndexShape.model_validate(self.model_dump(include=set(IndexShape.model_fields)))


def manifest_path(data_dir: Path) -> Path:
    return Path(data_dir) / MANIFEST_NAME


def load_manifest(data_dir: Path) -> Manifest | None:
    """The manifest, None when there is none, IndexDamagedError (one line) when it is unreadable."""
    path = manifest_path(data_dir)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise IndexDamagedError(f"{path} is unreadable ({exc.strerror or exc})") from exc
    try:
        manifest = Manifest.model_validate_json(raw)
    except (ValueError, ValidationError) as exc:
        if _format_of(raw) not in (None, FORMAT_VERSION):
            raise IndexFormatError(f"{path} was written by another version of specrag (format "
                                    f"{_format_of(raw)}, this one reads {FORMAT_VERSION})") from exc
        raise IndexDamagedError(f"{path} is truncated or invalid ({len(raw)} bytes)") from exc
    if manifest.format_version != FORMAT_VERSION:
        raise IndexFormatError(f"{path} was written by another version of specrag (format "
                               f"{manifest.format_version}, this one reads {FORMAT_VERSION})")
    return manifest


def _format_of(raw: bytes) -> int | None:
    try:
        value = json.loads(raw).get("format_version")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, int) else None


def save_manifest(data_dir: Path, manifest: Manifest) -> None:
    """Atomic write: readers and a later run see the old manifest or the new one, never a mix."""
    manifest.updated_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    manifest.versions = dict(package_versions(_VERSIONED_PACKAGES))
    data = json.dumps(manifest.model_dump(mode="json"), indent=1, sort_keys=True).encode()
    write_atomic(manifest_path(data_dir), data, durable=True)
