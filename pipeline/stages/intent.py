"""Query analysis: is the question about an endpoint, a schema, or errors? And which HTTP
methods does its verb ask for?

The first answer becomes a ``type`` filter for stage 3, which the retriever drops again when it
leaves fewer than 3 results. The second is a soft prior (:mod:`specrag.stages.method_prior`):
"create", "rename", "remove" are what HTTP's methods mean (RFC 9110), in any domain.
"""

from __future__ import annotations

import re
from enum import Enum

from specrag.stages.names import without_names


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


# the first verb in the question that changes something, as itself or its -ing form
# ("creating a user"). Not its -s form, as often a plural noun ("posts", "changes"), nor its -ed
# form, which mostly tells a state ("my saved tracks", "an updated list"). A question that only
# asks or reads says nothing: APIs answer questions with POST too (a lookup, a conversion, a
# generated image); a prior for GET there measured lower (README, "Measured")
_CHANGES = [
    (frozenset({"POST", "PUT"}), "create creating add adding post posting submit submitting upload uploading "
                                 "register registering insert inserting send sending"),
    (frozenset({"PUT", "PATCH", "POST"}), "update updating change changing rename renaming edit editing modify "
                                          "modifying set replace replacing save saving"),  # "setting": a noun too
    (frozenset({"DELETE"}), "delete deleting remove removing cancel canceling cancelling unsubscribe unsubscribing "
                            "erase erasing"),
]
_CHANGE_FORMS = {form: methods for methods, forms in _CHANGES for form in forms.split()}
_WORD = re.compile(r"[a-z]+")


def expected_methods(question: str) -> frozenset[str] | None:
    """The HTTP methods the question's verb that changes something asks for, None when it has
    none. Names and quoted values are not read ("rename it to 'Updated Sales'" asks for no update)."""
    return next((_CHANGE_FORMS[word] for word in _WORD.findall(without_names(question).lower())
                 if word in _CHANGE_FORMS), None)
