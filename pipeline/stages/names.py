"""Names in a question, and the words around them: what tells which resource a name is.

A name is a quoted text or a run of capitalised words that does not start a sentence (``I``
and all-capitals abbreviations left out). Only the grammar of English names is used, never a
domain's words: the two words right before a name (articles and "called"/"named"/"titled"
skipped, never across a comma) may be the resource it is ("the collection Star Wars", "a TV
show called X"; "a new playlist called X" names something not made yet), a possessive says the
name is *not* the resource after it ("Cate Blanchett's latest TV show"), and so does the agent
of a passive clause: a name after "by" is not the resource the words before "by" name ("movies
directed by Sofia Coppola").

The asker's own things ("my playlists", "our invoices") are named by a first-person possessive,
or by the asker as beneficiary ("a playlist for me"); an API names the caller with a first-person
path segment (``GET /me``, ``/me/tracks``, ``/my/follows``).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import NamedTuple

from specrag.core import caches

# double quotes, or single quotes that open and close at word edges (never an apostrophe: "Nolan's")
_QUOTED = re.compile(r"[\"“”«»]([^\"“”«»]{2,80})[\"“”«»]|(?<!\w)['‘]([^'‘’]{2,80}?)['’](?!\w)")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_POSSESSIVE = re.compile(r"['’]s?$")
WINDOW = 3  # words after a possessive that may name what the name owns
TYPE_WORDS = 2  # words right before a name that may name its resource
_NAMING = {"the", "a", "an", "called", "named", "titled"}  # between a resource word and its name
NEW = "new"  # among the words before a name: the name of something being made
_PARTICLES = {"of", "the", "de", "von", "van", "la", "le", "del", "da", "du"}  # inside names: House of Cards
_OWN = {"my", "mine", "our", "ours"}  # first-person possessives
_BENEFICIARY = {"me", "us"}  # "for me": what is made or done is the asker's
_SELF_SEGMENTS = {"me", "my", "mine"}  # a path's first-person segment: the caller


class NamedSpan(NamedTuple):
    text: str
    before: list[str]  # up to WINDOW words right before the name, lowercased
    owned: list[str]  # after a possessive ("X's latest movie"): up to WINDOW words, else []
    acted_on: list[str] = []  # after "by" ("movies directed by X"): up to WINDOW words before "by", else []


def named_spans(question: str) -> list[NamedSpan]:
    """Quoted names first, then capitalised runs, in question order; never the name given to
    something new ("a new playlist called 'Road Trip'": nothing has it yet to be looked up)."""
    return [span for span in _spans(question) if NEW not in span.before]


@caches.register
@lru_cache(maxsize=256)
def _spans(question: str) -> tuple[NamedSpan, ...]:
    """Read once per question (stage 1, stage 3's fleet side, the method prior and producer
    expansion all ask: ~30 us each); the spans are shared, so callers only read them."""
    spans = [NamedSpan((m.group(1) or m.group(2)).strip(), _type_window(question[: m.start()].split()), [],
                       _acted_on(question[: m.start()].split())) for m in _QUOTED.finditer(question)]
    for sentence in _SENTENCE.split(_QUOTED.sub(" , ", question)):
        words = sentence.split()
        i = 1  # a sentence's first word is capitalised anyway
        while i < len(words):
            if not _is_name_word(words[i]):
                i += 1
                continue
            start = i
            while i < len(words) and (i == start or not _ends_clause(words[i - 1])) and (
                    _is_name_word(words[i]) or (words[i] in _PARTICLES and i + 1 < len(words)
                                                and _is_name_word(words[i + 1]))):
                i += 1
            text = " ".join(_clean(w) for w in words[start:i])
            owned = _lower(words[i: i + WINDOW]) if _POSSESSIVE.search(_clean(words[i - 1])) else []
            spans.append(NamedSpan(_POSSESSIVE.sub("", text), _type_window(words[:start]), owned,
                                   _acted_on(words[:start])))
    return tuple(spans)


def without_names(question: str) -> str:
    """The question with its names blanked: what it asks for, not the values it names ("the
    network that produced Game of Thrones" asks for no game). The question itself when nothing
    else is left."""
    names = sorted({span.text for span in _spans(question) if span.text}, key=len, reverse=True)
    rest = _QUOTED.sub(" ", question)
    if names:  # one pass, longest first: "Star Wars" before "Star"
        rest = re.sub(rf"(?<!\w)(?:{'|'.join(map(re.escape, names))})(?!\w)", " ", rest)
    return rest if rest.strip(" ,;:?!.'\"") else question


def names_something(question: str) -> bool:
    """The question names a thing whose id must be looked up."""
    return bool(named_spans(question))


def owned_by_asker(question: str) -> list[str] | None:
    """The words first-person possessives govern, up to WINDOW after each within its clause
    ("add it to my saved tracks" -> saved, tracks); [] when the asker is only the beneficiary
    ("create a playlist for me": what is made is the asker's, the caller's id is the user's);
    None when the question has neither."""
    words = question.split()
    lowered = _lower(words)
    owners = [i for i, word in enumerate(lowered) if word in _OWN]
    if not owners:
        for_me = any(low in _BENEFICIARY and lowered[i - 1] == "for" for i, low in enumerate(lowered) if i)
        return [] if for_me else None
    governed: list[str] = []
    for i in owners:
        if _ends_clause(words[i]):
            continue
        for word, low in zip(words[i + 1: i + 1 + WINDOW], lowered[i + 1: i + 1 + WINDOW]):
            governed += [low] if low else []
            if _ends_clause(word):
                break
    return governed


def names_the_caller(path: str) -> bool:
    """The path names the caller (``/me``, ``/me/tracks``): what it returns is the asker's own."""
    return any(segment.lower() in _SELF_SEGMENTS for segment in path.split("/"))


def _type_window(before: list[str]) -> list[str]:
    """The words that may say what a name is: the last TYPE_WORDS before it, naming words skipped."""
    words: list[str] = []
    for word in reversed(before):  # stops at TYPE_WORDS: a question of many names stays linear
        if _ends_clause(word) or len(words) == TYPE_WORDS:
            break
        low = _lower([word])[0]
        if words or low not in _NAMING:
            words.insert(0, low)
    return words


def _acted_on(before: list[str]) -> list[str]:
    """The words before "by" when the name is the agent of a passive clause (within the clause)."""
    words = _lower(before[-1:])
    if words != ["by"]:
        return []
    clause: list[str] = []
    for word in reversed(before[:-1][-WINDOW:]):
        if _ends_clause(word):
            break
        clause.insert(0, word)
    return _lower(clause)


def _is_name_word(word: str) -> bool:
    word = _clean(word)
    return word[:1].isupper() and word != "I" and not (word.isupper() and len(word) > 1) and not word.isdigit()


def _ends_clause(word: str) -> bool:
    return word.endswith((",", ";", ":", "?", "!", "."))


def _clean(word: str, keep_s: bool = False) -> str:
    return word.strip(",;:?!().\"“”")


def _lower(words: list[str]) -> list[str]:
    return [w.strip(",;:?!().'’\"“”").lower() for w in words]
