"""The compact rendering of a component: every property name and type, one line each, without
long prose. A referenced schema is read to build a call, and its YAML (examples, xml hints, full
descriptions) is two to four times longer than what that needs; the compact form lets an
operation's whole reference closure fit the context budget. Primaries keep their full text.
What a caller needs to fill a value stays: enum values, a short scalar ``example`` or ``default``,
and a description's first sentence cut after its example ("alpha-2 code, e.g. DE"), not at the
abbreviation that introduces it.
"""

from __future__ import annotations

import re
from typing import Any

from specrag.specs.render import strip_markdown

MAX_NESTING = 8  # inline objects deeper than this are named, not expanded
MAX_ENUM = 8
NOTE_CHARS = 60
EXAMPLE_CHARS = 40  # a note's example ("e.g. DE") past NOTE_CHARS, a scalar example or default this long at most
# a sentence ends at . ! ? and a space, unless the word before is an abbreviation ("e.g.", "i.e.",
# "etc.") or one letter ("U.S.")
_SENTENCE_END = re.compile(r"(?<!\be\.g)(?<!\bi\.e)(?<!\beg)(?<!\bie)(?<!\betc)(?<!\bvs)(?<!\bcf)(?<!\bex)"
                           r"(?<!\bincl)(?<!\bapprox)(?<!\bno)(?<!\b[A-Za-z])[.!?]\s", re.IGNORECASE)
_EXAMPLE_CUE = re.compile(r"\b(?:e\.g\.|eg\.|for example|for instance|such as|like|ex\.|example:)\s*", re.IGNORECASE)
_SCHEMA_KINDS = {"schemas", "definitions"}


def compact_component(kind: str, name: str, where: str, value: Any) -> str:
    """A component as compact text; "" when the compact form would not be shorter in kind
    (not a schema-like value)."""
    if not isinstance(value, dict):
        return ""
    lines = [f"# {kind} {name} ({where}) [compact]"]
    if kind in _SCHEMA_KINDS:
        _schema(lines, name, value, 0, set())
    elif kind == "parameters":
        _parameter(lines, value)
    elif kind in {"responses", "requestBodies"}:
        _message(lines, value)
    else:
        return ""
    return "\n".join(lines)


def _parameter(lines: list[str], param: dict) -> None:
    schema = param.get("schema") if isinstance(param.get("schema"), dict) else param
    flag = " required" if param.get("required") else ""
    lines.append(f"{param.get('name', '?')} in {param.get('in', '?')}: {_type(schema)}{flag}{_note(param)}")
    _children(lines, schema, 1, set())


def _message(lines: list[str], message: dict) -> None:
    note = _note(message)
    if note:
        lines.append(note.removeprefix(" — "))
    content = message.get("content") if isinstance(message.get("content"), dict) else {}
    for media, body in list(content.items())[:4]:
        schema = body.get("schema") if isinstance(body, dict) else None
        if isinstance(schema, dict):
            lines.append(f"{media}: {_type(schema)}")
            _children(lines, schema, 1, set())
    if isinstance(message.get("schema"), dict):  # Swagger 2 response
        lines.append(f"body: {_type(message['schema'])}")
        _children(lines, message["schema"], 1, set())
    headers = message.get("headers") if isinstance(message.get("headers"), dict) else {}
    for header, spec in headers.items():
        lines.append(f"header {header}: {_type(spec.get('schema', spec) if isinstance(spec, dict) else {})}")


def _schema(lines: list[str], name: str, schema: dict, depth: int, seen: set[int]) -> None:
    lines.append(f"{name}: {_type(schema)}{_note(schema)}")  # required-ness is on each property
    _children(lines, schema, depth + 1, seen)


