"""``specrag bench``: build time, embedding throughput, warm query latency and serving memory.

The build runs here, by default into a fresh temporary folder so build time and chunks/s are
real; serving runs in a child process (``pipeline.bench_serve``) so its peak RSS excludes the
build. The child also times a plain LlamaIndex ``VectorStoreIndex`` top-k over the same chunks,
side by side with our offline pipeline, so the ratio compares like with like.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from pydantic import BaseModel, Field

from pipeline.bench_serve import BASELINE_TOP_K, STAGES, ServeRequest, ServeResult, peak_rss_mb
from pipeline.errors import SpecragError
from pipeline.settings import Settings

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_QUERIES = REPO_ROOT / "evals" / "sets" / "demo.jsonl"
TARGET_P95_MS, TARGET_BUILD_S = 100.0, 15 * 60.0


class BenchError(SpecragError, ValueError):
    """No queries to time, or the serving child process failed (the message ends with its stderr)."""


class Latency(BaseModel):
    p50: float
    p95: float
    mean: float = 0.0
    max: float = 0.0
    n: int = Field(0, description="timed calls")

    @classmethod
    def of(cls, values: list[float]) -> "Latency":
        if not values:
            return cls(p50=0.0, p95=0.0)
        arr = np.asarray(values, dtype=float)
        return cls(p50=round(float(np.percentile(arr, 50)), 2), p95=round(float(np.percentile(arr, 95)), 2),
                   mean=round(float(arr.mean()), 2), max=round(float(arr.max()), 2), n=len(values))


class Machine(BaseModel):
    cpus: int
    python: str
    platform: str

    @classmethod
    def here(cls) -> "Machine":
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 0
        return cls(cpus=cpus, python=platform.python_version(), platform=platform.platform())


class BenchReport(BaseModel):
    corpus: list[str]
    apis: int
    chunks: int
    fresh_build: bool = Field(description="built into an empty temporary folder (else incremental on the corpus index)")
    ingest_seconds: float
    index_build_seconds: float = Field(description="IndexBuilder.build: embedding, Chroma, BM25")
    chunks_embedded: int
    embed_seconds: float
    embed_chunks_per_s: float
    search_mode: str
    embed_model: str
    queries: int
    repeats: int
    latency_ms: dict[str, Latency] = Field(description="'wall' (perf_counter around retrieve_context) and each stage")
    peak_rss_mb_serving: float = Field(description="peak RSS of the serving process (engine + queries + baseline)")
    rss_mb_engine_open: float = Field(description="peak RSS of the serving process before the first query")
    peak_rss_mb_build: float = Field(description="peak RSS of the process that ingested and built")
    baseline: str = f"LlamaIndex VectorStoreIndex.as_retriever(similarity_top_k={BASELINE_TOP_K})"
    baseline_latency_ms: Latency | None = None
    baseline_unavailable: str = Field("", description="why the baseline did not run ('' when it ran)")
    ratio_p50: float | None = Field(None, description="our wall p50 / baseline p50")
    ratio_p95: float | None = None
    machine: Machine
    kept_dir: str = Field("", description="the fresh build's folder, when kept (--keep)")


def run_bench(settings: Settings, corpus: list[Path], queries: list[str], *, fresh: bool = True,
              repeats: int = 1, progress: bool = True, keep: bool = False, warmup: bool = True) -> BenchReport:
    """Build (fresh or incremental), then serve ``queries`` warm in a child process and report."""
    from pipeline.index.embeddings import NO_EMBEDDINGS
    from pipeline.workspace import update_index

    if not queries:
        raise BenchError("no queries to time: pass --queries SET.jsonl with at least one line")
    # The benchmark measures the offline pipeline: never call an LLM, even when one is configured.
    # Folders are made absolute: the serving child runs in another working folder.
    settings = settings.model_copy(update={
        "openai_api_key": None, "llm_base_url": None, "data_dir": settings.data_dir.resolve(),
        "catalog_dir": settings.catalog_dir.resolve() if settings.catalog_dir else None})
    tmp, kept = None, ""
    if fresh:  # a fresh build goes in a temporary folder inside the data dir (--data-dir), removed after
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix="bench-", dir=settings.data_dir))
        settings = settings.model_copy(update={"data_dir": tmp, "catalog_dir": None, "chroma_host": None})
    try:
        local, run = update_index(settings, corpus, progress=progress)
        if tmp is not None and keep:
            kept = str(local.data_dir)
        served = _serve(local, queries, repeats, warmup, progress)
    finally:
        if tmp is not None and not keep:
            shutil.rmtree(tmp, ignore_errors=True)
    index = run.index
    ours, base = Latency.of(served.wall_ms), Latency.of(served.baseline_ms) if served.baseline_ms else None
    latency = {"wall": ours} | {s: Latency.of(v) for s, v in served.stage_ms.items()}
    n_apis = sum(len(index[k]) for k in ("apis_added", "apis_updated", "apis_unchanged", "apis_repaired"))
    return BenchReport(
        corpus=[str(p) for p in corpus], apis=n_apis, chunks=_chunk_count(run.ingest.chunks), fresh_build=fresh,
        ingest_seconds=round(run.ingest.seconds, 2), index_build_seconds=round(index["seconds"], 2),
        chunks_embedded=index["chunks_embedded"], embed_seconds=round(index["embed_seconds"], 2),
        embed_chunks_per_s=round(index["chunks_per_s"], 1), search_mode=served.search_mode,
        embed_model=NO_EMBEDDINGS if local.embed_model.lower() == NO_EMBEDDINGS else local.embed_model,
        queries=len(queries), repeats=repeats, latency_ms=latency, peak_rss_mb_serving=served.peak_rss_mb,
        rss_mb_engine_open=served.rss_open_mb, peak_rss_mb_build=peak_rss_mb(),
        baseline_latency_ms=base, baseline_unavailable=served.baseline_unavailable,
        ratio_p50=_ratio(ours.p50, base.p50 if base else 0), ratio_p95=_ratio(ours.p95, base.p95 if base else 0),
        machine=Machine.here(), kept_dir=kept)


def _serve(settings: Settings, queries: list[str], repeats: int, warmup: bool, progress: bool = False) -> ServeResult:
    request = ServeRequest(settings=settings.model_dump(mode="json"), queries=queries, repeats=repeats, warmup=warmup)
    env = os.environ | {"PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, "-m", "pipeline.bench_serve"], input=request.model_dump_json(),
                          capture_output=True, text=True, cwd=REPO_ROOT, env=env)
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    if proc.returncode != 0 or not lines:
        raise BenchError(f"the serving process failed (exit {proc.returncode}): {proc.stderr[-2000:].strip()}")
    if proc.stderr.strip():
        sys.stderr.write(proc.stderr)  # its warnings (e.g. a model that failed to load) still reach the user
    return ServeResult.model_validate_json(lines[-1])


def _chunk_count(by_type: dict[str, int]) -> int:
    return by_type.get("total", sum(v for k, v in by_type.items() if k != "total"))


def _ratio(ours: float, base: float) -> float | None:
    return round(ours / base, 2) if base > 0 else None


def _mark(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def format_bench(r: BenchReport) -> str:
    """The report as a table a person reads."""
    how = "fresh build in a temporary folder" if r.fresh_build else "incremental update of the corpus index (--reuse)"
    wall = r.latency_ms["wall"]
    if r.chunks_embedded:
        throughput = f"{r.embed_chunks_per_s:10,.1f} chunks/s  ({r.chunks_embedded:,} chunks in {r.embed_seconds:.1f} s)"
    elif r.search_mode == "lexical":
        throughput = "       n/a chunks/s  (lexical mode: nothing embedded)"
    else:
        throughput = "       n/a chunks/s  (nothing re-embedded: the index was up to date)"
    lines = [
        f"corpus: {', '.join(r.corpus)}  ({how})",
        f"machine: {r.machine.cpus} CPUs, Python {r.machine.python}, {r.machine.platform}",
        f"APIs: {r.apis:,}   chunks: {r.chunks:,}   search: {r.search_mode}   embeddings: {r.embed_model}",
        "",
        f"  ingest time               {r.ingest_seconds:10.1f} s",
        f"  index build time          {r.index_build_seconds:10.1f} s   target <= {TARGET_BUILD_S:.0f} s: "
        f"{_mark(r.index_build_seconds <= TARGET_BUILD_S)}",
        f"  embedding throughput      {throughput}",
        f"  peak RSS while serving    {r.peak_rss_mb_serving:10.1f} MB  (engine open: {r.rss_mb_engine_open:.1f} MB; "
        f"build process peak: {r.peak_rss_mb_build:.1f} MB)",
        *([f"  index kept in {r.kept_dir}"] if r.kept_dir else []),
        "",
        f"query latency, warm, offline pipeline ({r.queries} queries x {r.repeats} timed pass(es), after one untimed)",
        f"  {'stage':<10}{'p50 ms':>10}{'p95 ms':>10}{'mean ms':>10}{'max ms':>10}",
    ]
    for name in ("wall", *STAGES):
        lat = r.latency_ms.get(name)
        if lat is not None:
            lines.append(f"  {name:<10}{lat.p50:>10.2f}{lat.p95:>10.2f}{lat.mean:>10.2f}{lat.max:>10.2f}")
    lines.append(f"  target p95 <= {TARGET_P95_MS:.0f} ms: {_mark(wall.p95 <= TARGET_P95_MS)}")
    lines += ["", f"baseline, same process, same chunks: {r.baseline}"]
    if r.baseline_latency_ms is None:
        lines.append(f"  not run: {r.baseline_unavailable or 'no timings'}")
    else:
        b = r.baseline_latency_ms
        lines.append(f"  {'baseline':<10}{b.p50:>10.2f}{b.p95:>10.2f}{b.mean:>10.2f}{b.max:>10.2f}")
        lines.append(f"  ratio ours/baseline: p50 {r.ratio_p50}x   p95 {r.ratio_p95}x")
    return "\n".join(lines)


def add_bench_parser(sub: argparse._SubParsersAction, common) -> None:
    p = sub.add_parser("bench", help="time the build and warm queries; compare with a plain VectorStoreIndex")
    p.add_argument("--corpus", nargs="+", type=Path, required=True, help="spec files or folders to index")
    p.add_argument("--queries", nargs="+", type=Path, default=[DEFAULT_QUERIES], help="query sets (JSONL)")
    p.add_argument("--reuse", action="store_true", help="update the corpus's own index instead of a fresh build")
    p.add_argument("--keep", action="store_true", help="keep the fresh build's temporary folder")
    p.add_argument("--repeats", type=int, default=1, help="timed passes over the queries (default 1)")
    common(p)
    p.set_defaults(handler=cmd_bench)


def cmd_bench(args: argparse.Namespace, settings: Settings) -> int:
    from evals.querysets import load_query_sets

    from pipeline.cli.output import print_json, show_progress

    if args.repeats < 1:
        raise BenchError("--repeats must be at least 1")
    queries = [q.query for q in load_query_sets(args.queries)]
    report = run_bench(settings, args.corpus, queries, fresh=not args.reuse, repeats=args.repeats,
                       progress=show_progress(args), keep=args.keep)
    if args.json:
        print_json(report, indent=2)
    else:
        print(format_bench(report))
    return 0
