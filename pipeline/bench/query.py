"""``specrag bench``'s runs: build time, embedding throughput, re-index after one spec changed,
warm query latency, serving memory and disk (the command itself: ``specrag.cli.bench``).

The build runs here, by default on a private copy of the corpus into a fresh temporary folder,
so build time and chunks/s are real and one spec can be edited; the re-index
(``specrag.bench.reindex``) and serving (``specrag.bench.serve``) run in child processes so
their peak RSS is their own. Serving runs twice: our pipeline alone (latency, memory), then
interleaved per query with a plain LlamaIndex ``VectorStoreIndex`` top-k over the same Chroma
collection, so the ratio compares like with like. ``--scaling`` repeats it at several fleet
sizes (``scaling.py``).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import nullcontext
from importlib.util import find_spec
from pathlib import Path

from specrag.bench.fleet import copy_corpus, disk_mb, edit_one_spec
from specrag.bench.reindex import ReindexRequest, ReindexResult
from specrag.bench.report import (
    BenchReport,
    Machine,
    Reindex,
    chunk_count,
    ratio,
)
from specrag.bench.serve import ServeRequest, ServeResult
from specrag.catalog.io import load_catalog
from specrag.core.errors import SpecragError
from specrag.core.latency import Latency
from specrag.core.memory import TreeMemory, peak_rss_mb
from specrag.core.settings import Settings
from specrag.index.embeddings import NO_EMBEDDINGS
from specrag.index.workspace import update_index

# the demo set shipped in the package; found without importing specrag.evals (it loads the engine's records)
DEFAULT_QUERIES = Path(find_spec("specrag.evals").submodule_search_locations[0]) / "sets" / "demo.jsonl"


class BenchError(SpecragError, ValueError):
    """No queries to time, or the serving child process failed (the message ends with its stderr)."""


def run_bench(settings: Settings, corpus: list[Path], queries: list[str], *, fresh: bool = True,
              repeats: int = 1, progress: bool = True, keep: bool = False, warmup: bool = True,
              reindex: bool = True, baseline: bool = True, copy: bool = True) -> BenchReport:
    """Build (fresh or incremental), re-index after editing one spec (fresh builds only), then
    serve ``queries`` warm in child processes and report. ``copy=False``: ``corpus`` is already a
    private copy that may be edited."""
    if not queries:
        raise BenchError("no queries to time: pass --queries SET.jsonl with at least one line")
    # The benchmark measures the offline pipeline: never call an LLM, even when one is configured.
    # Folders are made absolute: the serving child runs in another working folder.
    settings = settings.model_copy(update={
        "openai_api_key": None, "llm_base_url": None, "data_dir": settings.storage.data_dir.resolve(),
        "catalog_dir": settings.storage.catalog_dir.resolve() if settings.storage.catalog_dir else None})
    tmp, kept, paths = None, "", corpus
    if fresh:  # a fresh build goes in a temporary folder inside the data dir (--data-dir), removed after
        settings.storage.data_dir.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix="bench-", dir=settings.storage.data_dir))
        settings = settings.model_copy(update={"data_dir": tmp / "data", "catalog_dir": None, "chroma_host": None})
        paths = copy_corpus(corpus, tmp / "corpus") if reindex and copy else corpus
    try:
        local, run = update_index(settings, paths, progress=progress)
        build_rss, disk = peak_rss_mb(), disk_mb(local.storage.data_dir)
        if tmp is not None and keep:
            kept = str(local.storage.data_dir)
        edit, why = (_reindex(settings, local, paths), "") if fresh and reindex else \
            (None, "--reuse: the corpus is not edited" if not fresh else "not requested")
        served = _serve(local, queries, repeats, warmup, baseline=False)
        compared = _serve(local, queries, repeats, warmup, baseline=True) if baseline else None
    finally:
        if tmp is not None and not keep:
            shutil.rmtree(tmp, ignore_errors=True)
    return _report(settings, corpus, fresh, repeats, queries, run, served, compared, edit, why, build_rss, disk, kept)


def _report(settings, corpus, fresh, repeats, queries, run, served, compared, edit, why, build_rss, disk,
            kept) -> BenchReport:
    index = run.index
    ours = Latency.of(served.wall_ms)
    latency = {"wall": ours} | {s: Latency.of(v) for s, v in served.stage_ms.items()}
    base = Latency.of(compared.baseline_ms) if compared and compared.baseline_ms else None
    paired = Latency.of(compared.wall_ms) if compared else ours
    n_apis = sum(len(index[k]) for k in ("apis_added", "apis_updated", "apis_unchanged", "apis_repaired"))
    chunks = chunk_count(run.ingest.chunks)
    build_s = run.ingest.seconds + index["seconds"]
    return BenchReport(
        corpus=[str(p) for p in corpus], apis=n_apis, chunks=chunks, fresh_build=fresh,
        ingest_seconds=round(run.ingest.seconds, 2), index_build_seconds=round(index["seconds"], 2),
        chunks_embedded=index["chunks_embedded"], chunks_reused=index.get("chunks_reused", 0),
        build_chunks_per_s=round(chunks / build_s, 1) if build_s else 0.0, embed_seconds=round(index["embed_seconds"], 2),
        embed_chunks_per_s=round(index["chunks_per_s"], 1), search_mode=served.search_mode,
        embed_model=NO_EMBEDDINGS if settings.embeddings.embed_model.lower() == NO_EMBEDDINGS else settings.embeddings.embed_model,
        queries=len(queries), repeats=repeats, latency_ms=latency, peak_rss_mb_serving=served.peak_rss_mb,
        rss_mb_engine_open=served.rss_open_mb, peak_rss_mb_with_baseline=compared.peak_rss_mb if compared else None,
        peak_rss_mb_build=build_rss, reindex=edit, reindex_unavailable=why, disk_mb=disk,
        baseline_latency_ms=base, paired_latency_ms=paired if compared else None, baseline_unavailable=(compared.baseline_unavailable if compared else "not requested"),
        ratio_p50=ratio(paired.p50, base.p50 if base else 0), ratio_p95=ratio(paired.p95, base.p95 if base else 0),
        machine=Machine.here(), kept_dir=kept)


def _reindex(settings: Settings, local: Settings, paths: list[Path]) -> Reindex:
    """Edit one spec of the (private) corpus, then time `update_index` in a child process."""
    spec = edit_one_spec(paths, load_catalog(local.catalogs_path).ids())
    request = ReindexRequest(settings=settings.model_dump(mode="json"), paths=[str(p) for p in paths])
    started = time.perf_counter()
    line, tree_peak_mb = _child("specrag.bench.reindex", request.model_dump_json(), measure_tree=True)
    result = ReindexResult.model_validate_json(line)
    return Reindex(**result.model_dump(), spec=str(spec), wall_seconds=round(time.perf_counter() - started, 2),
                   tree_peak_mb=tree_peak_mb)


def _serve(settings: Settings, queries: list[str], repeats: int, warmup: bool, baseline: bool = True) -> ServeResult:
    request = ServeRequest(settings=settings.model_dump(mode="json"), queries=queries, repeats=repeats,
                           warmup=warmup, baseline=baseline)
    return ServeResult.model_validate_json(_child("specrag.bench.serve", request.model_dump_json())[0])


def _child(module: str, stdin: str, measure_tree: bool = False) -> tuple[str, float | None]:
    """Run ``python -m module`` with ``stdin``: (the last line of its stdout, and with
    ``measure_tree`` the peak memory of its process tree, else None)."""
    proc = subprocess.Popen([sys.executable, "-m", module], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    with TreeMemory(proc.pid) if measure_tree else nullcontext() as memory:
        try:
            stdout, stderr = proc.communicate(stdin)
        except BaseException:  # interrupted: the child does not outlive the bench (as subprocess.run)
            proc.kill()
            proc.wait()
            raise
    lines = [line for line in stdout.splitlines() if line.strip()]
    if proc.returncode != 0 or not lines:
        what = "serving" if module.endswith("serve") else "re-index"
        raise BenchError(f"the {what} process failed (exit {proc.returncode}): {stderr[-2000:].strip()}")
    if stderr.strip():
        sys.stderr.write(stderr)  # its warnings (e.g. a model that failed to load) still reach the user
    return lines[-1], memory.peak_mb if memory is not None else None

