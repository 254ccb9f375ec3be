"""Multi-file specs: refs into other files of the spec's folder become chunks of their own, and a
path item or operation that is itself a ``$ref`` becomes the operation chunk."""

from __future__ import annotations

from pathlib import Path

import pytest
from specrag.specs.ingest import ingest_spec
from specrag.specs.models import ChunkType

ENTRY = """\
openapi: 3.0.3
info: {title: Multi, version: "1"}
paths:
  /x:
    get:
      $ref: ops/get_x.yaml
  /y:
    $ref: ops/y_item.yaml
components:
  securitySchemes:
    key: {type: apiKey, in: header, name: X-Key}
"""
GET_X = """\
operationId: getX
summary: Get the X
tags: [things]
responses:
  "200":
    description: the thing
    content:
      application/json:
        schema: {$ref: ../models/thing.yaml}
  "404":
    description: no such thing
    content:
      application/json:
        schema: {$ref: "../models/common.yaml#/Err"}
"""
Y_ITEM = """\
parameters:
  - $ref: "../models/common.yaml#/IdParam"
delete:
  operationId: deleteY
  security: [{key: []}]
  responses:
    "204": {description: gone}
"""
THING = """\
type: object
properties:
  id: {type: string}
  owner: {$ref: "common.yaml#/Owner"}
"""
COMMON = """\
Err: {type: object, properties: {message: {type: string}}}
Owner: {type: object, properties: {name: {type: string}}}
IdParam: {name: id, in: query, schema: {type: string}}
"""


@pytest.fixture(scope="module")
def multi(tmp_path_factory):
    root = tmp_path_factory.mktemp("multi")
    for rel, body in {"api.yaml": ENTRY, "ops/get_x.yaml": GET_X, "ops/y_item.yaml": Y_ITEM,
                      "models/thing.yaml": THING, "models/common.yaml": COMMON}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(body)
    return ingest_spec(root / "api.yaml", "multi", 1500)


def test_chunk_ids_of_other_files(multi):
    ids = {c.id for c in multi.chunks}
    assert ids == {
        "multi:paths/~1x/get", "multi:paths/~1x/get:errors", "multi:paths/~1y/delete",
        "multi:components/securitySchemes/key",
        "multi:models/thing.yaml#/", "multi:models/common.yaml#/Err", "multi:models/common.yaml#/Owner",
        "multi:models/common.yaml#/IdParam",
    }
    assert multi.refs.total == multi.refs.resolved == 6 and multi.refs.unresolved == 0
    assert sorted(multi.api.files) == ["models/common.yaml", "models/thing.yaml", "ops/get_x.yaml", "ops/y_item.yaml"]


def test_path_item_refs_become_the_operation_chunk(multi):
    by_id = {c.id: c for c in multi.chunks}
    get_x = by_id["multi:paths/~1x/get"]
    assert (get_x.type, get_x.method, get_x.path, get_x.operation_id, get_x.tags) == (
        ChunkType.ENDPOINT, "GET", "/x", "getX", ["things"])
    assert "Get the X" in get_x.text
    assert list(get_x.ref_ids) == ["multi:models/thing.yaml#/", "multi:paths/~1x/get:errors"]
    assert get_x.ref_ids["multi:models/thing.yaml#/"] == ["/responses/200/content/application~1json/schema"]
    delete_y = by_id["multi:paths/~1y/delete"]
    assert delete_y.operation_id == "deleteY"
    # path-level parameters from the referenced path item, and the named security scheme
    assert set(delete_y.ref_ids) == {"multi:models/common.yaml#/IdParam", "multi:components/securitySchemes/key"}
    assert "IdParam" in delete_y.text


def test_refs_between_other_files(multi):
    by_id = {c.id: c for c in multi.chunks}
    thing = by_id["multi:models/thing.yaml#/"]
    assert thing.kind == "schemas" and thing.name == "thing"
    assert list(thing.ref_ids) == ["multi:models/common.yaml#/Owner"]
    errors = by_id["multi:paths/~1x/get:errors"]
    assert errors.type is ChunkType.ERRORS
    assert list(errors.ref_ids) == ["multi:models/common.yaml#/Err"]
    assert by_id["multi:models/common.yaml#/Err"].referenced_by == [errors.id]
    assert by_id["multi:models/common.yaml#/Owner"].referenced_by == [thing.id]
    assert "$ref: ../models/thing.yaml" in by_id["multi:paths/~1x/get"].text  # kept, not inlined


DO_SPEC = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "digitalocean" / "specification" / "DigitalOcean-public.v2.yaml"


@pytest.mark.skipif(not DO_SPEC.is_file(), reason="the shared corpus is absent")
def test_digitalocean_refs_resolve_and_droplets_create_links():
    api = ingest_spec(DO_SPEC, "do", 1500)
    assert api.refs.total > 5000
    assert api.refs.resolved == api.refs.total and api.refs.unresolved == 0, api.unresolved_samples
    by_id = {c.id: c for c in api.chunks}
    create = next(c for c in api.chunks if c.operation_id == "droplets_create" and c.type is ChunkType.ENDPOINT)
    assert create.id == "do:paths/~1v2~1droplets/post"
    assert {"do:resources/droplets/models/droplet_single_create.yml#/",
            "do:resources/droplets/models/droplet_multi_create.yml#/",
            "do:paths/~1v2~1droplets/post:errors"} <= set(create.ref_ids)
    assert create.ref_ids["do:paths/~1v2~1droplets/post:errors"] == ["responses"]
    errors = by_id["do:paths/~1v2~1droplets/post:errors"]
    assert {"do:shared/responses/unauthorized.yml#/", "do:shared/responses/server_error.yml#/"} <= set(errors.ref_ids)
    for rid in [*create.ref_ids, *errors.ref_ids]:
        assert rid in by_id
        assert create.id in by_id[rid].referenced_by or errors.id in by_id[rid].referenced_by
    assert "x-codeSamples" not in create.text
