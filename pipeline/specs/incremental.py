"""Ingest only what changed: the jobs of ``ingest.plan_jobs`` whose files no longer match their
record in the previous ``SourceState`` (sources.py) are run; the others reuse the record."""

from __future__ import annotations

import time
from pathlib import Path

from pydantic import BaseModel, Field
from tqdm import tqdm

from pipeline.specs.chunker import CHUNKER_VERSION
from pipeline.specs.ingest import admit, iter_ingest, plan_jobs, summarise
from pipeline.specs.models import ApiChunks, IngestReport, SkippedSpec
from pipeline.specs.sources import ApiSummary, FileStamp, SourceRecord, SourceState, Stamper


class IncrementalIngest(BaseModel):
    apis: list[ApiChunks] = Field(default_factory=list, description="specs read in this run")
    kept: list[ApiSummary] = Field(default_factory=list, description="unchanged specs, not read: the index holds them")
    parsed: list[str] = Field(default_factory=list, description="files read in this run")
    report: IngestReport = Field(default_factory=IngestReport)
    state: SourceState


def ingest_changed(paths: list[Path], max_tokens: int, previous: SourceState | None, held: dict[str, str], *,
                   chunker_version: str = CHUNKER_VERSION, workers: int | None = None,
                   progress: bool = False) -> IncrementalIngest:
    """``ingest_paths`` that reads a file only when its record in ``previous`` no longer matches.

    ``held``: file_id -> content hash of the APIs the index holds; an unchanged spec whose API
    the index lacks is read again (its chunks are needed). Reports what a full ingest reports."""
    start = time.perf_counter()
    jobs = plan_jobs(paths, max_tokens)
    if previous is not None and (previous.chunker_version, previous.max_tokens) != (chunker_version, max_tokens):
        previous = None
    stamper = Stamper(previous)
    old = previous.records if previous is not None else {}
    keys = {j[0]: str(Path(j[0]).resolve()) for j in jobs}  # records outlive the working directory
    appeared = [Path(k) for k in keys.values() if k not in old] if old else []
    records: dict[str, SourceRecord] = {}
    todo = []
    for job in jobs:
        record = old.get(keys[job[0]])
        if record is not None and record.explicit == job[3]:
            record = _still_valid(record, stamper, held, appeared)
        if record is not None and record.explicit == job[3]:
            records[keys[job[0]]] = record
        else:
            todo.append(job)
    before = {keys[j[0]]: stamper.stamp(keys[j[0]]) for j in todo}  # stamped before reading
    outcomes: dict[str, ApiChunks | SkippedSpec | None] = {}
    bar = tqdm(total=len(todo), desc="ingest", unit="file", disable=not progress, leave=False)
    for (path, outcome), job in zip(iter_ingest(todo, workers), todo):
        bar.update()
        outcomes[keys[path]] = outcome
        if (record := _record(stamper, keys[path], before[keys[path]], job[3], outcome)) is not None:
            records[keys[path]] = record
    bar.close()
    result = IncrementalIngest(parsed=[str(j[0]) for j in todo], state=SourceState(
        chunker_version=chunker_version, max_tokens=max_tokens, checked_ns=stamper.started_ns, records=records))
    seen: dict[str, str] = {}
    for job in jobs:
        key = keys[job[0]]
        outcome = outcomes[key] if key in outcomes else (records[key].api or records[key].skipped)
        if isinstance(outcome, SkippedSpec):
            result.report.specs_skipped.append(outcome)
        elif isinstance(outcome, ApiChunks) and admit(result.report, seen, job[0], outcome.api.file_id):
            result.apis.append(outcome)
        elif isinstance(outcome, ApiSummary) and admit(result.report, seen, job[0], outcome.info.file_id):
            result.kept.append(outcome)
    result.apis.sort(key=lambda a: a.api.file_id)
    result.kept.sort(key=lambda a: a.info.file_id)
    result.report.specs_skipped.sort(key=lambda s: s.file)
    summarise(result.report, sorted([ApiSummary.of(a) for a in result.apis] + result.kept, key=lambda a: a.info.file_id))
    result.report.seconds = round(time.perf_counter() - start, 2)
    return result


def _still_valid(record: SourceRecord, stamper: Stamper, held: dict[str, str],
                 appeared: list[Path]) -> SourceRecord | None:
    """The record (stamps refreshed) when reading its file again would change nothing, else None."""
    record = stamper.unchanged(record)
    if record is None or record.outcome != "api":
        return record
    info = record.api.info
    if held.get(info.file_id) != info.content_hash:
        return None  # the index lacks this API (or another version of it): its chunks are needed
    if record.api.refs.unresolved_by_kind.get("missing_file"):  # a file it missed may have appeared
        root = Path(info.source).resolve().parent
        return None if any(root in p.parents for p in appeared) else record
    return record


def _record(stamper: Stamper, path: str, stamp: FileStamp | None, explicit: bool,
            outcome: ApiChunks | SkippedSpec | None) -> SourceRecord | None:
    if stamp is None:
        return None
    if isinstance(outcome, ApiChunks):
        stamps = stamper.stamps_after_read(path, stamp, outcome.api)
        return None if stamps is None else SourceRecord(explicit=explicit, outcome="api", stamps=stamps,
                                                        api=ApiSummary.of(outcome))
    if isinstance(outcome, SkippedSpec):
        return SourceRecord(explicit=explicit, outcome="skipped", stamps={path: stamp}, skipped=outcome)
    return SourceRecord(explicit=explicit, outcome="ignored", stamps={path: stamp})
