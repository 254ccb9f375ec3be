"""Chunk ids: ``{file_id}:{element_path}``, reversible by pure functions.

The element path is a JSON Pointer without its leading ``#/`` (RFC 6901 escaping: ``~`` is
``~0`` and ``/`` is ``~1``), so ``#/components/schemas/User`` in ``tmdb`` is
``tmdb:components/schemas/User`` and ``GET /movie/{movie_id}`` is
``tmdb:paths/~1movie~1{movie_id}/get``. Two suffixes, which never occur in a pointer because
they follow a complete element path, mark derived chunks:

- ``:errors``  the error responses of an operation (``tmdb:paths/~1movie/get:errors``);
- ``:partN``   part N (N >= 2) of a chunk too big for the token limit.

So that no element can end like a suffix, a token of an element path that ends in ``:partN``
or ``:errors`` writes that ``:`` as ``~3A`` (a component ``Big:part2`` is
``components/schemas/Big~3Apart2``, never the second part of ``Big``). ``~`` followed by
anything but ``0``/``1`` never occurs otherwise, so this stays reversible.

OpenAPI 3.1 webhooks are ``webhooks/{name}/{method}`` (``shop:webhooks/newOrder/post``).

Fragments that live in another file of a multi-file spec use the file's path relative to the
spec's root folder plus the pointer inside it: ``do:resources/droplets/models/droplet.yml#/``.
``file_id`` may not contain ``:``; everything after the first ``:`` is the element path.
"""

from __future__ import annotations

import re

ERRORS_SUFFIX = ":errors"
_PART_RE = re.compile(r":part(\d+)$")
_SUFFIX_COLON = re.compile(r":(?=(?:part\d+|errors)$)")
_ID_ESCAPES = re.compile(r"~(0|1|3A)")
_ID_UNESCAPED = {"0": "~", "1": "/", "3A": ":"}
HTTP_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")


def escape_token(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def unescape_token(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def escape_id_token(token: str) -> str:
    """A token as it appears in a chunk id: JSON Pointer escaping, and a suffix-like tail's
    ``:`` as ``~3A``."""
    return _SUFFIX_COLON.sub("~3A", escape_token(token))


def unescape_id_token(token: str) -> str:
    return _ID_ESCAPES.sub(lambda m: _ID_UNESCAPED[m.group(1)], token)


def element_path(tokens: list[str] | tuple[str, ...]) -> str:
    return "/".join(escape_id_token(t) for t in tokens)


def pointer_to_tokens(pointer: str) -> list[str]:
    """``#/a/b~1c`` or ``/a/b~1c`` -> ``["a", "b/c"]``; ``#`` or ``""`` -> ``[]``."""
    pointer = pointer[1:] if pointer.startswith("#") else pointer
    if not pointer:
        return []
    if not pointer.startswith("/"):
        raise ValueError(f"not a JSON pointer: {pointer!r}")
    return [unescape_token(t) for t in pointer[1:].split("/")]


def tokens_to_path(tokens: list[str] | tuple[str, ...]) -> str:
    return "/".join(escape_token(t) for t in tokens)


def make_chunk_id(file_id: str, tokens: list[str] | tuple[str, ...]) -> str:
    return f"{file_id}:{element_path(tokens)}"


def external_chunk_id(file_id: str, relpath: str, tokens: list[str] | tuple[str, ...]) -> str:
    return f"{file_id}:{relpath}#/{element_path(tokens)}"


def operation_chunk_id(file_id: str, path: str, method: str) -> str:
    return make_chunk_id(file_id, ["paths", path, method.lower()])


def webhook_chunk_id(file_id: str, name: str, method: str) -> str:
    return make_chunk_id(file_id, ["webhooks", name, method.lower()])


def errors_chunk_id(operation_id: str) -> str:
    return operation_id + ERRORS_SUFFIX


def part_chunk_id(base_id: str, part: int) -> str:
    return base_id if part <= 1 else f"{base_id}:part{part}"


def split_chunk_id(chunk_id: str) -> tuple[str, str]:
    """-> (file_id, element_path); raises ValueError for a string that is no chunk id."""
    file_id, sep, element = chunk_id.partition(":")
    if not sep or not file_id:
        raise ValueError(f"not a chunk id (want 'file_id:element_path'): {chunk_id!r}")
    return file_id, element


def base_chunk_id(chunk_id: str) -> str:
    """Strip a ``:partN`` suffix."""
    return _PART_RE.sub("", chunk_id) if ":part" in chunk_id else chunk_id


def parse_operation_id(chunk_id: str) -> tuple[str, str, str] | None:
    """-> (file_id, path, METHOD) for an operation or its errors chunk, else None."""
    return _parse_method_id(chunk_id, "paths")


def operation_method(chunk_id: str) -> str | None:
    """The METHOD of an operation or its errors chunk; None for anything else, a malformed id included."""
    try:
        op = parse_operation_id(chunk_id)
    except ValueError:
        return None
    return op[2] if op else None


def parse_webhook_id(chunk_id: str) -> tuple[str, str, str] | None:
    """-> (file_id, webhook name, METHOD) for a webhook operation or its errors chunk, else None."""
    return _parse_method_id(chunk_id, "webhooks")


def _parse_method_id(chunk_id: str, section: str) -> tuple[str, str, str] | None:
    file_id, element = split_chunk_id(base_chunk_id(chunk_id))
    if element.endswith(ERRORS_SUFFIX):
        element = element[: -len(ERRORS_SUFFIX)]
    parts = element.split("/")
    if len(parts) != 3 or parts[0] != section or parts[2] not in HTTP_METHODS:
        return None
    return file_id, unescape_id_token(parts[1]), parts[2].upper()
