"""An operation's signature: the one-paragraph form of an operation chunk that tells a reader the
call exists and what it needs (method, path, operationId, summary, parameters, the schemas it
sends and returns), in a few dozen tokens instead of the hundreds its full text and closure take.
Built from the chunk's own fields, so it needs no re-index.
"""

from __future__ import annotations

from specrag.core.ids import split_chunk_id, unescape_id_token
from specrag.specs.models import Chunk

MAX_PARAMS = 8
MAX_SCHEMAS = 6
SUMMARY_CHARS = 120


def operation_signature(chunk: Chunk) -> str:
    """``METHOD path (operationId) — summary`` then the parameters and the components it uses, one
    line each; "" for a chunk that is no operation."""
    if not chunk.method or not chunk.path:
        return ""
    head = f"{chunk.method} {chunk.path}"
    if chunk.operation_id:
        head += f"  ({chunk.operation_id})"
    summary = " ".join(chunk.summary.split())
    if summary:
        head += f" — {summary[:SUMMARY_CHARS]}{'…' if len(summary) > SUMMARY_CHARS else ''}"
    lines = [f"# {head} [signature]"]
    if chunk.params:
        shown = [f"{p.name} ({p.location}{', required' if p.required else ''})" for p in chunk.params[:MAX_PARAMS]]
        more = len(chunk.params) - MAX_PARAMS
        lines.append("params: " + ", ".join(shown) + (f", +{more} more" if more > 0 else ""))
    schemas = _schema_names(chunk)
    if schemas:
        lines.append("uses: " + ", ".join(schemas))
    return "\n".join(lines)


def _schema_names(chunk: Chunk) -> list[str]:
    """The components the operation references, by their last path segment, in spec order."""
    names: list[str] = []
    for ref in chunk.ref_ids:
        try:
            _, element = split_chunk_id(ref)
        except ValueError:
            continue
        if element.startswith("paths/"):  # its own errors chunk, not a schema
            continue
        name = unescape_id_token(element.rsplit("/", 1)[-1])
        if name and name not in names:
            names.append(name)
    return names[:MAX_SCHEMAS] + ([f"+{len(names) - MAX_SCHEMAS} more"] if len(names) > MAX_SCHEMAS else [])
