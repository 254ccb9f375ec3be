"""Query analysis: is the question about an endpoint, a schema, or errors?

The answer becomes a ``type`` filter for stage 3, which the retriever drops again when it
leaves fewer than 3 results.
"""

from __future__ import annotations

import re
from enum import Enum


class Intent(str, Enum):
    ENDPOINT = "endpoint"
    SCHEMA = "schema"
    ERRORS = "errors"


# a 4xx/5xx number is a status code when it is a registered one (RFC 9110 and friends) or sits
# next to an HTTP word; any other (a house number, part of an IP address) is data
_CODES = "|".join(["40[0-9]", "41[0-8]", "42[1-689]", "431", "451", "50[0-8]", "51[01]"])
_HTTP_WORD = r"(?:status|code|http|error|response|returns?|returned)"
_ERRORS = re.compile(r"\b(errors?|fail(s|ure|ed)?|status codes?|[45]xx|exceptions?|went wrong"
                     rf"|(?:{_CODES})|{_HTTP_WORD}\s+[45]\d\d|[45]\d\d\s+{_HTTP_WORD})\b", re.I)
# text in double quotes is a value the user gives (a name, a comment), not what they ask about
_QUOTED = re.compile(r'"[^"]*"|\u201c[^\u201d]*\u201d')
_SCHEMA = re.compile(r"\b(fields?|schemas?|models?|propert(y|ies)|attributes?|structure|shape|definitions?|json format)\b", re.I)
_ACTION = re.compile(r"\b(how (do|can|to)|create|add|delete|remove|update|list|get|fetch|find|search|send|call|endpoint)\b", re.I)

TYPES_FOR_INTENT = {
    Intent.ENDPOINT: ["endpoint"],
    Intent.SCHEMA: ["component"],
    Intent.ERRORS: ["errors"],
}


def classify(query: str) -> Intent:
    query = _QUOTED.sub(" ", query)
    if _ERRORS.search(query):
        return Intent.ERRORS
    if _SCHEMA.search(query) and not _ACTION.search(query):
        return Intent.SCHEMA
    return Intent.ENDPOINT
