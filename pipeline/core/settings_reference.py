"""The settings reference of docs/configuration.md, written from the sections of :class:`Settings`.

One table per section (a :class:`~specrag.core.settings.Section` held by ``Settings``, headed by
its title, in the order ``Settings`` holds them), one row per field: its environment
variable(s), name, type, default, allowed values (its own bounds, ``min_length``, pattern, or the
``allowed`` words of ``json_schema_extra``) and description. A field added to a section is in
the reference with nothing else to edit.

``python -m specrag.core.settings_reference`` prints the markdown; ``--write [FILE]`` puts it
between the markers of ``docs/configuration.md`` (or FILE), leaving the prose around them alone.
``tests/test_settings_reference.py`` fails while the file is stale.
"""

from __future__ import annotations

import argparse
import json
import sys
import types
import typing
from pathlib import Path
from typing import Any

import annotated_types as at
from pydantic import AliasChoices, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined
from specrag.core.settings import Section, Settings

BEGIN = "<!-- BEGIN GENERATED: settings -->"
END = "<!-- END GENERATED -->"
DOC = Path("docs/configuration.md")
COMMAND = "python -m specrag.core.settings_reference --write"

_TYPES = {int: "integer", float: "number", bool: "switch", str: "text", Path: "path", SecretStr: "text (secret)"}
_BOUNDS = ((at.Gt, "gt", ">"), (at.Ge, "ge", ">="), (at.Lt, "lt", "<"), (at.Le, "le", "<="))


def env_names(name: str, field: FieldInfo) -> list[str]:
    """Every environment variable the field is read from, the first one first."""
    alias = field.validation_alias
    return [str(c) for c in alias.choices] if isinstance(alias, AliasChoices) else [name.upper()]


def sections(cls: type[Settings] = Settings) -> dict[str, tuple[str, type[Section]]]:
    """Section title -> (its attribute on Settings, its model), in the order of the reference."""
    out: dict[str, tuple[str, type[Section]]] = {}
    for attribute, model in cls.sections().items():
        title = model.model_config.get("title") or attribute
        if title in out:
            raise ValueError(f"two settings sections are titled {title!r}: {out[title][1].__name__}, {model.__name__}")
        out[title] = (attribute, model)
    return out


def render(cls: type[Settings] = Settings) -> str:
    """The reference: one ``###`` heading, a line naming the section in code, and a table per section
    (without the markers)."""
    out: list[str] = []
    for title, (attribute, model) in sections(cls).items():
        out += [f"### {title}", "", f"In code: `settings.{attribute}` (`{model.__name__}`).", "",
                "| variable | field | type | default | allowed | meaning |", "| --- | --- | --- | --- | --- | --- |"]
        for name, field in model.model_fields.items():
            kind = _type(field.annotation)
            if _extra(field).get("secret") and "secret" not in kind:
                kind = kind.replace("text", "text (secret)", 1)
            cells = [", ".join(f"`{e}`" for e in env_names(name, field)), f"`{name}`", kind,
                     _default(field), _allowed(field), " ".join((field.description or "").split())]
            out.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        out.append("")
    return "\n".join(out)


def splice(text: str, generated: str) -> str:
    """``text`` with what lies between the markers replaced by ``generated``."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"no {BEGIN} ... {END} markers")
    return text[: start + len(BEGIN)] + "\n" + generated + text[end:]


def generated_part(text: str) -> str:
    """What lies between the markers of ``text`` now."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"no {BEGIN} ... {END} markers")
    return text[start + len(BEGIN) + 1: end]


def _type(annotation: Any) -> str:
    args = typing.get_args(annotation)
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        kinds = [_type(a) for a in args if a is not type(None)]
        return " or ".join(kinds) + (" or unset" if type(None) in args else "")
    if typing.get_origin(annotation) is tuple:
        inner = {_type(a) for a in args}
        return f"list of {len(args)} {inner.pop()}s" if len(inner) == 1 else "list"
    if typing.get_origin(annotation) is typing.Annotated:
        return _type(args[0])
    return _TYPES.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _default(field: FieldInfo) -> str:
    value = field.default
    if value is PydanticUndefined or value is None:
        return "unset"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        return _number(value)
    if isinstance(value, tuple):
        return "`" + json.dumps([float(v) if isinstance(v, float) else v for v in value]) + "`"
    return f"`{value}`"


def _extra(field: FieldInfo) -> dict[str, Any]:
    return field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}


def _allowed(field: FieldInfo) -> str:
    extra = _extra(field)
    if "allowed" in extra:
        return str(extra["allowed"])
    bounds = {attr: getattr(m, attr) for m in field.metadata for cls, attr, _ in _BOUNDS if isinstance(m, cls)}
    parts = []
    if set(bounds) == {"ge", "le"}:
        parts.append(f"{_number(bounds['ge'])}-{_number(bounds['le'])}")
    else:
        parts += [f"{sign} {_number(bounds[attr])}" for _, attr, sign in _BOUNDS if attr in bounds]
    if any(isinstance(m, at.MinLen) and m.min_length > 0 for m in field.metadata):
        parts.append("not empty")
    pattern = next((m.pattern for m in field.metadata if getattr(m, "pattern", None)), None)
    if pattern:
        parts.append(f"matches `{pattern}`")
    if field.annotation is bool:
        parts.append("true/false")
    return ", ".join(parts) or "any"


def _number(value: float) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m specrag.core.settings_reference", description=__doc__.split("\n")[0])
    parser.add_argument("--write", nargs="?", const=DOC, type=Path, metavar="FILE",
                        help=f"replace the generated part of FILE (default {DOC}) instead of printing it")
    args = parser.parse_args(argv)
    generated = render()
    if args.write is None:
        sys.stdout.write(generated)
        return 0
    text = args.write.read_text(encoding="utf-8")
    new = splice(text, generated)
    if new != text:
        args.write.write_text(new, encoding="utf-8")
    print(f"{args.write}: {'updated' if new != text else 'up to date'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
