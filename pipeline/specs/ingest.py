"""Ingest a corpus: discover specs, chunk each (in worker processes), and report what happened.

Every spec file is hostile input. One bad file never stops the batch: it is skipped with a
one-line reason, a spec that runs past ``SPECRAG_SPEC_TIMEOUT_S`` is skipped as timed out (its
worker replaced), and reports carry file names that always serialise.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from pathlib import Path
from typing import Callable, Iterator, NamedTuple

from pydantic import BaseModel, Field
from specrag.core import caches
from specrag.core.errors import EmptyCorpusError, SpecError
from specrag.core.tokens import SegmentTokenCounter, count_tokens
from specrag.specs.chunker import SpecChunker
from specrag.specs.closure import closure_fit, operation_closures
from specrag.specs.files import decode_text, is_text, read_regular_file, safe_text
from specrag.specs.limits import SpecLimits
from specrag.specs.loader import (
    SPEC_SUFFIXES,
    SpecSource,
    any_spec_file,
    check_spec,
    confine_entry,
    discover_spec_files,
    looks_like_spec,
)
from specrag.specs.models import ApiChunks, IngestReport, SkippedSpec
from specrag.specs.pool import JobFailed, run_jobs
from specrag.specs.sources import ApiSummary
from tqdm import tqdm

# One per process: each worker's specs share lines (a vendor's specs most), counted once.
_count_rendered_tokens = caches.register(SegmentTokenCounter(), name=f"{__name__}._count_rendered_tokens")


class CorpusIngest(BaseModel):
    apis: list[ApiChunks] = Field(default_factory=list)
    report: IngestReport = Field(default_factory=IngestReport)


def ingest_spec(path: Path, file_id: str, max_tokens: int, explicit: bool = True,
                limits: SpecLimits | None = None) -> ApiChunks | SkippedSpec | None:
    """Chunk one entry file. None: a file found in a folder that is no spec (not reported)."""
    limits = limits or SpecLimits.from_settings()
    try:
        _, real = confine_entry(path)  # before anything is read
        raw = read_regular_file(real, limits.max_bytes)
        text = decode_text(raw)
        if not explicit and not looks_like_spec(path, text):
            return None
        source = SpecSource(path, limits, raw=raw, text=text)
        if not explicit and isinstance(source.doc, dict) and not ("openapi" in source.doc or "swagger" in source.doc):
            return None  # a fragment of a multi-file spec, read when a spec references it
        check_spec(source.doc)
        if ":" in file_id:
            raise SpecError(f"file_id {file_id!r} contains ':' (reserved in chunk ids); rename the file")
        if not is_text(file_id):
            raise SpecError("file name is not valid UTF-8 (chunk ids must be text); rename the file")
        return SpecChunker(source, file_id, max_tokens, _count_rendered_tokens).run()
    except SpecError as exc:
        return SkippedSpec(file=str(path), reason=str(exc))
    except OSError as exc:
        return SkippedSpec(file=str(path), reason=f"unreadable: {exc.strerror or exc}")
    except RecursionError:
        return SkippedSpec(file=str(path), reason="structure nested too deeply")
    except MemoryError:
        return SkippedSpec(file=str(path), reason="out of memory while reading")
    except Exception as exc:  # noqa: BLE001 - one broken spec must not stop the corpus
        return SkippedSpec(file=str(path), reason=f"internal error: {type(exc).__name__}: {' '.join(str(exc).split())[:160]}")


class UnfinishedSpec(SkippedSpec):
    """A spec whose worker gave no result (time limit, crash): not a verdict on the file, so
    change detection reads it again next run."""


class SpecJob(NamedTuple):
    path: Path
    file_id: str
    max_tokens: int
    explicit: bool
    limits: SpecLimits


def _job(job: SpecJob) -> ApiChunks | SkippedSpec | None:
    return ingest_spec(*job)


def plan_jobs(paths: list[Path], max_tokens: int, limits: SpecLimits, sort: bool = True) -> list[SpecJob]:
    """One job per candidate file, big specs first (``by_size``); CorpusError for a missing path.
    ``sort=False``: in the order found, for a caller that learns the sizes anyway (one stat a file)."""
    explicit, found = discover_spec_files(paths)
    jobs = [SpecJob(p, p.stem, max_tokens, True, limits) for p in explicit]
    jobs += [SpecJob(p, p.stem, max_tokens, False, limits) for p in found]
    return by_size(jobs, lambda j: _size(j.path)) if sort else jobs


def by_size(jobs: list[SpecJob], size_of: Callable[[SpecJob], int]) -> list[SpecJob]:
    """Big specs first (better load balance), then by path: the order jobs run and are admitted in."""
    return sorted(jobs, key=lambda j: (-size_of(j), str(j.path)))


def require_spec_files(paths: list[Path]) -> None:
    """CorpusError for a missing path, EmptyCorpusError when no file under ``paths`` can be a spec:
    checked before a corpus folder is made or a model loaded, so a wrong path costs nothing and
    leaves nothing behind."""
    if not any_spec_file(paths):
        raise no_usable_spec(paths)


def no_usable_spec(paths: list[Path], skipped: list[SkippedSpec] = (), files_read: bool = False) -> EmptyCorpusError:
    """The one-line error for a corpus without a usable spec: what was found instead, what to pass."""
    suffixes = ", ".join(sorted(SPEC_SUFFIXES))
    if skipped:
        why = f"{skipped[0].file}: {skipped[0].reason}" + (f"; {len(skipped) - 1} more skipped" if len(skipped) > 1 else "")
    elif files_read:
        why = f"its {suffixes} files are not OpenAPI/Swagger documents"
    else:
        why = f"no {suffixes} file there"
    where = ", ".join(safe_text(str(p)) for p in paths)
    return EmptyCorpusError(f"no readable OpenAPI/Swagger spec in {where} ({why}): pass the spec files, "
                            "or folders that hold them")


def iter_ingest(jobs: list[SpecJob], workers: int | None = None,
                meanwhile: Callable[[], None] | None = None) -> Iterator[tuple[Path, ApiChunks | SkippedSpec | None]]:
    """Yield (file, result) in job order; every job runs in a worker process under its time limit.

    The parent loads the tokenizer (~0.3 s) before the workers fork, so they share it; with work
    of its own to do while they read (``meanwhile``, see ``run_jobs``), each worker loads it instead,
    on its own core (a one-spec re-index: the worker's whole read hides behind the parent's work)."""
    workers = workers or min(os.cpu_count() or 1, 4)
    timeout = jobs[0].limits.timeout_s if jobs else 0.0
    if jobs and meanwhile is None:
        count_tokens("")
    for job, outcome in run_jobs(_job, jobs, workers, timeout, meanwhile):
        yield job.path, UnfinishedSpec(file=str(job.path), reason=str(outcome)) if isinstance(outcome, JobFailed) else outcome


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def ingest_paths(paths: list[Path], max_tokens: int = 1500, *, workers: int | None = None,
                 progress: bool = False, limits: SpecLimits | None = None,
                 on_api: Callable[[ApiChunks], None] | None = None) -> CorpusIngest:
    """Ingest every spec under ``paths``; CorpusError only for a missing input path.

    ``limits`` default to the ``SPECRAG_SPEC_*`` settings of the environment. ``on_api`` sees
    each API as it is admitted, while the workers read on (the parent is idle meanwhile)."""
    start = time.perf_counter()
    jobs = plan_jobs(paths, max_tokens, limits or SpecLimits.from_settings())
    result = CorpusIngest()
    seen: dict[str, str] = {}
    closures: list[tuple[int, int, int]] = []
    bar = tqdm(total=len(jobs), desc="ingest", unit="file", disable=not progress, leave=False)
    for path, outcome in iter_ingest(jobs, workers):
        bar.update()
        if outcome is None:
            continue
        if isinstance(outcome, SkippedSpec):
            result.report.specs_skipped.append(outcome)
            continue
        if admit(result.report, seen, path, outcome.api.file_id):
            result.apis.append(outcome)
            closures += operation_closures(outcome)  # a full read: every operation's closure
            if on_api is not None:
                on_api(outcome)
    bar.close()
    result.apis.sort(key=lambda a: a.api.file_id)
    result.report.specs_skipped.sort(key=lambda s: s.file)
    summarise(result.report, [ApiSummary.of(a) for a in result.apis])
    result.report.closure = closure_fit(closures)
    result.report.seconds = round(time.perf_counter() - start, 2)
    return result


def admit(report: IngestReport, seen: dict[str, str], path: Path, fid: str) -> bool:
    """The first spec of a file_id wins (big specs come first); the next is skipped with a reason."""
    if fid in seen:
        report.specs_skipped.append(SkippedSpec(
            file=str(path), reason=f"file_id {fid!r} already used by {seen[fid]}; rename one of the two files"))
        return False
    seen[fid] = str(path)
    return True


def summarise(report: IngestReport, apis: list[ApiSummary]) -> None:
    report.specs_read = len(apis)
    counts: Counter[str] = Counter()
    dropped: Counter[str] = Counter()
    for api in apis:
        counts.update(api.chunk_counts)
        dropped.update(api.dropped)
        report.refs.add(api.refs)
    report.chunks = {k: counts.get(k, 0) for k in ("endpoint", "component", "errors")} | {"total": sum(counts.values())}
    report.dropped = dict(sorted(dropped.items()))
