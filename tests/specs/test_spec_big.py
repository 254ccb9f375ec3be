"""A 10 MB spec ingests, and the splitter keeps every chunk under the token limit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from specrag.core import ids
from specrag.core.settings import Settings
from specrag.specs.ingest import count_tokens, ingest_paths
from specrag.specs.limits import SpecLimits

N_OPS = 2200
TEN_MB = 10 * 1024 * 1024


def _big_doc() -> dict:
    paths, schemas = {}, {}
    for i in range(N_OPS):
        schemas[f"Thing{i}"] = {
            "type": "object", "description": f"Thing number {i}. " + "lorem ipsum dolor sit amet " * 105,
            "properties": {f"field{j}": {"type": "string", "description": f"field {j} of thing {i}"} for j in range(12)}
            | {"next": {"$ref": f"#/components/schemas/Thing{(i + 1) % N_OPS}"}},
        }
        paths[f"/things{i}/{{id}}"] = {"get": {
            "operationId": f"getThing{i}", "summary": f"Get thing {i}",
            "parameters": [{"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}],
            "responses": {
                "200": {"description": "ok", "content": {"application/json": {
                    "schema": {"$ref": f"#/components/schemas/Thing{i}"}}}},
                "404": {"description": "not found"}}}}
    # one schema far over the limit, with a single line longer than the limit (a huge example)
    schemas["Huge"] = {"type": "object", "example": "x" * 300_000,
                       "properties": {f"p{j}": {"type": "string", "description": "word " * 40} for j in range(400)}}
    paths["/huge"] = {"post": {"requestBody": {"content": {"application/json": {
        "schema": {"$ref": "#/components/schemas/Huge"}}}}, "responses": {"204": {"description": "done"}}}}
    return {"openapi": "3.0.0", "info": {"title": "Big", "version": "1"}, "paths": paths,
            "components": {"schemas": schemas}}


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    folder = tmp_path_factory.mktemp("big")
    path = folder / "big.json"
    path.write_text(json.dumps(_big_doc(), indent=1))
    (folder / "broken.json").write_text('{"openapi": ')
    assert path.stat().st_size >= TEN_MB
    # this test is about size and splitting, not the time limit: a loaded 2-core machine may need
    # more than the default minute for 2,200 operations and their dependency graph
    limits = SpecLimits.from_settings().model_copy(update={"timeout_s": 600.0})
    return ingest_paths([folder], Settings().ingest.chunk_max_tokens, workers=1, limits=limits)


def test_big_spec_ingests_next_to_a_broken_one(big):
    assert big.report.specs_read == 1
    assert [Path(s.file).name for s in big.report.specs_skipped] == ["broken.json"]
    assert big.report.chunks["endpoint"] == N_OPS + 1
    assert big.report.chunks["errors"] == N_OPS
    assert big.report.refs.total == big.report.refs.resolved == 2 * N_OPS + 1


def test_no_chunk_exceeds_the_token_limit(big):
    limit = Settings().ingest.chunk_max_tokens
    chunks = big.apis[0].chunks
    assert max(c.n_tokens for c in chunks) <= limit
    for c in chunks:
        if ":part" in c.id or c.name == "Huge":
            assert count_tokens(c.text) == c.n_tokens <= limit


def test_split_parts_are_linked_from_part_one(big):
    by_id = {c.id: c for c in big.apis[0].chunks}
    huge = by_id["big:components/schemas/Huge"]
    parts = sorted((cid for cid in by_id if cid.startswith(huge.id + ":part")),
                   key=lambda cid: int(cid.rsplit("part", 1)[1]))
    assert len(parts) >= 20
    assert parts == [ids.part_chunk_id(huge.id, n) for n in range(2, len(parts) + 2)]
    assert [rid for rid in huge.ref_ids if ":part" in rid] == parts
    for pid in parts:
        assert by_id[pid].referenced_by == [huge.id]
        assert by_id[pid].ref_ids == {}
        assert by_id[pid].text.startswith(huge.text.split("\n", 1)[0] + " [part ")
    # the whole example survives the split, spread over the parts
    texts = [by_id[cid].text for cid in [huge.id, *parts]]
    assert sum(t.count("x") - t.count("example") for t in texts) == 300_000
    # refs into the split schema still land on part 1
    assert huge.id in by_id["big:paths/~1huge/post"].ref_ids