def _children(lines: list[str], schema: dict, depth: int, seen: set[int]) -> None:
    """Properties, array items, compositions and additionalProperties of an inline schema."""
    if id(schema) in seen or depth > MAX_NESTING:
        return
    seen = seen | {id(schema)}
    pad = "  " * depth
    props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    required = set(str(r) for r in schema.get("required", []) if isinstance(r, (str, int))) \
        if isinstance(schema.get("required"), list) else set()
    for prop, sub in props.items():
        sub = sub if isinstance(sub, dict) else {}
        flag = " required" if str(prop) in required else ""
        lines.append(f"{pad}- {prop}: {_type(sub)}{flag}{_note(sub)}")
        _children(lines, sub, depth + 1, seen)
    items = schema.get("items")
    if isinstance(items, dict) and not props and _inline_object(items):
        _children(lines, items, depth, seen)
    for key in ("allOf", "oneOf", "anyOf"):
        members = schema.get(key) if isinstance(schema.get(key), list) else []
        for i, member in enumerate(m for m in members if isinstance(m, dict)):
            if _inline_object(member):
                lines.append(f"{pad}{key}[{i}]:")
                _children(lines, member, depth + 1, seen)
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict) and extra:
        lines.append(f"{pad}- <any key>: {_type(extra)}")
        _children(lines, extra, depth + 1, seen)


def _inline_object(schema: dict) -> bool:
    return "$ref" not in schema and any(k in schema for k in ("properties", "allOf", "oneOf", "anyOf",
                                                                 "additionalProperties", "items"))


def _type(schema: Any) -> str:
    """A short type expression: string(date-time), array[Pet], Pet, one of [A, B], enum [...]."""
    if not isinstance(schema, dict):
        return "any"
    if isinstance(schema.get("$ref"), str):
        return schema["$ref"].rsplit("/", 1)[-1] or schema["$ref"]
    for key, word in (("allOf", "all of"), ("oneOf", "one of"), ("anyOf", "any of")):
        members = schema.get(key)
        if isinstance(members, list) and members:
            return f"{word} [{', '.join(_type(m) for m in members[:6])}]"
    kind = schema.get("type")
    kind = "|".join(str(k) for k in kind) if isinstance(kind, list) else str(kind or "")
    if kind == "array" or "items" in schema:
        return f"array[{_type(schema.get('items'))}]"
    text = kind or ("object" if "properties" in schema else "any")
    if isinstance(schema.get("format"), str):
        text += f"({schema['format']})"
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        shown = ", ".join(str(v) for v in enum[:MAX_ENUM]) + (", …" if len(enum) > MAX_ENUM else "")
        text += f" enum [{shown}]"
    if schema.get("nullable"):
        text += " nullable"
    return text


def _note(value: dict) -> str:
    text = value.get("description") or value.get("title") if isinstance(value, dict) else ""
    note = note_sentence(strip_markdown(text)) if isinstance(text, str) and text else ""
    shown = _shown_values(value, note) if isinstance(value, dict) else ""
    note = "; ".join(x for x in (note, shown) if x)
    return f" — {note}" if note else ""


def note_sentence(text: str) -> str:
    """The first sentence, at most NOTE_CHARS, but an example it gives ("e.g. DE") is kept whole
    (up to EXAMPLE_CHARS more) rather than cut off."""
    match = _SENTENCE_END.search(text)
    sentence = (text[: match.start() + 1] if match else text).strip()
    if len(sentence) <= NOTE_CHARS:
        return sentence
    cue = _EXAMPLE_CUE.search(sentence)
    if cue and cue.start() < NOTE_CHARS + EXAMPLE_CHARS and len(sentence) - cue.start() <= EXAMPLE_CHARS + 12:
        return sentence[: NOTE_CHARS + EXAMPLE_CHARS + 12]
    return sentence[:NOTE_CHARS]


def _shown_values(schema: dict, note: str) -> str:
    """A short scalar example and default, unless the note already says them."""
    shown = []
    for key, label in (("example", "example"), ("x-example", "example"), ("default", "default")):
        value = schema.get(key)
        if isinstance(value, bool):
            value = "true" if value else "false"
        if isinstance(value, (str, int, float)) and str(value).strip() and len(str(value)) <= EXAMPLE_CHARS \
                and str(value) not in note and not any(s.startswith(label) for s in shown):
            shown.append(f"{label} {' '.join(str(value).split())}")
    return ", ".join(shown)
