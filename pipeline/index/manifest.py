"""``data_dir/manifest.json``: what the index holds, stamped with the versions that built it.

The manifest is the commit record of the index. An API is marked ``pending`` (and the manifest
written) before any of its chunks change, and ``complete`` only after all of them are stored,
so a run killed at any point leaves pending APIs that queries skip and the next build redoes.
Every write goes to a temp file first and replaces the old manifest with ``os.replace``.
"""

from __future__ import annotations

import json
import os
import tempfile
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from pipeline.versions import package_versions

MANIFEST_NAME = "manifest.json"
FORMAT_VERSION = 1
_VERSIONED_PACKAGES = ("chromadb", "bm25s", "llama-index-core")


class ApiState(str, Enum):
    PENDING = "pending"
    COMPLETE = "complete"


class ApiEntry(BaseModel):
    content_hash: str = Field(description="ApiInfo.content_hash of the spec the chunks came from")
    state: ApiState = Field(description="pending while its chunks are being replaced or removed")
    n_chunks: int = 0


class Manifest(BaseModel):
    format_version: int = FORMAT_VERSION
    embed_model: str = Field(description="embedding identity ('none' = lexical only); a change rebuilds all")
    chunker_version: str = Field(description="chunker version of the stored chunks; a change rebuilds all")
    generation: int = Field(0, description="bumped whenever the stored chunks change")
    apis: dict[str, ApiEntry] = Field(default_factory=dict)
    bm25_dir: str | None = Field(None, description="folder under data_dir/bm25 holding the live BM25 index")
    bm25_generation: int = Field(-1, description="generation the live BM25 index was built for")
    versions: dict[str, str] = Field(default_factory=dict, description="package versions that wrote it")
    updated_at: str = ""

    def complete_ids(self) -> set[str]:
        return {fid for fid, entry in self.apis.items() if entry.state is ApiState.COMPLETE}

    def pending_ids(self) -> set[str]:
        return {fid for fid, entry in self.apis.items() if entry.state is ApiState.PENDING}

    @property
    def bm25_stale(self) -> bool:
        return self.bm25_generation != self.generation

    def compatible(self, embed_model: str, chunker_version: str) -> bool:
        return (self.format_version == FORMAT_VERSION and self.embed_model == embed_model
                and self.chunker_version == chunker_version)


def manifest_path(data_dir: Path) -> Path:
    return Path(data_dir) / MANIFEST_NAME


def load_manifest(data_dir: Path) -> Manifest | None:
    """The manifest, or None when there is none (or it is unreadable: then the index is rebuilt)."""
    path = manifest_path(data_dir)
    try:
        return Manifest.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, ValidationError):
        return None


def save_manifest(data_dir: Path, manifest: Manifest) -> None:
    """Atomic write: readers and a later run see the old manifest or the new one, never a mix."""
    manifest.updated_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    manifest.versions = dict(package_versions(_VERSIONED_PACKAGES))
    path = manifest_path(data_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".manifest-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(manifest.model_dump(mode="json"), fh, indent=1, sort_keys=True)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
