"""``specrag bench`` on the demo corpus with the real local ONNX model: counts, latency order,
the side-by-side baseline, serving memory, and lexical mode reporting why the baseline is absent."""

from __future__ import annotations

import argparse
import gc
import json
import sys
from pathlib import Path

import pytest
from specrag.bench.query import BenchError, _serve, run_bench
from specrag.bench.report import BenchReport, format_bench
from specrag.bench.serve import ServeRequest, serve
from specrag.cli.bench import add_parsers, cmd_bench
from specrag.core.settings import Settings
from specrag.evals.querysets import load_query_set
from specrag.index import embeddings
from specrag.index.workspace import corpus_settings, update_index
from specrag.specs.ingest import ingest_paths

REPO = Path(__file__).resolve().parents[2]
DEMO = [REPO / "examples" / "specs"]
MODEL_DIR = Path(__file__).resolve().parents[3] / "shared" / "models" / "all-MiniLM-L6-v2-onnx"
QUERIES = [q.query for q in load_query_set(REPO / "evals" / "sets" / "demo.jsonl")]


def _demo_counts() -> tuple[int, int]:
    apis = ingest_paths(DEMO, Settings().ingest.chunk_max_tokens, progress=False).apis
    return len(apis), sum(len(a.chunks) for a in apis)


@pytest.fixture(scope="module")
def hybrid(tmp_path_factory):
    if not (MODEL_DIR / "model.onnx").is_file():
        pytest.skip(f"local ONNX model folder {MODEL_DIR} is absent")
    data = tmp_path_factory.mktemp("bench")
    settings = Settings(data_dir=data, embed_model_path=MODEL_DIR, chroma_host=None)
    return data, run_bench(settings, DEMO, QUERIES, repeats=2, progress=False)


def test_counts_and_fresh_build(hybrid):
    data, report = hybrid
    n_apis, n_chunks = _demo_counts()
    assert (report.apis, report.chunks) == (n_apis, n_chunks)
    assert report.chunks_embedded + report.chunks_reused == n_chunks and report.chunks_embedded > 0
    assert report.fresh_build and report.search_mode == "hybrid"
    assert report.index_build_seconds > 0 and report.embed_chunks_per_s > 0 and report.ingest_seconds > 0
    assert report.queries == len(QUERIES) and report.repeats == 2
    assert list(data.iterdir()) == [], "the temporary build folder must be removed"


def test_reindex_after_one_edit_and_disk(hybrid):
    """One spec of the private copy is edited; the re-index runs in its own process and says what it redid."""
    _, report = hybrid
    edit = report.reindex
    assert edit is not None and report.reindex_unavailable == ""
    assert Path(edit.spec).stem in {"petstore_v2", "users_api"} and "examples" not in Path(edit.spec).parts[-3:-1]
    assert edit.apis_updated == [Path(edit.spec).stem] and edit.chunks_embedded >= 1 and edit.specs_parsed == 1
    assert edit.wall_seconds >= edit.update_seconds > 0 and edit.peak_rss_mb > 50
    if sys.platform.startswith("linux"):  # the run's processes together, each page once: what the report gives
        assert 50 < edit.tree_peak_mb == edit.memory_mb
    assert "edited by specrag bench" not in (REPO / "examples" / "specs" / Path(edit.spec).name).read_text()
    disk = report.disk_mb
    assert {"manifest.json", "chroma", "total"} <= set(disk) and disk["total"] > 0
    assert disk["total"] == pytest.approx(sum(v for k, v in disk.items() if k != "total"), abs=0.5)


def test_latency_is_ordered_per_stage(hybrid):
    _, report = hybrid
    assert set(report.latency_ms) == {"wall", "select", "expand", "search", "refs", "assemble", "total"}
    for name, lat in report.latency_ms.items():
        assert lat.n == 2 * len(QUERIES), name
        assert 0 <= lat.p50 <= lat.p95 <= lat.max, name
    wall, total = report.latency_ms["wall"], report.latency_ms["total"]
    assert wall.p50 > 0 and wall.p50 >= total.p50 * 0.9  # the wall clock wraps the engine's own total


