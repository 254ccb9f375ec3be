"""``specrag bench --scaling``: the same measures at several fleet sizes, so the cost curve shows.

Points are spec counts (an even sample over the file_id order), ``all``, and ``Nx``: every spec
N times, copies renamed (``<stem>__x<c>``) so each is its own API. Copies repeat their
originals' embed texts, which the build embeds once: the table shows how many texts were
embedded so that saving is visible rather than hidden in chunks/s.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Callable

from pydantic import BaseModel, Field
from specrag.bench.fleet import sample, spec_files, write_fleet
from specrag.bench.report import BenchReport
from specrag.core.errors import SpecragError
from specrag.core.settings import Settings
from specrag.core.text_table import format_table


class ScalePoint(BaseModel):
    label: str
    specs: int
    chunks: int
    embedded: int
    build_seconds: float
    chunks_per_s: float
    reindex_seconds: float | None
    reindex_rss_mb: float | None = Field(description="the re-index's processes together at their peak "
                                         "(Reindex.memory_mb)")
    reindex_rss_sum_mb: float | None = Field(None, description="each of the run's and its Chroma process's peak RSS, "
                                             "summed (the bench's re-index measure before 2026-11-28's stop 50)")
    p50_ms: float
    p95_ms: float
    serving_rss_mb: float
    disk_mb: float


def run_scaling(settings: Settings, corpus: list[Path], queries: list[str], sizes: list[str], *,
                run_bench: Callable[..., BenchReport], repeats: int = 1, progress: bool = True) -> list[ScalePoint]:
    """``run_bench``: specrag.bench.query's, passed in (``specrag bench --scaling`` calls this one)."""
    specs = spec_files(corpus)
    points = []
    for label in (s.strip() for s in sizes if s.strip()):
        chosen, copies = _parse(label, specs)
        tmp = Path(tempfile.mkdtemp(prefix=f"scale-{label}-"))
        try:
            folders = write_fleet(chosen, tmp / "corpus", copies)
            report = run_bench(settings, folders, queries, repeats=repeats, progress=progress, baseline=False,
                               copy=False)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        x = report.reindex
        points.append(ScalePoint(
            label=label, specs=report.apis, chunks=report.chunks, embedded=report.chunks_embedded,
            build_seconds=round(report.ingest_seconds + report.index_build_seconds, 2),
            chunks_per_s=report.build_chunks_per_s, reindex_seconds=x.wall_seconds if x else None,
            reindex_rss_mb=x.memory_mb if x else None, reindex_rss_sum_mb=x.peak_rss_mb if x else None,
            p50_ms=report.latency_ms["wall"].p50,
            p95_ms=report.latency_ms["wall"].p95, serving_rss_mb=report.peak_rss_mb_serving,
            disk_mb=report.disk_mb.get("total", 0.0)))
    return points


def _parse(label: str, specs: list) -> tuple[list, int]:
    if label == "all":
        return specs, 1
    if label.endswith("x") and label[:-1].isdigit() and int(label[:-1]) >= 1:
        return specs, int(label[:-1])
    if label.isdigit() and int(label) >= 1:
        return sample(specs, int(label)), 1
    raise SpecragError(f"--sizes: {label!r} is not a spec count, 'all' or 'Nx'")


def format_scaling(points: list[ScalePoint]) -> str:
    header = ("fleet", "specs", "chunks", "embedded", "build s", "chunks/s", "reindex s", "reindex MB", "p50 ms",
              "p95 ms", "RSS MB", "disk MB")
    rows = [(p.label, f"{p.specs:,}", f"{p.chunks:,}", f"{p.embedded:,}", f"{p.build_seconds:.1f}",
             f"{p.chunks_per_s:,.0f}", _num(p.reindex_seconds, 1), _num(p.reindex_rss_mb, 0), f"{p.p50_ms:.1f}",
             f"{p.p95_ms:.1f}", f"{p.serving_rss_mb:.0f}", f"{p.disk_mb:.0f}") for p in points]
    return format_table(rows, header, right=range(1, len(header)))


def _num(value: float | None, digits: int) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def plot_scaling(points: list[ScalePoint], path: Path) -> str:
    """A PNG of each measure against chunks; a one-line note of what was (not) written."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "no plot: matplotlib is not installed (pip install matplotlib)"
    measures = [("build_seconds", "build s"), ("reindex_seconds", "re-index s"), ("p95_ms", "p95 ms"),
                ("serving_rss_mb", "serving RSS MB"), ("disk_mb", "disk MB")]
    fig, axes = plt.subplots(1, len(measures), figsize=(4 * len(measures), 3.2))
    xs = [p.chunks for p in points]
    for ax, (field, title) in zip(axes, measures):
        ys = [getattr(p, field) or 0 for p in points]
        ax.plot(xs, ys, marker="o")
        for x, y, p in zip(xs, ys, points):
            ax.annotate(p.label, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
        ax.set_title(title)
        ax.set_xlabel("chunks")
    fig.tight_layout()
    fig.savefig(path)
    return f"plot written: {path}"
