"""What a spec's content can make ingest do: ``$ref`` only reaches spec documents (never a secret
beside the spec), path items that ``$ref`` themselves are cycles, not phantom endpoints, a
component named like a split part keeps its own id, and OpenAPI 3.1 webhooks are read."""

from __future__ import annotations

import json
import os
from pathlib import Path

from specrag.core import ids
from specrag.core.settings import Settings
from specrag.index import ChunkStore, IndexBuilder
from specrag.specs.ingest import ingest_paths, ingest_spec

from .hostile import GOOD, limits, spec

SECRET = "sk-SECRET-VALUE"


def _all_text(api) -> str:
    return " ".join(f"{c.text} {c.embed_text} {c.search_text}" for c in api.chunks)


def test_refs_reach_only_spec_documents(tmp_path):
    (tmp_path / ".env").write_text(f"OPENAI_API_KEY={SECRET}\n")
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "id_rsa").write_text(f"-----BEGIN KEY-----\n{SECRET}\n")
    (tmp_path / ".ssh" / "keys.yaml").write_text(f"K: {{description: {SECRET}}}\n")
    (tmp_path / "notes.txt").write_text(f"T: {{description: {SECRET}}}\n")
    (tmp_path / "plain.yaml").write_text(f"{SECRET} is just a string\n")
    (tmp_path / "list.json").write_text(json.dumps([SECRET]))
    (tmp_path / "models.yaml").write_text("Model: {type: object, properties: {id: {type: integer}}}\n")
    os.mkfifo(tmp_path / "pipe.yaml")
    refs = {"A": ".env", "B": ".ssh/id_rsa", "C": ".ssh/keys.yaml#/K", "D": "notes.txt#/T", "E": "plain.yaml",
            "F": "list.json#/0", "G": "./sub/../.env", "H": "models.yaml#/Model", "I": "pipe.yaml#/X"}
    schemas = "".join(f"    {name}: {{$ref: '{ref}'}}\n" for name, ref in refs.items())
    (tmp_path / "api.yaml").write_text(spec("components:\n  schemas:\n" + schemas))
    api = ingest_spec(tmp_path / "api.yaml", "api", 1500, limits=limits())
    assert api.refs.unresolved_by_kind == {"hidden_file": 4, "not_spec_file": 1, "not_a_document": 2, "unreadable": 1}
    assert (api.refs.total, api.refs.resolved) == (9, 1)
    assert api.api.files == ["models.yaml"]
    assert SECRET not in _all_text(api)
    assert "api:models.yaml#/Model" in api.chunks[[c.id for c in api.chunks].index("api:components/schemas/H")].ref_ids


def test_path_item_that_refs_itself_is_a_cycle_not_an_endpoint(tmp_path):
    paths = ("  /self:\n    $ref: '#/paths/~1self'\n    get: {responses: {'200': {description: phantom}}}\n"
             "  /b: {$ref: '#/paths/~1c'}\n  /c: {$ref: '#/paths/~1b'}\n"
             "  /far: {$ref: 'items.yaml#/loop'}\n"
             "  /ok: {$ref: '#/components/pathItems/Ok'}\n")
    (tmp_path / "items.yaml").write_text("loop: {$ref: 'api.yaml#/paths/~1far'}\n")
    (tmp_path / "api.yaml").write_text(spec(
        "components:\n  pathItems:\n    Ok: {get: {responses: {'200': {description: fine}}}}\n", paths=paths))
    api = ingest_spec(tmp_path / "api.yaml", "api", 1500, limits=limits())
    endpoints = [c.id for c in api.chunks if c.type.value == "endpoint"]
    assert endpoints == ["api:paths/~1ok/get"]
    assert api.refs.unresolved_by_kind == {"cycle": 4}
    assert "phantom" not in _all_text(api)


