"""A tiny OpenAPI spec per API, for catalog tests: one list operation and one schema."""

from __future__ import annotations


def small_spec(title: str, resource: str, extra_path: str = "") -> str:
    """YAML of an API named ``title`` listing ``resource``; ``extra_path``: more path items."""
    return f"""\
openapi: 3.0.0
info: {{title: {title}, version: "1", description: "The {title} API for {resource}."}}
paths:
  /{resource}:
    get:
      operationId: list_{resource}
      responses:
        "200":
          description: ok
          content:
            application/json:
              schema: {{$ref: "#/components/schemas/Item"}}
{extra_path}components:
  schemas:
    Item: {{type: object, properties: {{id: {{type: string}}}}}}
"""
