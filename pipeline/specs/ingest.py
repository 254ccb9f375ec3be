"""Ingest a corpus: discover specs, chunk each (in parallel), and report what happened.

One bad file never stops the batch: it is skipped with a one-line reason. ``ingest_changed``
reads only the files whose recorded state (sources.py) no longer matches.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Callable, Iterator

from pydantic import BaseModel, Field
from tqdm import tqdm

from pipeline.errors import SpecError
from pipeline.specs.chunker import CHUNKER_VERSION, SpecChunker
from pipeline.specs.loader import SpecSource, check_spec, discover_spec_files, looks_like_spec
from pipeline.specs.models import ApiChunks, IngestReport, SkippedSpec
from pipeline.specs.sources import ApiSummary, FileStamp, SourceRecord, SourceState, Stamper

_COUNT: Callable[[str], int] | None = None


def count_tokens(text: str) -> int:
    """cl100k token count through llama-index's bundled BPE file (no download)."""
    global _COUNT
    if _COUNT is None:
        from llama_index.core.utils import get_tokenizer

        encode = get_tokenizer()
        _COUNT = lambda s: len(encode(s))  # noqa: E731
    return _COUNT(text)


class CorpusIngest(BaseModel):
    apis: list[ApiChunks] = Field(default_factory=list)
    report: IngestReport = Field(default_factory=IngestReport)


def ingest_spec(path: Path, file_id: str, max_tokens: int, explicit: bool = True) -> ApiChunks | SkippedSpec | None:
    """Chunk one entry file. None: a file found in a folder that is no spec (not reported)."""
    try:
        raw = path.read_bytes()
        if not explicit and not looks_like_spec(path, raw):
            return None
        source = SpecSource(path, raw)
        if not explicit and isinstance(source.doc, dict) and not ("openapi" in source.doc or "swagger" in source.doc):
            return None  # a fragment of a multi-file spec, read when a spec references it
        check_spec(source.doc)
        if ":" in file_id:
            raise SpecError(f"file_id {file_id!r} contains ':' (reserved in chunk ids); rename the file")
        return SpecChunker(source, file_id, max_tokens, count_tokens).run()
    except SpecError as exc:
        return SkippedSpec(file=str(path), reason=str(exc))
    except OSError as exc:
        return SkippedSpec(file=str(path), reason=f"unreadable: {exc.strerror or exc}")
    except RecursionError:
        return SkippedSpec(file=str(path), reason="structure nested too deeply")
    except Exception as exc:  # noqa: BLE001 - one broken spec must not stop the corpus
        return SkippedSpec(file=str(path), reason=f"internal error: {type(exc).__name__}: {' '.join(str(exc).split())[:160]}")


def _job(args: tuple[Path, str, int, bool]) -> ApiChunks | SkippedSpec | None:
    return ingest_spec(*args)


def plan_jobs(paths: list[Path], max_tokens: int) -> list[tuple[Path, str, int, bool]]:
    """One job per candidate file, big specs first (better load balance); CorpusError for a missing path."""
    explicit, found = discover_spec_files(paths)
    jobs = [(p, p.stem, max_tokens, True) for p in explicit] + [(p, p.stem, max_tokens, False) for p in found]
    jobs.sort(key=lambda j: (-_size(j[0]), str(j[0])))
    return jobs


def iter_ingest(jobs: list[tuple[Path, str, int, bool]], workers: int | None = None) -> Iterator[tuple[Path, ApiChunks | SkippedSpec | None]]:
    """Yield (file, result) in job order."""
    workers = workers or min(os.cpu_count() or 1, 4)
    if workers <= 1 or len(jobs) < 4:
        for job in jobs:
            yield job[0], _job(job)
        return
    with ProcessPoolExecutor(max_workers=workers) as pool:
        yield from zip((j[0] for j in jobs), pool.map(_job, jobs, chunksize=4))


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def ingest_paths(paths: list[Path], max_tokens: int = 1500, *, workers: int | None = None,
                 progress: bool = False) -> CorpusIngest:
    """Ingest every spec under ``paths``; CorpusError only for a missing input path."""
    start = time.perf_counter()
    jobs = plan_jobs(paths, max_tokens)
    result = CorpusIngest()
    seen: dict[str, str] = {}
    bar = tqdm(total=len(jobs), desc="ingest", unit="file", disable=not progress, leave=False)
    for path, outcome in iter_ingest(jobs, workers):
        bar.update()
        if outcome is None:
            continue
        if isinstance(outcome, SkippedSpec):
            result.report.specs_skipped.append(outcome)
            continue
        if _admit(result.report, seen, path, outcome.api.file_id):
            result.apis.append(outcome)
    bar.close()
    result.apis.sort(key=lambda a: a.api.file_id)
    result.report.specs_skipped.sort(key=lambda s: s.file)
    _summarise(result.report, [ApiSummary.of(a) for a in result.apis])
    result.report.seconds = round(time.perf_counter() - start, 2)
    return result


def _admit(report: IngestReport, seen: dict[str, str], path: Path, fid: str) -> bool:
    """The first spec of a file_id wins (big specs come first); the next is skipped with a reason."""
    if fid in seen:
        report.specs_skipped.append(SkippedSpec(
            file=str(path), reason=f"file_id {fid!r} already used by {seen[fid]}; rename one of the two files"))
        return False
    seen[fid] = str(path)
    return True


def _summarise(report: IngestReport, apis: list[ApiSummary]) -> None:
    report.specs_read = len(apis)
    counts: Counter[str] = Counter()
    for api in apis:
        counts.update(api.chunk_counts)
        report.refs.add(api.refs)
    report.chunks = {k: counts.get(k, 0) for k in ("endpoint", "component", "errors")} | {"total": sum(counts.values())}


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
        elif isinstance(outcome, ApiChunks) and _admit(result.report, seen, job[0], outcome.api.file_id):
            result.apis.append(outcome)
        elif isinstance(outcome, ApiSummary) and _admit(result.report, seen, job[0], outcome.info.file_id):
            result.kept.append(outcome)
    result.apis.sort(key=lambda a: a.api.file_id)
    result.kept.sort(key=lambda a: a.info.file_id)
    result.report.specs_skipped.sort(key=lambda s: s.file)
    _summarise(result.report, sorted([ApiSummary.of(a) for a in result.apis] + result.kept, key=lambda a: a.info.file_id))
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
