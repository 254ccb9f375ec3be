"""Texts of a chunk: the short embedder text and the BM25 text (the YAML an LLM reads: ``yaml_dump``)."""

from __future__ import annotations

import re
from collections import deque
from functools import lru_cache
from typing import Any

from specrag.core import caches

_MD = re.compile(r"!\[[^\]]*\]\([^)]*\)|<[^>]+>|[*_`#>|]+")
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")


def strip_markdown(text: str) -> str:
    return _plain(text) if type(text) is str else _plain(str(text or ""))


@caches.register
@lru_cache(maxsize=1 << 16)  # a spec repeats its descriptions (a parameter's, in every operation)
def _plain(text: str) -> str:
    text = _LINK.sub(r"\1", text)
    return " ".join(_MD.sub(" ", text).split())


def first_sentence(text: str, limit: int = 160) -> str:
    text = strip_markdown(text)
    cut = re.split(r"(?<=[.!?])\s", text, maxsplit=1)[0]
    return cut[:limit]


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rsplit(" ", 1)[0] + "…"


def parameter_names(params: Any) -> list[str]:
    names = []
    for p in params if isinstance(params, list) else []:
        if isinstance(p, dict) and isinstance(p.get("name"), str):
            names.append(p["name"])
        elif isinstance(p, dict) and isinstance(p.get("$ref"), str):
            names.append(p["$ref"].rsplit("/", 1)[-1])
    return names


def property_names(schema: Any, depth: int = 0) -> list[str]:
    """Property names of a schema, through allOf/items one level, refs by their last segment."""
    if not isinstance(schema, dict) or depth > 2:
        return []
    props = schema.get("properties")
    names = [str(k) for k in props] if isinstance(props, dict) else []
    for key in ("allOf", "oneOf", "anyOf"):
        for sub in schema[key] if isinstance(schema.get(key), list) else []:
            names += property_names(sub, depth + 1)
            if isinstance(sub, dict) and isinstance(sub.get("$ref"), str):
                names.append(ref_name(sub["$ref"]))
    if isinstance(schema.get("items"), dict):
        names += property_names(schema["items"], depth + 1)
    return names


def body_schemas(operation: dict) -> list[Any]:
    """Request body schemas (OAS 3 requestBody or Swagger 2 body parameter)."""
    schemas = []
    body = operation.get("requestBody")
    if isinstance(body, dict):
        for media in (body.get("content") or {}).values() if isinstance(body.get("content"), dict) else []:
            if isinstance(media, dict):
                schemas.append(media.get("schema"))
        if "$ref" in body:
            schemas.append(body)
    for p in operation["parameters"] if isinstance(operation.get("parameters"), list) else []:
        if isinstance(p, dict) and p.get("in") == "body":
            schemas.append(p.get("schema"))
    return [s for s in schemas if isinstance(s, dict)]


def ref_names(value: Any, limit: int = 12) -> list[str]:
    """Last segments of the $refs in a fragment (schema names), shallow-first, deduped."""
    names: list[str] = []
    stack = deque([value])  # list.pop(0) made this quadratic on big fragments
    while stack and len(names) < limit:
        node = stack.popleft()
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str):
                name = ref_name(ref)
                if name and name not in names:
                    names.append(name)
            stack.extend(v for k, v in node.items()
                         if isinstance(v, (dict, list)) and not str(k).startswith("x-"))
        elif isinstance(node, list):
            stack.extend(node)
    return names


def ref_name(ref: str) -> str:
    """``#/definitions/User`` -> ``User``; ``models/droplet.yml`` -> ``droplet``."""
    file_part, _, fragment = ref.partition("#")
    name = fragment.rstrip("/").rsplit("/", 1)[-1] if fragment.strip("/") else file_part.rsplit("/", 1)[-1]
    return re.sub(r"\.(ya?ml|json)$", "", name)