def test_baseline_side_by_side_and_memory(hybrid):
    _, report = hybrid
    base = report.baseline_latency_ms
    assert base is not None and base.n == 2 * len(QUERIES) and base.p50 > 0
    assert report.baseline_unavailable == ""
    paired = report.paired_latency_ms
    assert paired is not None and paired.n == base.n
    assert report.ratio_p50 == pytest.approx(paired.p50 / base.p50, abs=0.01)
    assert report.ratio_p95 > 0
    assert report.peak_rss_mb_serving >= report.rss_mb_engine_open > 50
    assert report.peak_rss_mb_with_baseline >= report.rss_mb_engine_open
    assert report.machine.cpus >= 1 and report.machine.python


def test_format_names_every_required_number(hybrid):
    _, report = hybrid
    text = format_bench(report)
    for needle in ("ingest time", "embedding throughput", "chunks/s", "index build time", "p50", "p95",
                   "serving RSS", "VectorStoreIndex", "ratio ours/baseline", "fresh build", "cold build",
                   "re-index after one spec changed", "index on disk"):
        assert needle in text, needle
    assert f"{report.latency_ms['wall'].p95:.2f}" in text and f"{report.ratio_p50}x" in text


def _cli(argv: list[str]) -> argparse.Namespace:
    root = argparse.ArgumentParser()
    sub = root.add_subparsers(dest="command")
    add_parsers(sub)
    return root.parse_args(argv)


def test_cli_lexical_reuse_reports_baseline_unavailable(tmp_path, capsys):
    """Lexical mode (no embedding model): the baseline cannot run and says why; --reuse is incremental."""
    qset = tmp_path / "q.jsonl"
    qset.write_text(json.dumps({"id": "q1", "query": "How do I create a new user?", "apis": ["users_api"],
                                "endpoints": []}) + "\n")
    settings = Settings(data_dir=tmp_path / "data", embed_model="none", chroma_host=None)
    argv = ["bench", "--corpus", *map(str, DEMO), "--queries", str(qset), "--reuse", "--json"]
    reports = []
    for _ in range(2):
        assert cmd_bench(_cli(argv), settings) == 0
        reports.append(json.loads(capsys.readouterr().out))
    first, second = reports
    assert first["search_mode"] == "lexical" and first["baseline_latency_ms"] is None
    assert "lexical mode" in first["baseline_unavailable"] and first["ratio_p50"] is None
    assert not first["fresh_build"] and first["latency_ms"]["wall"]["n"] == 1
    assert (corpus_settings(settings, DEMO).storage.data_dir / "manifest.json").is_file()  # the corpus's own index
    assert second["chunks"] == first["chunks"] and second["chunks_embedded"] == 0
    text = format_bench(BenchReport.model_validate(second))
    assert "not run: lexical mode" in text and "--reuse" in text and "n/a chunks/s" in text


def test_no_queries_and_failed_child_are_errors(tmp_path):
    with pytest.raises(ValueError, match="no queries"):
        run_bench(Settings(data_dir=tmp_path), DEMO, [])
    with pytest.raises(BenchError, match="serving process failed"):
        _serve(Settings(data_dir=tmp_path / "nothing-built", embed_model="none"), ["find a user"], 1, True)


@pytest.mark.needs_embeddings
def test_every_timed_query_embeds_its_words_as_the_baseline_does(tmp_path, monkeypatch):
    """The warm-up pass must not leave our side a cached query embedding the baseline has to compute."""
    if not (MODEL_DIR / "model.onnx").is_file():
        pytest.skip(f"local ONNX model folder {MODEL_DIR} is absent")
    local, _ = update_index(Settings(data_dir=tmp_path, embed_model_path=MODEL_DIR, chroma_host=None), DEMO,
                            progress=False)
    embedded: list[str] = []
    real = embeddings.embed_queries
    monkeypatch.setattr("specrag.index.store.embed_queries", lambda model, qs: embedded.extend(qs) or real(model, qs))
    queries = QUERIES[:2]
    try:
        result = serve(ServeRequest(settings=local.model_dump(mode="json"), queries=queries, repeats=2, baseline=False))
    finally:
        gc.unfreeze()  # serve() froze this test process's objects, as its own child does: later tests meet none
    assert len(result.wall_ms) == 4
    assert sorted(embedded) == sorted(queries * 3)  # warm-up, then two timed passes: each call embeds once
