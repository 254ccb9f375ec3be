"""The whole shared corpus: every spec read without a crash, refs resolve, the link graph is exact,
and chunk ids are unique and stable. The corpus is ingested once per run (twice for stability)."""

from __future__ import annotations

from pathlib import Path

import pytest
from specrag.core.settings import Settings
from specrag.specs.ingest import CorpusIngest, ingest_paths

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus"
DO_ENTRY = CORPUS / "digitalocean" / "specification" / "DigitalOcean-public.v2.yaml"

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not CORPUS.is_dir(), reason="the shared corpus is absent")]


@pytest.fixture(scope="module")
def first() -> CorpusIngest:
    return ingest_paths([CORPUS], Settings().ingest.chunk_max_tokens)


@pytest.fixture(scope="module")
def second() -> CorpusIngest:
    return ingest_paths([CORPUS], Settings().ingest.chunk_max_tokens)


def _spec_files() -> set[Path]:
    """Expected entry files, found without the loader: every file directly in a corpus folder
    (each is one spec) plus DigitalOcean's multi-file entry."""
    files = {p.resolve() for folder in CORPUS.iterdir() if folder.is_dir() for p in folder.iterdir()
             if p.is_file() and p.suffix in (".json", ".yaml", ".yml")}
    return files | {DO_ENTRY.resolve()}


def test_every_spec_read_without_a_crash(first):
    report = first.report
    seen = {Path(a.api.source) for a in first.apis} | {Path(s.file).resolve() for s in report.specs_skipped}
    assert seen == _spec_files()
    assert report.specs_read == len(first.apis) >= 600
    for skipped in report.specs_skipped:
        assert skipped.reason.strip() and not skipped.reason.startswith("internal error"), skipped
    assert report.chunks["total"] == sum(len(a.chunks) for a in first.apis)
    assert report.chunks["endpoint"] > 10_000


def test_internal_refs_resolve(first):
    refs = first.report.refs
    assert refs.total > 100_000
    assert refs.resolved + refs.unresolved == refs.total
    assert refs.resolved / refs.total >= 0.995, refs
    assert refs.total == sum(a.refs.total for a in first.apis)


def test_chunk_ids_unique_and_well_formed(first):
    ids = [c.id for a in first.apis for c in a.chunks]
    assert len(ids) == len(set(ids))
    for api in first.apis:
        assert all(c.id.startswith(api.api.file_id + ":") and c.file_id == api.api.file_id for c in api.chunks)


def test_referenced_by_is_the_exact_inverse_of_ref_ids(first):
    chunks = {c.id: c for a in first.apis for c in a.chunks}
    inverse: dict[str, set[str]] = {cid: set() for cid in chunks}
    dangling = []
    for chunk in chunks.values():
        for rid in chunk.ref_ids:
            if rid not in chunks:
                dangling.append((chunk.id, rid))
                continue
            inverse[rid].add(chunk.id)
            assert rid.split(":", 1)[0] == chunk.file_id  # links stay inside their API
    assert dangling == []
    mismatched = [cid for cid, c in chunks.items() if set(c.referenced_by) != inverse[cid]]
    assert mismatched == []
    assert all(len(c.referenced_by) == len(set(c.referenced_by)) for c in chunks.values())


def test_no_chunk_over_the_token_limit(first):
    limit = Settings().ingest.chunk_max_tokens
    assert max(c.n_tokens for a in first.apis for c in a.chunks) <= limit


def test_ids_stable_across_two_runs(first, second):
    assert [c.id for a in second.apis for c in a.chunks] == [c.id for a in first.apis for c in a.chunks]
    assert [a.api.content_hash for a in second.apis] == [a.api.content_hash for a in first.apis]
    assert {c.id: c.ref_ids for a in second.apis for c in a.chunks} == {c.id: c.ref_ids for a in first.apis for c in a.chunks}
