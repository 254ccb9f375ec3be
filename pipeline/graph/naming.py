"""Resource types from the names a spec already uses (RESTler's rules, ``ApiResourceTypes.fs``).

A type is a tuple of singular lowercase words: ``/accounts/{accountId}`` needs an ``account``,
``production_companies[]`` holds ``production company`` objects, ``movie-list-object`` is a
``movie list object``. No word list of any domain: the only words named here are the generic
ones every API uses for identifiers (``id``, ``uuid``...) and for version prefixes of paths.
"""

from __future__ import annotations

import re
from functools import lru_cache

import inflection
from specrag.core import caches
from specrag.core.analysis import identifier_words

# The words that make a name an identifier, in any API: ``id``, ``movie_id``, ``petId``, ``uuid``.
ID_WORDS = frozenset({"id", "ids", "uuid", "guid", "identifier"})
VERSION_SEGMENT = re.compile(r"^(v\d+(\.\d+)*|api|rest|\d+(\.\d+)*)$", re.IGNORECASE)
Type = tuple[str, ...]


@caches.register
@lru_cache(maxsize=65536)
def name_words(name: str) -> tuple[str, ...]:
    """``movieId``, ``movie_id``, ``MovieID`` -> (movie, id): names compare by these."""
    return tuple(identifier_words(name))


@caches.register
@lru_cache(maxsize=65536)
def type_words(name: str) -> Type:
    """``production_companies`` -> (production, company); ``movie-list-object`` -> (movie, list, object)."""
    return tuple(_singular(w) for w in name_words(name))


@caches.register
@lru_cache(maxsize=65536)
def _singular(word: str) -> str:
    return inflection.singularize(word) if len(word) > 2 else word


@caches.register
@lru_cache(maxsize=65536)
def is_id_name(name: str) -> bool:
    words = name_words(name)
    return bool(words) and words[-1] in ID_WORDS


@caches.register
@lru_cache(maxsize=65536)
def id_subject(name: str) -> Type:
    """The resource an id-like name names: ``movie_id`` -> (movie,); ``id`` -> ()."""
    words = name_words(name)
    while words and words[-1] in ID_WORDS:
        words = words[:-1]
    return type_words("_".join(words)) if words else ()


def static_segments(path: str) -> list[str]:
    """The path's literal segments, without parameters or version prefixes, in path order."""
    return [s for s in path.strip("/").split("/")
            if s and not s.startswith(("{", ":", "$")) and not VERSION_SEGMENT.match(s)]


def param_resources(path: str, name: str) -> list[Type]:
    """Resource types a path parameter identifies: from its name minus the id word
    (``movie_id`` -> movie) and from the literal segment right before it (``/accounts/{id}`` ->
    account), most specific first; duplicates dropped."""
    found: list[Type] = []
    subject = id_subject(name) if is_id_name(name) else ()
    if subject:
        found.append(subject)
    segments = path.strip("/").split("/")
    marker = "{" + name + "}"
    if marker in segments:
        i = segments.index(marker)
        if i > 0 and not segments[i - 1].startswith("{") and not VERSION_SEGMENT.match(segments[i - 1]):
            found.append(type_words(segments[i - 1]))
    return [t for i, t in enumerate(found) if t and t not in found[:i]]


def query_resources(path: str, name: str) -> list[Type]:
    """Resource types a required id outside the path identifies: from its name minus the id word
    (``movie_id`` -> movie); a bare ``id`` or ``ids`` names none, so the collection the request
    addresses does, as a path parameter's container would (``PUT /me/tracks?ids=`` -> track,
    ``GET /albums?ids=`` -> album), when its last segment is a plural (``/me/following?ids=``
    names no collection)."""
    if not is_id_name(name):
        return []
    subject = id_subject(name)
    if subject:
        return [subject]
    return [t for s in static_segments(path)[-1:] if (t := type_words(s)) and t != tuple(name_words(s))]


def type_match(need: Type, candidate: Type) -> float:
    """How well an object of type ``candidate`` is a ``need``: 1 equal, 0.8 ``need`` ends it
    (production company / company), 0.7 begins it (movie list object / movie), 0.5 inside it."""
    if not need or not candidate:
        return 0.0
    if candidate == need:
        return 1.0
    n = len(need)
    if n > len(candidate):
        return 0.0
    if candidate[-n:] == need:
        return 0.8
    if candidate[:n] == need:
        return 0.7
    if any(candidate[i:i + n] == need for i in range(1, len(candidate) - n)):
        return 0.5
    return 0.0


def type_label(words: Type) -> str:
    return "_".join(words)
