"""OpenAPI 3 ``links``: dependencies the spec states outright, so they need no inference.

``responses.201.links.GetUser = {operationId: getUser, parameters: {userId: $response.body#/id}}``
says the response's ``id`` fills ``getUser``'s ``userId``. Targets are found by ``operationId``
or by an ``operationRef`` inside the spec (``#/paths/~1users~1{id}/get``).
"""

from __future__ import annotations

from typing import Any, Iterator, NamedTuple

from specrag.core.ids import HTTP_METHODS, pointer_to_tokens
from specrag.graph.infer import Resolve, _deref, success_responses


class StatedLink(NamedTuple):
    producer: str  # chunk id of the operation whose response has the link
    target_operation_id: str  # operationId named by the link, or ''
    target_path: str  # path of an operationRef, or ''
    target_method: str
    param: str
    field: str  # 'id', 'data[].id', or the runtime expression when it is not the response body


def stated_links(producer: str, op: dict, resolve: Resolve, base: Any) -> Iterator[StatedLink]:
    for _, response, resp_base in success_responses(op, resolve, base):
        links = response.get("links") if isinstance(response.get("links"), dict) else {}
        for link in links.values():
            link, _, _ = _deref(link, resolve, resp_base)
            if not isinstance(link, dict) or not isinstance(link.get("parameters"), dict):
                continue
            op_id = str(link.get("operationId") or "")
            path, method = _operation_ref(str(link.get("operationRef") or ""))
            if not op_id and not path:
                continue
            for param, expression in link["parameters"].items():
                name = str(param).split(".", 1)[1] if str(param).startswith(("path.", "query.", "header.")) else str(param)
                yield StatedLink(producer, op_id, path, method, name, body_field(str(expression)))


def body_field(expression: str) -> str:
    """``$response.body#/data/0/id`` -> ``data[].id``; other expressions are kept as written."""
    prefix = "$response.body#"
    if not expression.startswith(prefix):
        return expression
    try:
        tokens = pointer_to_tokens(expression[len(prefix):])
    except ValueError:
        return expression
    out = ""
    for token in tokens:
        out += "[]" if token.isdigit() else (f".{token}" if out else token)
    return out or "(body)"


def _operation_ref(ref: str) -> tuple[str, str]:
    """``#/paths/~1users~1{id}/get`` -> ('/users/{id}', 'GET'); anything else -> ('', '')."""
    if not ref.startswith("#/paths/"):
        return "", ""
    tokens = pointer_to_tokens(ref[1:])
    if len(tokens) == 3 and tokens[2].lower() in HTTP_METHODS:
        return tokens[1], tokens[2].upper()
    return "", ""
