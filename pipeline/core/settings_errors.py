"""pydantic's ValidationError on Settings as one line: the variable, the value, what it accepts.

``SPECRAG_LLM_TIMEOUT_S='abc': expected a number > 0 and <= 600``. The allowed values come from
each field's own type and constraints, so the message cannot drift from the check.
"""

from __future__ import annotations

import types
import typing
from pathlib import Path
from typing import Any

import annotated_types as at
from pydantic import AliasChoices, BaseModel, ValidationError
from pydantic.fields import FieldInfo
from specrag.core.errors import SettingsError

_KINDS = {int: "an integer", float: "a number", str: "text", Path: "a path",
          bool: "true or false (also 1/0, yes/no, on/off)"}
_BOUNDS = ((at.Gt, "gt", ">"), (at.Ge, "ge", ">="), (at.Lt, "lt", "<"), (at.Le, "le", "<="))


def env_names(name: str, field: FieldInfo) -> str:
    """The env var(s) a field is read from (``A/B`` when it has two), or the field name when none."""
    alias = field.validation_alias
    return "/".join(map(str, alias.choices)) if isinstance(alias, AliasChoices) else name.upper()


def allowed(field: FieldInfo) -> str:
    """What a field accepts, in words: kind, then bounds (``an integer >= 1 and <= 65535``)."""
    extra = _extra(field)
    if "allowed" in extra:
        return str(extra["allowed"])
    args = [a for a in typing.get_args(field.annotation) if a is not type(None)]
    kind = args[0] if isinstance(field.annotation, types.UnionType) and args else field.annotation
    words = [_KINDS.get(kind, "a value")]
    bounds = [f"{sign} {getattr(m, attr)}" for m in field.metadata for cls, attr, sign in _BOUNDS if isinstance(m, cls)]
    if bounds:
        words.append(" and ".join(bounds))
    if any(isinstance(m, at.MinLen) and m.min_length > 0 for m in field.metadata):
        words.append("(not empty)")
    return " ".join(words)


def describe_validation_error(exc: ValidationError, cls: type) -> SettingsError:
    """One line for every bad value: ``VAR='value': expected ...``, joined by ``; ``."""
    parts = []
    for error in exc.errors():
        found = _field_at(cls, error["loc"])
        if found is None:  # a check across fields: its message says everything
            parts.append(error["msg"].removeprefix("Value error, "))
            continue
        key, name, field = found
        var = f"{name} ({env_names(name, field)})" if key == name else env_names(name, field)
        parts.append(f"{var}={_shown(field, error.get('input'))}: expected {allowed(field)}")
    return SettingsError("invalid setting: " + "; ".join(parts))


def _field_at(cls: type, loc: tuple[int | str, ...]) -> tuple[str, str, FieldInfo] | None:
    """(key as given, field name, field) of the setting an error's location points at, through the
    sections (``('retrieval', 'RETRIEVAL_RRF_K')``); None for a model or section as a whole."""
    model = cls
    for depth, part in enumerate(loc):
        key = str(part)
        name, field = next(((n, f) for n, f in model.model_fields.items() if key == n or key in _aliases(f)),
                           (None, None))
        if field is None:
            return None
        inner = field.annotation
        if isinstance(inner, type) and issubclass(inner, BaseModel):  # a section: go in
            model = inner
            continue
        return key, name, field
    return None


def _aliases(field: FieldInfo) -> tuple[str, ...]:
    alias = field.validation_alias
    return tuple(map(str, alias.choices)) if isinstance(alias, AliasChoices) else ()


def _shown(field: FieldInfo, value: Any) -> str:
    if _extra(field).get("secret"):  # never echo a key into a terminal or a log
        return "'***'"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "...'"


def _extra(field: FieldInfo) -> dict[str, Any]:
    """The field's ``json_schema_extra`` markers: ``allowed`` (words), ``secret`` (never shown)."""
    return field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
