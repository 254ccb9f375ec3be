"""The bench's tables stay aligned whatever their values: a long re-index line or a big fleet
no longer pushes the next column out of line (one formatter, ``specrag.core.text_table``)."""

from __future__ import annotations

from specrag.bench.report import BenchReport, Latency, Machine, Reindex, format_bench
from specrag.bench.scaling import ScalePoint, format_scaling


def _report() -> BenchReport:
    lat = Latency(p50=12.3, p95=45.6, mean=20.1, max=1234.5, n=40)
    return BenchReport(
        corpus=["corpus"], apis=635, chunks=68_000, fresh_build=True, ingest_seconds=40.2, index_build_seconds=200.5,
        chunks_embedded=68_000, build_chunks_per_s=282.0, embed_seconds=180.0, embed_chunks_per_s=377.7,
        search_mode="hybrid", embed_model="all-MiniLM-L6-v2", queries=20, repeats=2,
        latency_ms={k: lat for k in ("wall", "select", "expand", "search", "refs", "assemble", "total")},
        peak_rss_mb_serving=420, rss_mb_engine_open=380, peak_rss_mb_with_baseline=600, peak_rss_mb_build=900,
        reindex=Reindex(spec="a-long-spec-name.json", wall_seconds=4.2, update_seconds=3.1, peak_rss_mb=450,
                        chunks_embedded=12, specs_parsed=1, apis_updated=["a"]),
        disk_mb={"chroma": 160, "local": 196, "catalogs": 85, "total": 441}, baseline_latency_ms=lat,
        paired_latency_ms=lat, ratio_p50=1.1, ratio_p95=1.3, machine=Machine(cpus=2, python="3.12", platform="Linux"))


def _block(text: str, first_word: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:1] == [first_word])
    end = next((i for i in range(start, len(lines)) if not lines[i].strip()), len(lines))
    return lines[start:end]


def test_the_targets_table_is_aligned_even_with_a_long_value():
    table = _block(format_bench(_report()), "measure")
    header = table[0]
    assert header.split() == ["measure", "value", "target", "met"] and len(table) == 7
    for column, first_cell in (("value", "4.2 s wall"), ("target", "<= 5 s, <= 600 MB")):
        reindex_row = next(line for line in table if "re-index after one spec changed" in line)
        assert reindex_row.index(first_cell) == header.index(column), column
    met = header.index("met")
    assert all(line[met:].strip() in ("ok", "MISSED") for line in table[1:])


def test_the_latency_table_holds_the_baseline_row_and_right_aligns_the_numbers():
    table = _block(format_bench(_report()), "stage")
    assert [line.split()[0] for line in table] == ["stage", "wall", "select", "expand", "search", "refs",
                                                   "assemble", "total", "baseline"]
    assert len({len(line) for line in table}) == 1  # every number ends under its header
    assert table[1].endswith("1234.50")


def test_the_scaling_table_is_aligned():
    points = [ScalePoint(label=label, specs=specs, chunks=chunks, embedded=chunks, build_seconds=1.5,
                         chunks_per_s=12_345.0, reindex_seconds=None if label == "4x" else 2.0, reindex_rss_mb=300.0,
                         p50_ms=3.0, p95_ms=9.0, serving_rss_mb=400.0, disk_mb=1200.0)
              for label, specs, chunks in (("100", 100, 9_000), ("all", 635, 68_000), ("4x", 2_540, 272_000))]
    lines = format_scaling(points).splitlines()
    assert lines[0].split()[:3] == ["fleet", "specs", "chunks"]
    assert len({len(line) for line in lines}) == 1 and "272,000" in lines[3] and " n/a " in lines[3]
