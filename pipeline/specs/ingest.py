"""Ingest a corpus: discover specs, chunk each (in parallel), and report what happened.

One bad file never stops the batch: it is skipped with a one-line reason.
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
from pipeline.specs.chunker import SpecChunker
from pipeline.specs.loader import SpecSource, check_spec, discover_spec_files, looks_like_spec
from pipeline.specs.models import ApiChunks, IngestReport, SkippedSpec
from pipeline.specs.sources import ApiSummary

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
        if admit(result.report, seen, path, outcome.api.file_id):
            result.apis.append(outcome)
    bar.close()
    result.apis.sort(key=lambda a: a.api.file_id)
    result.report.specs_skipped.sort(key=lambda s: s.file)
    summarise(result.report, [ApiSummary.of(a) for a in result.apis])
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
    for api in apis:
        counts.update(api.chunk_counts)
        report.refs.add(api.refs)
    report.chunks = {k: counts.get(k, 0) for k in ("endpoint", "component", "errors")} | {"total": sum(counts.values())}