def test_component_named_like_a_split_part_keeps_its_own_id_and_the_index_builds(tmp_path):
    """``Big:part2`` beside an oversized ``Big`` used to collide with Big's second part and stop
    the whole index run; now every chunk has its own id and every spec is indexed."""
    big = {"type": "object", "properties": {f"p{i}": {"type": "string", "description": "word " * 40}
                                            for i in range(60)}}
    doc = {"openapi": "3.0.0", "info": {"title": "Split", "version": "1"}, "paths": {},
           "components": {"schemas": {"Big": big, "Big:part2": {"type": "string", "description": "the real one"},
                                      "Big:errors": {"type": "integer"}}}}
    (tmp_path / "split.json").write_text(json.dumps(doc))
    (tmp_path / "good.yaml").write_text(GOOD)
    result = ingest_paths([tmp_path], 500, workers=1)
    assert result.report.specs_skipped == [] and result.report.dropped == {}
    split = next(a for a in result.apis if a.api.file_id == "split")
    by_id = {c.id: c for c in split.chunks}
    assert len(by_id) == len(split.chunks)
    own = by_id["split:components/schemas/Big~3Apart2"]
    assert own.name == "Big:part2" and "the real one" in own.text
    assert by_id["split:components/schemas/Big:part2"].text.startswith("# schemas Big (")  # Big's part 2
    assert "split:components/schemas/Big~3Aerrors" in by_id
    assert ids.base_chunk_id(own.id) == own.id

    settings = Settings(data_dir=tmp_path / "data", embed_model="none", chroma_host=None)
    store = ChunkStore.open(settings, embed_model=None)
    report = IndexBuilder(store, settings).build(result.apis, progress=False)
    assert report.apis_added == ["good", "split"]
    assert set(store.get_chunks(list(by_id))) == set(by_id)
    assert store.get_chunks([own.id])[own.id].text == own.text
    store.close()


def test_duplicate_ids_from_keys_that_stringify_alike_are_dropped_and_counted(tmp_path):
    (tmp_path / "keys.yaml").write_text(spec(
        "components:\n  responses:\n    200: {description: int key}\n    '200': {description: str key}\n"))
    result = ingest_paths([tmp_path], workers=1)
    [api] = result.apis
    assert [c.id for c in api.chunks].count("keys:components/responses/200") == 1
    assert api.dropped == {"duplicate_id": 1} and result.report.dropped == {"duplicate_id": 1}


WEBHOOKS_ONLY = """\
openapi: 3.1.0
info: {title: Hooks, version: "1"}
webhooks:
  newPet:
    post:
      operationId: onNewPet
      summary: A pet was added
      requestBody: {content: {application/json: {schema: {$ref: "#/components/schemas/Pet"}}}}
      responses:
        "200": {description: received}
        "410": {description: unsubscribe}
components:
  schemas:
    Pet: {type: object, properties: {name: {type: string}}}
"""


def test_openapi_31_spec_with_only_webhooks_is_read(tmp_path):
    (tmp_path / "hooks.yaml").write_text(WEBHOOKS_ONLY)
    result = ingest_paths([tmp_path], workers=1)
    assert result.report.specs_skipped == []
    [api] = result.apis
    by_id = {c.id: c for c in api.chunks}
    hook = by_id["hooks:webhooks/newPet/post"]
    assert (hook.type.value, hook.kind, hook.method, hook.path, hook.operation_id) == (
        "endpoint", "webhook", "POST", "newPet", "onNewPet")
    assert hook.text.startswith("# webhook newPet (POST)") and hook.embed_text.startswith("webhook POST")
    assert set(hook.ref_ids) == {"hooks:components/schemas/Pet", "hooks:webhooks/newPet/post:errors"}
    assert by_id["hooks:webhooks/newPet/post:errors"].text.startswith("# Error responses of webhook newPet (POST)")
    assert ids.parse_webhook_id(hook.id) == ("hooks", "newPet", "POST")
    assert ids.parse_operation_id(hook.id) is None


def test_openapi_spec_shape_reasons(tmp_path):
    cases = {"nothing31.yaml": ("openapi: 3.1.0\ninfo: {title: X, version: '1'}\n",
                                "no 'paths', 'webhooks' or 'components' object"),
             "hooks30.yaml": ("openapi: 3.0.3\nwebhooks: {}\n", "no 'paths' object"),
             "badhooks.yaml": ("openapi: 3.1.0\nwebhooks: [1]\n", "'webhooks' is not a mapping")}
    for name, (text, _) in cases.items():
        (tmp_path / name).write_text(text)
    result = ingest_paths([tmp_path], workers=1)
    assert {Path(s.file).name: s.reason for s in result.report.specs_skipped} == {n: r for n, (_, r) in cases.items()}
