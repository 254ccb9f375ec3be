"""The load benchmark's hot re-index: in the middle of the run, one spec of the served corpus is
changed (a new word in one operation's summary) and ``specrag index`` re-indexes the corpus in
another process, as an operator would, while the clients keep sending requests. A probe asks for
the new word every ``PROBE_EVERY_S`` and reports when the answers first showed it, and whether
any answer after that still showed the old version.

It works on a copy of the corpus (``prepare``): the user's spec files are never edited.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import shutil
import sys
import time
from pathlib import Path

import yaml
from pydantic import BaseModel, Field
from specrag.core.ids import HTTP_METHODS

PROBE_EVERY_S = 0.2


class HotReindex(BaseModel):
    corpus: Path = Field(description="the served copy of the corpus")
    spec: Path = Field(description="the spec file (in the copy) to change")
    data_dir: Path
    at_s: float = Field(ge=0, description="seconds after the timed run starts (leave time for the index run: "
                                          "several seconds, more on a loaded machine)")
    marker: str = Field(default_factory=lambda: "hotswap" + secrets.token_hex(4))


class ReindexReport(BaseModel):
    spec: str
    operation: str = Field(description="the operation whose summary was changed")
    started_s: float = Field(description="when the spec was changed and `specrag index` started (from timing start)")
    indexed_s: float | None = Field(None, description="when `specrag index` finished")
    index_exit: int | None = None
    first_seen_s: float | None = Field(None, description="when an answer first showed the new version")
    seen_after_index_s: float | None = Field(None, description="first_seen_s - indexed_s: the swap's lag")
    probes: int = 0
    stale_after_seen: int = Field(0, description="answers after first_seen that showed the old version")
    probe_errors: int = 0


def prepare(corpus: Path, workdir: Path, spec_name: str | None) -> tuple[Path, Path]:
    """(the copy, the spec in it to change): ``spec_name``, else the smallest spec file."""
    copy = workdir / corpus.resolve().name
    shutil.copytree(corpus, copy)
    specs = sorted((p for p in copy.rglob("*") if p.suffix in {".json", ".yaml", ".yml"}), key=lambda p: p.stat().st_size)
    chosen = [p for p in specs if p.name == spec_name] if spec_name else specs[:1]
    if not chosen:
        raise ValueError(f"no spec {spec_name!r} in {corpus}" if spec_name else f"no spec file in {corpus}")
    return copy, chosen[0]


def change_spec(path: Path, marker: str) -> str:
    """Append ``marker`` to the first operation's summary; returns 'METHOD /path'."""
    text = path.read_text(encoding="utf-8")
    doc = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    for route, item in (doc.get("paths") or {}).items():
        for method, operation in (item or {}).items():
            if method in HTTP_METHODS and isinstance(operation, dict):
                operation["summary"] = f"{operation.get('summary', '')} {marker}".strip()
                path.write_text(json.dumps(doc, indent=1) if path.suffix == ".json"
                                else yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
                return f"{method.upper()} {route}"
    raise ValueError(f"{path} has no operation to change")


async def reindex(hot: HotReindex, report: ReindexReport, t0: float) -> None:
    await asyncio.sleep(max(0.0, t0 + hot.at_s - time.perf_counter()))
    report.operation = change_spec(hot.spec, hot.marker)
    report.started_s = round(time.perf_counter() - t0, 2)
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "specrag.cli", "index", str(hot.corpus),
                                                "--data-dir", str(hot.data_dir), stdout=asyncio.subprocess.DEVNULL,
                                                stderr=asyncio.subprocess.DEVNULL)
    report.index_exit = await proc.wait()
    report.indexed_s = round(time.perf_counter() - t0, 2)


async def probe(http, kb_id: str, hot: HotReindex, report: ReindexReport, t0: float, stop_at: float) -> None:
    """Keyword search for the marker: only the new version's chunk has it."""
    body = {"kb_id": kb_id, "query": hot.marker, "mode": "keyword", "similarity_threshold": 0, "top_k": 3}
    while time.perf_counter() < stop_at:
        try:
            r = await http.post("/api/v1/retrieve/basic", json=body)
            results = r.json()["results"] if r.status_code == 200 else []  # not r.text: it echoes the query
            new = any(hot.marker in item["text"] for item in results)
            report.probe_errors += r.status_code != 200
        except Exception:  # noqa: BLE001 - a failed probe is counted, never fatal
            new = False
            report.probe_errors += 1
        report.probes += 1
        if new and report.first_seen_s is None:
            report.first_seen_s = round(time.perf_counter() - t0, 2)
        elif not new and report.first_seen_s is not None:
            report.stale_after_seen += 1
        await asyncio.sleep(PROBE_EVERY_S)
    if report.first_seen_s is not None and report.indexed_s is not None:
        report.seen_after_index_s = round(report.first_seen_s - report.indexed_s, 2)
