"""Query sets: JSONL, one query per line, in the format of ``../shared/evals/*.jsonl``.

``{"id", "query", "apis": [file_id], "endpoints": [{"api", "method", "path"}]}``; any other
field (``source``, notes) is allowed and ignored, so every set in that form can be run.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from specrag.core.errors import SpecragError

_PARAM_RE = re.compile(r"\{[^{}/]*\}")


class QuerySetError(SpecragError, ValueError):
    """A query-set file that cannot be read; the message names the file and line."""


class Endpoint(NamedTuple):
    """A normalised endpoint key: the unit gold endpoints and retrieved chunks are matched on."""

    api: str
    method: str
    path: str


def normalize_path(path: str) -> str:
    """``/users/{userId}/`` -> ``/users/{}``: parameter names and trailing slashes do not count."""
    path = _PARAM_RE.sub("{}", path.strip())
    return path.rstrip("/") or "/"


def endpoint_key(api: str, method: str, path: str) -> Endpoint:
    """Method case-insensitive; path equal as written or after :func:`normalize_path`."""
    return Endpoint(api, method.upper(), normalize_path(path))


class GoldEndpoint(BaseModel):
    model_config = ConfigDict(extra="ignore")

    api: str = Field(description="file_id of the API")
    method: str = Field(description="HTTP method, any case")
    path: str = Field(description="path template as in the spec")

    def key(self) -> Endpoint:
        return endpoint_key(self.api, self.method, self.path)


class EvalQuery(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str
    query: str
    apis: list[str] = Field(description="gold file_ids: the APIs that can answer the query")
    endpoints: list[GoldEndpoint] = Field(description="gold endpoints, every one needed for the answer")
    set_name: str = Field("", description="the set it came from (file stem); not read from the line")

    def gold_keys(self) -> set[Endpoint]:
        return {e.key() for e in self.endpoints}


def load_query_set(path: Path) -> list[EvalQuery]:
    """Read one JSONL set; blank lines are skipped, any bad line raises :class:`QuerySetError`."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise QuerySetError(f"{path}: cannot read query set ({exc.strerror or exc})") from exc
    queries: list[EvalQuery] = []
    for lineno, line in enumerate(lines, start=1):
        if line.strip():
            queries.append(_parse_line(path, lineno, line))
    return queries


def _parse_line(path: Path, lineno: int, line: str) -> EvalQuery:
    where = f"{path}:{lineno}"
    try:
        raw = json.loads(line)
    except json.JSONDecodeError as exc:
        raise QuerySetError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from exc
    if not isinstance(raw, dict):
        raise QuerySetError(f"{where}: want a JSON object per line, got {type(raw).__name__}")
    raw.pop("set_name", None)
    try:
        return EvalQuery.model_validate({**raw, "set_name": path.stem})
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise QuerySetError(f"{where}: bad query ({problems})") from exc


def load_query_sets(paths: list[Path]) -> list[EvalQuery]:
    """Load several sets in order; a query id may repeat across sets but not within one."""
    queries: list[EvalQuery] = []
    for path in paths:
        seen: set[str] = set()
        for query in load_query_set(Path(path)):
            if query.id in seen:
                raise QuerySetError(f"{path}: query id {query.id!r} appears twice")
            seen.add(query.id)
            queries.append(query)
    return queries
