"""The two search views of a chunk: ``embed_text`` (short, for the embedder; its cost grows with
length) and ``search_text`` (BM25: names in both raw and split form, summary, description; for
an operation also the fields it returns, so "the cast of a show" finds the call whose response
holds ``cast``)."""

from __future__ import annotations

from typing import Any

from specrag.core.analysis import split_identifier
from specrag.graph.infer import success_schemas
from specrag.specs.render import (
    body_schemas,
    clip,
    first_sentence,
    parameter_names,
    property_names,
    ref_names,
    strip_markdown,
)

EMBED_CHARS = 140  # ~30 word pieces: the model costs ~3x per text at 64 tokens than at 25
SEARCH_DESCRIPTION_CHARS = 600
SEARCH_RESPONSE_FIELDS = 30  # names of returned fields in an operation's search text (a big schema is cut)
_SINGULAR = {"schemas": "schema", "parameters": "parameter", "responses": "response", "requestBodies": "request body",
             "headers": "header", "securitySchemes": "security scheme", "examples": "example"}


def _inline_only(ref: str, base: Any) -> None:
    """Returned fields are read where the response states them: a ``$ref`` is not followed
    (following them measured worse on the labeled sets: README, "Measured")."""
    return None


def _words(names: list[str]) -> str:
    return " ".join(dict.fromkeys(n for name in names for n in (name, split_identifier(name)) if n))


def _path_words(path: str) -> str:
    return " ".join(split_identifier(seg.strip("{}")) for seg in path.split("/") if seg)


def operation_texts(method: str, path: str, op: dict) -> dict[str, str]:
    op_id = str(op.get("operationId", "") or "")
    summary = strip_markdown(op.get("summary", ""))
    description = strip_markdown(op.get("description", ""))
    tags = [str(t) for t in op.get("tags", [])] if isinstance(op.get("tags"), list) else []
    params = parameter_names(op.get("parameters"))
    body_props = [p for s in body_schemas(op) for p in property_names(s)]
    returned = list(dict.fromkeys(p for s, _ in success_schemas(op, _inline_only, None)
                                  for p in property_names(s)))[:SEARCH_RESPONSE_FIELDS]
    schema_names = ref_names({k: op.get(k) for k in ("requestBody", "responses", "parameters")})
    about = summary or first_sentence(description)
    embed = clip(f"{method} {_path_words(path)}: {about or split_identifier(op_id)}", EMBED_CHARS)
    search = " ".join([
        method, path, _path_words(path), _words([op_id]), summary, " ".join(tags), _words(params),
        _words(body_props), _words(returned), _words(schema_names), clip(description, SEARCH_DESCRIPTION_CHARS),
    ])
    return {"embed_text": embed, "search_text": " ".join(search.split())}


def component_texts(kind: str, name: str, value: Any) -> dict[str, str]:
    value = value if isinstance(value, dict) else {}
    description = strip_markdown(value.get("description", "") or value.get("title", ""))
    props = property_names(value) or property_names(value.get("schema"))
    label = _SINGULAR.get(kind, kind)
    gist = first_sentence(description, 90) or "fields: " + " ".join(props[:8])
    embed = clip(f"{label} {split_identifier(name)}: {gist}", EMBED_CHARS)
    search = " ".join([label, _words([name]), _words(props), _words(ref_names(value)),
                       clip(description, SEARCH_DESCRIPTION_CHARS)])
    return {"embed_text": embed, "search_text": " ".join(search.split())}


def errors_texts(method: str, path: str, op_id: str, errors: dict) -> dict[str, str]:
    parts = []
    for code, response in errors.items():
        desc = first_sentence(response.get("description", ""), 60) if isinstance(response, dict) else ""
        parts.append(f"{code} {desc}".strip())
    names = ref_names(errors)
    embed = clip(f"errors of {method} {_path_words(path)} ({split_identifier(op_id)}): {'; '.join(parts)}", EMBED_CHARS)
    search = f"error errors {method} {path} {_path_words(path)} {_words([op_id])} {' '.join(parts)} {_words(names)}"
    return {"embed_text": embed, "search_text": " ".join(search.split())}
