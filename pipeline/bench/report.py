"""The report of ``specrag bench``: its numbers (pydantic) and the tables a person reads."""

from __future__ import annotations

import os
import platform

from pydantic import BaseModel, Field
from specrag.bench.reindex import ReindexResult
from specrag.bench.serve import BASELINE_TOP_K, STAGES
from specrag.core.latency import Latency
from specrag.core.text_table import format_table

TARGET_P95_MS, TARGET_BUILD_S, TARGET_REINDEX_S = 50.0, 6 * 60.0, 5.0


class Machine(BaseModel):
    cpus: int
    python: str
    platform: str

    @classmethod
    def here(cls) -> "Machine":
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 0
        return cls(cpus=cpus, python=platform.python_version(), platform=platform.platform())


class Reindex(ReindexResult):
    spec: str = Field(description="the spec file edited before the re-index")
    wall_seconds: float = Field(description="the child process from start to exit, as a `specrag index` run")
    tree_peak_mb: float | None = Field(None, description="the most physical memory the run's processes held at once "
                                       "(summed Pss, polled every 50 ms: core.memory.TreeMemory); None off Linux")

    @property
    def memory_mb(self) -> float:
        """What the re-index costs the machine: ``tree_peak_mb``, else the sum of the two peaks."""
        return self.tree_peak_mb if self.tree_peak_mb is not None else self.peak_rss_mb


class BenchReport(BaseModel):
    corpus: list[str]
    apis: int
    chunks: int
    fresh_build: bool = Field(description="built into an empty temporary folder (else incremental on the corpus index)")
    ingest_seconds: float
    index_build_seconds: float = Field(description="IndexBuilder.build: embedding, Chroma, BM25")
    chunks_embedded: int
    chunks_reused: int = 0
    build_chunks_per_s: float = Field(0.0, description="chunks / (ingest + index build seconds)")
    embed_seconds: float
    embed_chunks_per_s: float
    search_mode: str
    embed_model: str
    queries: int
    repeats: int
    latency_ms: dict[str, Latency] = Field(description="'wall' (perf_counter around retrieve_context) and each stage")
    peak_rss_mb_serving: float = Field(description="peak RSS of the process serving our pipeline alone")
    rss_mb_engine_open: float = Field(description="peak RSS of the serving process before the first query")
    peak_rss_mb_with_baseline: float | None = Field(None, description="peak RSS of the process that also ran the baseline")
    peak_rss_mb_build: float = Field(description="peak RSS of the process that ingested and built")
    reindex: Reindex | None = None
    reindex_unavailable: str = Field("", description="why the re-index was not measured ('' when it was)")
    disk_mb: dict[str, float] = Field(default_factory=dict, description="index folder per top-level entry, and total")
    baseline: str = f"LlamaIndex VectorStoreIndex.as_retriever(similarity_top_k={BASELINE_TOP_K})"
    baseline_latency_ms: Latency | None = None
    paired_latency_ms: Latency | None = Field(None, description="our wall time in the process that ran the baseline")
    baseline_unavailable: str = Field("", description="why the baseline did not run ('' when it ran)")
    ratio_p50: float | None = Field(None, description="our wall p50 / baseline p50")
    ratio_p95: float | None = None
    machine: Machine
    kept_dir: str = Field("", description="the fresh build's folder, when kept (--keep)")


def chunk_count(by_type: dict[str, int]) -> int:
    return by_type.get("total", sum(v for k, v in by_type.items() if k != "total"))


def ratio(ours: float, base: float) -> float | None:
    return round(ours / base, 2) if base > 0 else None


