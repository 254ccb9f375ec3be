"""Catalog entry and per-API index built from the chunks of a small hand-written spec."""

from __future__ import annotations

import pytest
from specrag.catalog.build import api_index, catalog_entry, path_domain
from specrag.catalog.models import SchemaUse
from specrag.specs.ingest import ingest_spec

LONG_MD = ("The **Library** API lets you [manage books](https://example.com/docs) and `authors`. "
           + "It keeps _every_ edition of every book on the shelves of the library. " * 6)

LIBRARY = f"""\
openapi: 3.0.3
info:
  title: Library
  version: "1"
  x-apisguru-categories: [Media, open_data]
  description: |
    {LONG_MD}
paths:
  /books:
    post:
      operationId: createBook
      summary: Add a book
      tags: [books]
      requestBody:
        content:
          application/json:
            schema: {{$ref: "#/components/schemas/BookCreate"}}
      responses:
        "201":
          description: created
          content:
            application/json:
              schema: {{$ref: "#/components/schemas/Book"}}
        "400":
          description: invalid
          content:
            application/json:
              schema: {{$ref: "#/components/schemas/Error"}}
  /books/{{id}}:
    get:
      operationId: getBook
      summary: Get a book
      tags: [books]
      responses:
        "200":
          description: the book
          content:
            application/json:
              schema: {{$ref: "#/components/schemas/Book"}}
  /v1/authors:
    get:
      summary: List authors
      responses:
        "200":
          description: authors
          content:
            application/json:
              schema: {{type: array, items: {{$ref: "#/components/schemas/Author"}}}}
components:
  schemas:
    BookCreate:
      type: object
      properties:
        title: {{type: string}}
        tags: {{type: array, items: {{$ref: "#/components/schemas/Tag"}}}}
    Book:
      type: object
      properties:
        title: {{type: string}}
        author: {{$ref: "#/components/schemas/Author"}}
        tags: {{type: array, items: {{$ref: "#/components/schemas/Tag"}}}}
    Author: {{type: object, properties: {{name: {{type: string}}}}}}
    Tag: {{type: string}}
    Error: {{type: object, properties: {{message: {{type: string}}}}}}
    Unused: {{type: object}}
"""


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    path = tmp_path_factory.mktemp("lib") / "library.yaml"
    path.write_text(LIBRARY)
    return ingest_spec(path, "library", 1500)


def test_catalog_entry(library):
    entry = catalog_entry(library)
    assert (entry.file_id, entry.name) == ("library", "Library")
    assert len(entry.description) <= 200
    assert entry.description.startswith("The Library API lets you manage books and authors")
    assert entry.description.endswith("…") and "It keeps every edition" in entry.description
    assert not any(mark in entry.description for mark in ("**", "`", "](", "_every_"))
    # categories first, then tags and path segments by frequency (books: 2 tags + 2 paths)
    assert entry.domains == ["media", "open_data", "books", "authors"]


def test_catalog_entry_description_falls_back_to_tags_then_title(tmp_path):
    spec = ("openapi: 3.0.0\ninfo: {title: Bare, version: '1'}\n"
            "tags: [{name: pets, description: 'All the *pets*.'}]\npaths: {}\n")
    (tmp_path / "bare.yaml").write_text(spec)
    assert catalog_entry(ingest_spec(tmp_path / "bare.yaml", "bare", 1500)).description .split() == ["All", "the", "pets", "."]
    (tmp_path / "bare.yaml").write_text(spec.replace("tags: [{name: pets, description: 'All the *pets*.'}]\n", ""))
    assert catalog_entry(ingest_spec(tmp_path / "bare.yaml", "bare", 1500)).description == "Bare"


def test_index_endpoints(library):
    index = api_index(library)
    assert (index.file_id, index.name) == ("library", "Library")
    assert [(e.path, e.methods, e.operation_ids, e.summaries) for e in index.endpoints] == [
        ("/books", ["POST"], ["createBook"], ["Add a book"]),
        ("/books/{id}", ["GET"], ["getBook"], ["Get a book"]),
        ("/v1/authors", ["GET"], [], ["List authors"]),
    ]


def test_index_schemas_roles_and_users(library):
    schemas = {s.name: s for s in api_index(library).schemas}
    assert sorted(schemas) == ["Author", "Book", "BookCreate", "Error", "Tag", "Unused"]
    assert [s.name for s in api_index(library).schemas] == ["Author", "Book", "BookCreate", "Error", "Tag", "Unused"]
    expected = {
        "BookCreate": (SchemaUse.REQUEST, ["createBook"]),
        "Book": (SchemaUse.RESPONSE, ["createBook", "getBook"]),
        "Author": (SchemaUse.RESPONSE, ["GET /v1/authors", "createBook", "getBook"]),  # via Book, 2 hops
        "Error": (SchemaUse.RESPONSE, ["createBook"]),  # through the errors chunk
        "Tag": (SchemaUse.SHARED, ["createBook", "getBook"]),  # in a request and in responses
        "Unused": (SchemaUse.SHARED, []),
    }
    assert {n: (s.type, s.used_by) for n, s in schemas.items()} == expected
    assert schemas["Book"].chunk_id == "library:components/schemas/Book"


def test_index_domains(library):
    domains = {d.name: d for d in api_index(library).domains}
    assert sorted(domains) == ["authors", "books"]
    assert domains["books"].endpoints == ["POST /books", "GET /books/{id}"]
    assert domains["books"].schemas == ["Author", "Book", "BookCreate", "Error", "Tag"]
    assert domains["authors"].endpoints == ["GET /v1/authors"]
    assert domains["authors"].schemas == ["Author"]


@pytest.mark.parametrize("path, domain", [
    ("/v1/authors", "authors"), ("/api/v2.1/books/{id}", "books"), ("/{tenant}/users", "users"),
    ("/v1/{name}:cancel", None), ("/", None), ("/rest/files.list", "files"), ("/Repos:search", "repos"),
])
def test_path_domain(path, domain):
    assert path_domain(path) == domain


def test_split_parts_are_not_listed_and_suffix_like_names_are(tmp_path):
    """A schema split into parts is one entry; a schema *named* like a part suffix is its own."""
    props = "\n".join(f"        field{i}: {{type: string, description: 'field number {i} of a long record'}}"
                      for i in range(60))
    (tmp_path / "big.yaml").write_text(
        "openapi: 3.0.0\ninfo: {title: Big, version: '1'}\npaths: {}\ncomponents:\n  schemas:\n"
        f"    Big:\n      type: object\n      properties:\n{props}\n"
        "    'Odd:part2': {type: object, properties: {x: {type: string}}}\n")
    api = ingest_spec(tmp_path / "big.yaml", "big", 200)
    assert any(c.id.endswith(":part2") for c in api.chunks)  # Big really was split
    assert sorted(s.name for s in api_index(api).schemas) == ["Big", "Odd:part2"]
