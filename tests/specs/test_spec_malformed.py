"""A folder of good and broken specs: every bad file is skipped with its own reason, nothing
crashes, nothing unsafe runs, refs never leave the spec's folder, and the good files are read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from specrag.specs.ingest import ingest_paths

GOOD_OAS3 = """\
openapi: 3.0.0
info: {title: Pets, version: "1"}
paths:
  /pets:
    get:
      operationId: listPets
      responses:
        "200":
          description: ok
          content:
            application/json:
              schema: {$ref: "#/components/schemas/Pet"}
components:
  schemas:
    Pet:
      type: object
      properties:
        id: {type: integer}
        owner: {$ref: "../outside.yaml#/X"}
        remote: {$ref: "https://example.com/x.yaml#/Y"}
        gone: {$ref: "missing.yaml#/Z"}
        dangling: {$ref: "#/components/schemas/Nope"}
"""

GOOD_SWAGGER = {
    "swagger": "2.0", "info": {"title": "Shop", "version": "1"},
    "paths": {"/orders": {"post": {"operationId": "createOrder", "parameters": [
        {"name": "body", "in": "body", "schema": {"$ref": "#/definitions/Order"}}],
        "responses": {"201": {"description": "created"}}}}},
    "definitions": {"Order": {"type": "object", "properties": {"id": {"type": "string"}}}},
}

CIRCULAR_1 = """\
openapi: 3.0.0
info: {title: Tree, version: "1"}
paths: {}
components:
  schemas:
    Node:
      type: object
      properties:
        children: {type: array, items: {$ref: "#/components/schemas/Node"}}
"""

CIRCULAR_3 = """\
swagger: "2.0"
info: {title: Ring, version: "1"}
paths:
  /a:
    get:
      responses:
        "200": {description: ok, schema: {$ref: "#/definitions/A"}}
definitions:
  A: {type: object, properties: {b: {$ref: "#/definitions/B"}}}
  B: {type: object, properties: {c: {$ref: "#/definitions/C"}}}
  C: {type: object, properties: {a: {$ref: "#/definitions/A"}}}