def _mark(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def format_bench(r: BenchReport) -> str:
    """The report as tables a person reads: the targets first, then the detail."""
    how = "fresh build of a private copy in a temporary folder" if r.fresh_build else \
        "incremental update of the corpus index (--reuse)"
    wall = r.latency_ms["wall"]
    if r.chunks_embedded:
        throughput = f"{r.embed_chunks_per_s:,.1f} chunks/s ({r.chunks_embedded:,} texts in {r.embed_seconds:.1f} s" \
            f", {r.chunks_reused:,} chunks reused)"
    elif r.search_mode == "lexical":
        throughput = "n/a chunks/s (lexical mode: nothing embedded)"
    else:
        throughput = "n/a chunks/s (nothing re-embedded: the index was up to date)"
    if r.reindex is not None:
        x = r.reindex
        parsed = "" if x.specs_parsed is None else f", {x.specs_parsed} spec(s) parsed"
        reindex = (f"{x.wall_seconds:.1f} s wall, {x.memory_mb:.0f} MB peak (processes together; each one's peak RSS "
                   f"summed: {x.peak_rss_mb:.0f} MB; {x.update_seconds:.1f} s in update_index{parsed}, "
                   f"{x.chunks_embedded} embedded)")
        reindex_ok = _mark(x.wall_seconds <= TARGET_REINDEX_S and x.memory_mb <= 600)
    else:
        reindex, reindex_ok = f"not measured: {r.reindex_unavailable}", ""
    ratio = f"p50 {r.ratio_p50}x, p95 {r.ratio_p95}x" if r.ratio_p50 is not None else \
        f"n/a ({r.baseline_unavailable or 'no timings'})"
    disk = ", ".join(f"{k} {v:.0f}" for k, v in r.disk_mb.items() if k != "total")
    build_s = r.ingest_seconds + r.index_build_seconds
    rows = [
        ("cold build", f"{build_s:.1f} s ({r.build_chunks_per_s:,.0f} chunks/s overall)", f"<= {TARGET_BUILD_S:.0f} s",
         _mark(build_s <= TARGET_BUILD_S) if r.fresh_build else ""),
        ("re-index after one spec changed", reindex, f"<= {TARGET_REINDEX_S:.0f} s, <= 600 MB", reindex_ok),
        ("query p50 / p95 (wall)", f"{wall.p50:.1f} / {wall.p95:.1f} ms", f"p95 <= {TARGET_P95_MS:.0f} ms",
         _mark(wall.p95 <= TARGET_P95_MS)),
        ("ours / plain VectorStoreIndex", ratio, "<= 1.5x at p50", _mark((r.ratio_p50 or 99) <= 1.5) if r.ratio_p50 else ""),
        ("serving RSS", f"{r.peak_rss_mb_serving:.0f} MB (engine open {r.rss_mb_engine_open:.0f} MB)", "<= 500 MB",
         _mark(r.peak_rss_mb_serving <= 500)),
        ("index on disk", f"{r.disk_mb.get('total', 0):.0f} MB ({disk})", "<= 400 MB",
         _mark(r.disk_mb.get("total", 0) <= 400)),
    ]
    detail = [
        ("ingest time", f"{r.ingest_seconds:.1f} s"),
        ("index build time", f"{r.index_build_seconds:.1f} s"),
        ("embedding throughput", throughput),
        ("peak RSS", f"build process {r.peak_rss_mb_build:.0f} MB; serving with the baseline too "
                     f"{r.peak_rss_mb_with_baseline or 0:.0f} MB"),
        *([("re-index edited", r.reindex.spec)] if r.reindex else []),
        *([("index kept in", r.kept_dir)] if r.kept_dir else []),
    ]
    latency = [(name, *_latency_cells(r.latency_ms[name])) for name in ("wall", *STAGES) if name in r.latency_ms]
    if r.baseline_latency_ms is not None:
        latency.append(("baseline", *_latency_cells(r.baseline_latency_ms)))
    lines = [
        f"corpus: {', '.join(r.corpus)}  ({how})",
        f"machine: {r.machine.cpus} CPUs, Python {r.machine.python}, {r.machine.platform}",
        f"APIs: {r.apis:,}   chunks: {r.chunks:,}   search: {r.search_mode}   embeddings: {r.embed_model}",
        "",
        format_table(rows, ("measure", "value", "target", "met"), indent=2),
        "",
        format_table(detail, indent=2),
        "",
        f"query latency, warm, offline pipeline alone ({r.queries} queries x {r.repeats} timed pass(es), after one "
        "untimed)",
        format_table(latency, ("stage", "p50 ms", "p95 ms", "mean ms", "max ms"), right=(1, 2, 3, 4), indent=2),
        "",
        f"baseline, interleaved per query in a second serving process, same chunks: {r.baseline}",
    ]
    if r.baseline_latency_ms is None:
        lines.append(f"  not run: {r.baseline_unavailable or 'no timings'}")
    else:
        lines.append(f"  ratio ours/baseline (same process): p50 {r.ratio_p50}x   p95 {r.ratio_p95}x")
    return "\n".join(lines)


def _latency_cells(lat: Latency) -> tuple[str, str, str, str]:
    return f"{lat.p50:.2f}", f"{lat.p95:.2f}", f"{lat.mean:.2f}", f"{lat.max:.2f}"
