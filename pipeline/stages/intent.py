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


_ERRORS = re.compile(r"\b(errors?|fail(s|ure|ed)?|status codes?|[45]\d\d|[45]xx|exceptions?|went wrong)\b", re.I)
_SCHEMA = re.compile(r"\b(fields?|schemas?|models?|propert(y|ies)|attributes?|structure|shape|definitions?|json format)\b", re.I)
_ACTION = re.compile(r"\b(how (do|can|to)|create|add|delete|remove|update|list|get|fetch|find|search|send|call|endpoint)\b", re.I)

TYPES_FOR_INTENT = {
    Intent.ENDPOINT: ["endpoint"],
    Intent.SCHEMA: ["component"],
    Intent.ERRORS: ["errors"],
}


def classify(query: str) -> Intent:
    if _ERRORS.search(query):
        return Intent.ERRORS
    if _SCHEMA.search(query) and not _ACTION.search(query):
        return Intent.SCHEMA
    return Intent.ENDPOINT
