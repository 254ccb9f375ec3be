"""The settings reference of docs/configuration.md, written from the fields of :class:`Settings`.

Each field's environment variable(s), name, type, default, allowed values (its own bounds,
``min_length``, pattern, or the ``allowed`` words of ``json_schema_extra``) and description,
one table per section. The sections are :data:`SECTIONS` below, a map from section to field
names (the step before nested settings): a field added to ``Settings`` goes in one of them, or
:func:`render` refuses.

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
from specrag.core.settings import Settings

BEGIN = "<!-- BEGIN GENERATED: settings -->"
END = "<!-- END GENERATED -->"
DOC = Path("docs/configuration.md")
COMMAND = "python -m specrag.core.settings_reference --write"

# section title -> its fields, in the order the reference lists them
SECTIONS: dict[str, tuple[str, ...]] = {
    "Storage": ("data_dir", "catalog_dir", "tenant", "index_lock_timeout_s", "chroma_host", "chroma_port",
                "collection", "chroma_sync_s", "chroma_timeout_s"),
    "Ingest limits": ("chunk_max_tokens", "spec_max_bytes", "spec_timeout_s", "spec_max_nodes", "spec_max_depth",
                      "spec_max_aliases"),
    "Spec URLs": ("remote_max_bytes", "remote_timeout_s", "remote_max_redirects", "remote_max_documents"),
    "Embeddings": ("embed_model", "embed_model_path", "embed_threads"),
    "Retrieval": ("max_primary_results", "max_total_chunks", "max_depth", "timeout_ms", "enable_query_analysis",
                  "rrf_k", "vector_weight", "bm25_weight", "fleet_weight", "api_decay", "api_order_margin",
                  "method_weight", "producer_steps", "log_retrieval_stats"),
    "Context": ("context_token_limit", "context_full_primaries", "context_signature_depth",
                "context_other_api_signatures", "prioritize_primary", "compact_references", "closure_first",
                "context_example_requests"),
    "API selection (stage 1)": ("max_selected_apis", "selection_keyword_max_apis", "selection_drop_off",
                                "selection_weights", "selection_centroid_weight", "selection_rrf_k",
                                "selection_evidence_depth"),
    "LLM": ("openai_api_key", "llm_base_url", "llm_model", "llm_timeout_s", "llm_max_attempts", "llm_deadline_s",
            "llm_cache_size", "llm_cache_ttl_s", "synthesize", "prompts_dir", "selection_prompt_token_budget",
            "expansion_prompt_token_budget"),
    "Serving": ("serve_host", "serve_port", "serve_threads", "serve_workers", "reload_interval_s",
                "shutdown_timeout_s", "api_keys_file", "api_keys", "otel_exporter"),
}

_TYPES = {int: "integer", float: "number", bool: "switch", str: "text", Path: "path", SecretStr: "text (secret)"}
_BOUNDS = ((at.Gt, "gt", ">"), (at.Ge, "ge", ">="), (at.Lt, "lt", "<"), (at.Le, "le", "<="))


def env_names(name: str, field: FieldInfo) -> list[str]:
    """Every environment variable the field is read from, the first one first."""
    alias = field.validation_alias
    return [str(c) for c in alias.choices] if isinstance(alias, AliasChoices) else [name.upper()]


def section_of(cls: type[Settings] = Settings) -> dict[str, str]:
    """Field name -> its section; a field in no section, or in two, or a name that is no field, is an error."""
    sections: dict[str, str] = {}
    for title, names in SECTIONS.items():
        for name in names:
            if name in sections:
                raise ValueError(f"settings field {name!r} is in two sections of {__name__}.SECTIONS")
            sections[name] = title
    if unknown := [n for n in sections if n not in cls.model_fields]:
        raise ValueError(f"{__name__}.SECTIONS names no such settings field: {', '.join(unknown)}")
    if missing := [n for n in cls.model_fields if n not in sections]:
        raise ValueError(f"settings field(s) in no section: {', '.join(missing)}: add each to "
                         f"{__name__}.SECTIONS (pipeline/core/settings_reference.py)")
    return sections


def render(cls: type[Settings] = Settings) -> str:
    """The reference: one ``###`` heading and table per section (without the markers)."""
    section_of(cls)
    out: list[str] = []
    for title, names in SECTIONS.items():
        out += [f"### {title}", "", "| variable | field | type | default | allowed | meaning |",
                "| --- | --- | --- | --- | --- | --- |"]
        for name in names:
            field = cls.model_fields[name]
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
