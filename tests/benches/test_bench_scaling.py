"""``specrag bench --scaling`` on the demo corpus (lexical, so it is quick): a sample point, and a
fleet doubled by renamed copies whose counts are exactly twice the originals'."""

from __future__ import annotations

from pathlib import Path

import pytest
from specrag.bench.fleet import sample, spec_files, write_fleet
from specrag.bench.query import run_bench
from specrag.bench.scaling import format_scaling, plot_scaling, run_scaling
from specrag.core.errors import SpecragError
from specrag.core.settings import Settings
from specrag.specs.ingest import ingest_paths

DEMO = [Path(__file__).resolve().parents[2] / "examples" / "specs"]


def test_copies_are_renamed_apis(tmp_path):
    specs = spec_files(DEMO)
    assert [s.entry.stem for s in specs] == ["petstore_v2", "users_api"]
    assert [s.entry.stem for s in sample(specs, 1)] == ["petstore_v2"]
    folders = write_fleet(specs, tmp_path, copies=3)
    ingested = ingest_paths(folders, progress=False)
    ids = sorted(a.api.file_id for a in ingested.apis)
    assert ids == sorted(f"{stem}{suffix}" for stem in ("petstore_v2", "users_api") for suffix in ("", "__x1", "__x2"))
    original = ingest_paths(DEMO, progress=False).report.chunks["total"]
    assert ingested.report.chunks["total"] == 3 * original and not ingested.report.specs_skipped


def test_scaling_table(tmp_path):
    settings = Settings(data_dir=tmp_path / "data", embed_model="none", chroma_host=None)
    points = run_scaling(settings, DEMO, ["How do I create a user?", "list pets"], ["1", "2x"], run_bench=run_bench, progress=False)
    assert [(p.label, p.specs) for p in points] == [("1", 1), ("2x", 4)]
    one, double = points
    full = ingest_paths(DEMO, progress=False).report.chunks["total"]
    assert double.chunks == 2 * full and 0 < one.chunks < full
    for p in points:
        assert p.build_seconds > 0 and p.reindex_seconds > 0 and p.p95_ms >= p.p50_ms > 0 and p.disk_mb > 0
    text = format_scaling(points)
    assert text.splitlines()[0].split()[:3] == ["fleet", "specs", "chunks"] and "2x" in text
    note = plot_scaling(points, tmp_path / "curve.png")
    assert (tmp_path / "curve.png").is_file() if note.startswith("plot written") else "matplotlib" in note
    with pytest.raises(SpecragError, match="'lots'"):
        run_scaling(settings, DEMO, ["q"], ["lots"], run_bench=run_bench, progress=False)