"""


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("malformed")
    (root / "outside.yaml").write_text("X: {type: string, description: SECRET-OUTSIDE}\n")
    folder = root / "specs"
    folder.mkdir()
    marker = root / "pwned"
    (folder / "good_pets.yaml").write_text(GOOD_OAS3)
    (folder / "good_shop.json").write_text(json.dumps(GOOD_SWAGGER))
    (folder / "circular1.yaml").write_text(CIRCULAR_1)
    (folder / "circular3.yaml").write_text(CIRCULAR_3)
    (folder / "bad_json.json").write_text('{"openapi": "3.0.0", "paths": {"/x": ')
    (folder / "bad_yaml.yaml").write_text("openapi: 3.0.0\npaths:\n  /x: [unclosed\n")
    (folder / "not_mapping.json").write_text('[{"openapi": "3.0.0", "paths": {}}]')
    (folder / "no_paths.yaml").write_text("openapi: 3.0.0\ninfo: {title: Empty, version: '1'}\n")
    (folder / "python_tag.yaml").write_text(
        f"openapi: 3.0.0\npaths: {{}}\nboom: !!python/object/apply:os.system ['touch {marker}']\n")
    (folder / "notes.yaml").write_text("just: some config\n")  # no openapi key: not a spec, not reported
    return folder, marker


@pytest.fixture(scope="module")
def result(corpus):
    folder, _ = corpus
    # a file found in a folder is a spec only if it is a mapping; given explicitly, a list is reported
    return ingest_paths([folder, folder / "not_mapping.json"], 1500, workers=1)


def _reasons(result) -> dict[str, str]:
    return {Path(s.file).name: s.reason for s in result.report.specs_skipped}


@pytest.mark.parametrize("name, reason", [
    ("bad_json.json", "invalid JSON"),
    ("bad_yaml.yaml", "invalid YAML"),
    ("not_mapping.json", "top level is list, not a mapping"),
    ("no_paths.yaml", "no 'paths' object"),
    ("python_tag.yaml", "unsafe or unknown YAML tag"),
])
def test_each_bad_file_has_its_reason(result, name, reason):
    reasons = _reasons(result)
    assert name in reasons, reasons
    assert reasons[name].startswith(reason), reasons[name]
    assert "\n" not in reasons[name] and len(reasons[name]) < 300


def test_only_bad_files_skipped_and_good_ones_read(result):
    assert sorted(_reasons(result)) == ["bad_json.json", "bad_yaml.yaml", "no_paths.yaml",
                                        "not_mapping.json", "python_tag.yaml"]
    assert result.report.specs_read == 4
    assert [a.api.file_id for a in result.apis] == ["circular1", "circular3", "good_pets", "good_shop"]
    chunks = {c.id for a in result.apis for c in a.chunks}
    assert {"good_pets:paths/~1pets/get", "good_pets:components/schemas/Pet",
            "good_shop:paths/~1orders/post", "good_shop:definitions/Order"} <= chunks


def test_python_tag_is_not_executed(corpus, result):
    _, marker = corpus
    assert not marker.exists()


def test_escaping_and_url_refs_are_counted_not_followed(result):
    pets = next(a for a in result.apis if a.api.file_id == "good_pets")
    assert pets.refs.external == {"escapes_root": 1, "url": 1}
    assert pets.refs.unresolved_by_kind == {"missing_file": 1, "missing_target": 1}
    assert (pets.refs.total, pets.refs.resolved, pets.refs.unresolved) == (3, 1, 2)
    assert pets.api.files == []  # no other file was read
    ids = [c.id for c in pets.chunks]
    assert sorted(ids) == ["good_pets:components/schemas/Pet", "good_pets:paths/~1pets/get"]
    assert not any("SECRET-OUTSIDE" in c.text for c in pets.chunks)
    pet = next(c for c in pets.chunks if c.name == "Pet")
    assert pet.ref_ids == {}
    assert "../outside.yaml#/X" in pet.text and "https://example.com/x.yaml#/Y" in pet.text
    # the corpus-wide report sums them too
    assert result.report.refs.external == {"escapes_root": 1, "url": 1}


def test_circular_refs_link_and_terminate(result):
    by_id = {c.id: c for a in result.apis for c in a.chunks}
    node = by_id["circular1:components/schemas/Node"]
    assert list(node.ref_ids) == [node.id]
    assert node.ref_ids[node.id] == ["/properties/children/items"]
    assert node.referenced_by == [node.id]
    a, b, c = (by_id[f"circular3:definitions/{n}"] for n in "ABC")
    assert list(a.ref_ids) == [b.id] and list(b.ref_ids) == [c.id] and list(c.ref_ids) == [a.id]
    assert a.referenced_by == sorted([c.id, "circular3:paths/~1a/get"])
    assert b.referenced_by == [a.id] and c.referenced_by == [b.id]
    ring = next(x for x in result.apis if x.api.file_id == "circular3")
    assert (ring.refs.total, ring.refs.resolved) == (4, 4)
    assert len(ring.chunks) == 4  # no chunk duplicated by walking the cycle


def test_symlink_out_of_the_tree_escapes_root(tmp_path):
    from specrag.specs.ingest import ingest_spec

    (tmp_path / "outside.yaml").write_text("X: {type: string, description: SECRET-OUTSIDE}\n")
    spec_dir = tmp_path / "api"
    spec_dir.mkdir()
    (spec_dir / "link.yaml").symlink_to(tmp_path / "outside.yaml")
    (spec_dir / "api.yaml").write_text(
        "openapi: 3.0.0\npaths: {}\ncomponents:\n  schemas:\n    S: {$ref: 'link.yaml#/X'}\n")
    api = ingest_spec(spec_dir / "api.yaml", "api", 1500)
    assert api.refs.external == {"escapes_root": 1}
    assert [c.id for c in api.chunks] == ["api:components/schemas/S"]
    assert api.api.files == [] and "SECRET-OUTSIDE" not in api.chunks[0].text
