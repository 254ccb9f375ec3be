"""The offline decomposition: split a multi-intent question at its clause boundaries.

Only the grammar of requests is used, never a domain's words: sentence ends, semicolons, and
the connectives that chain actions (``then``, ``and then``, ``after that``), and ``and`` /
``also`` between two clauses long enough to be requests of their own (not before a capitalised
word: "Twin Peaks and Mulholland Drive" joins two names, not two requests). A question with
one intent comes back whole.
"""

from __future__ import annotations

import re

MIN_CLAUSE_WORDS = 3  # an 'and' splits only when both sides have at least this many words
_HARD = re.compile(r"(?<=[.!?;])\s+|\s*;\s*|,?\s+(?:and\s+)?then\s+|,?\s+after\s+that,?\s+|,\s+also\s+", re.IGNORECASE)
_AND = re.compile(r",?\s+(?:and|also)\s+(?![A-Z])")
_LEADING = re.compile(r"^(?:and\s+)?then\s+", re.IGNORECASE)


def split_question(question: str, max_parts: int = 5) -> list[str]:
    """Sub-questions in the order asked; ``[question]`` when there is one intent."""
    parts: list[str] = []
    for clause in _HARD.split(question):
        parts += _split_and(clause)
    parts = [_LEADING.sub("", p.strip(" ,.;")) for p in parts]
    parts = [p for p in parts if len(p.split()) >= 2]
    parts = list(dict.fromkeys(parts))
    if len(parts) <= 1:
        return [" ".join(question.split())]
    return parts[: max(1, max_parts - 1)] + [" ".join(parts[max(1, max_parts - 1):])] \
        if len(parts) > max_parts else parts


def _split_and(clause: str) -> list[str]:
    pieces = _AND.split(clause)
    if len(pieces) > 1 and all(len(p.split()) >= MIN_CLAUSE_WORDS for p in pieces):
        return pieces
    return [clause]
