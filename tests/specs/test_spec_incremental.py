"""Change detection keeps ingest's hostile-input rules: a FIFO is never opened blocking (not even
to stamp it), a spec that gave no verdict (worker died, time limit) is read again next run, and a
change of the parse bounds re-reads every spec."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

import pytest
from specrag.core import tokens
from specrag.specs import ingest
from specrag.specs.incremental import ingest_changed, real_paths

from .hostile import GOOD, DyingChunker, limits, spec


def _run(paths, previous=None, timeout_s=30, **bounds):
    """One run; the previous run's APIs count as held by the index (as after a build)."""
    held = {} if previous is None else {r.api.info.file_id: r.api.info.content_hash
                                        for r in previous.records.values() if r.api is not None}
    return ingest_changed(paths, 1500, previous, held, limits=limits(timeout_s=timeout_s, **bounds), workers=1)


def _names(run) -> list[str]:
    return sorted(Path(p).name for p in run.parsed)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
def test_a_fifo_is_skipped_every_run_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "pipe.yaml")
    (tmp_path / "good.yaml").write_text(GOOD)
    paths = [tmp_path / "pipe.yaml", tmp_path / "good.yaml"]
    first = _run(paths)
    second = _run(paths, first.state)
    for run in (first, second):
        assert [(Path(s.file).name, s.reason) for s in run.report.specs_skipped] == [
            ("pipe.yaml", "not a regular file: a FIFO")]
    assert _names(second) == ["pipe.yaml"]  # no stamp for a FIFO: looked at again (cheaply), never trusted
    assert [a.info.file_id for a in second.kept] == ["good"]


@pytest.mark.skipif(multiprocessing.get_start_method() != "fork",
                    reason="the dying chunker is patched in the parent and inherited by forked workers")
def test_a_spec_without_verdict_is_read_again(tmp_path, monkeypatch):
    (tmp_path / "crash.yaml").write_text(spec())
    (tmp_path / "good.yaml").write_text(GOOD)
    with monkeypatch.context() as patch:
        patch.setattr(ingest, "SpecChunker", DyingChunker)
        first = _run([tmp_path])
    assert [s.reason.split(" (")[0] for s in first.report.specs_skipped] == ["worker process died"]
    second = _run([tmp_path], first.state)
    assert _names(second) == ["crash.yaml"] and not second.report.specs_skipped
    assert [a.api.file_id for a in second.apis] == ["crash"] and [a.info.file_id for a in second.kept] == ["good"]


def test_changed_parse_bounds_reread_everything_but_a_time_limit_does_not(tmp_path):
    (tmp_path / "good.yaml").write_text(GOOD)
    (tmp_path / "other.yaml").write_text(spec())
    first = _run([tmp_path])
    assert _names(first) == ["good.yaml", "other.yaml"]
    assert _names(_run([tmp_path], first.state)) == []
    assert _names(_run([tmp_path], first.state, timeout_s=5)) == []
    assert _names(_run([tmp_path], first.state, max_nodes=50_000)) == ["good.yaml", "other.yaml"]


@pytest.mark.skipif(multiprocessing.get_start_method() != "fork",
                    reason="the counting graph builder is patched in the parent and inherited by forked workers")
def test_only_a_changed_spec_computes_its_dependency_graph_again(tmp_path, monkeypatch):
    from specrag.specs import chunker

    calls = tmp_path / "graph-calls.txt"  # written by the worker processes
    real = chunker.api_graph

    def counting(file_id, *args, **kwargs):
        with open(calls, "a", encoding="utf-8") as out:
            out.write(file_id + "\n")
        return real(file_id, *args, **kwargs)

    monkeypatch.setattr(chunker, "api_graph", counting)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "good.yaml").write_text(GOOD)
    (corpus / "other.yaml").write_text(spec())
    first = _run([corpus])
    assert sorted(calls.read_text().split()) == ["good", "other"]
    calls.write_text("")
    (corpus / "other.yaml").write_text(spec(paths="  /b:\n    get:\n      responses: {'200': {description: ok}}\n"))
    second = _run([corpus], first.state)
    assert calls.read_text().split() == ["other"]
    assert [a.api.file_id for a in second.apis] == ["other"] and [a.info.file_id for a in second.kept] == ["good"]


def test_real_paths_are_what_path_resolve_gives(tmp_path, monkeypatch):
    """Folders resolved once per folder, files that are links in full: the same keys as before."""
    real = tmp_path / "real"
    (real / "sub").mkdir(parents=True)
    for name in ("a.json", "sub/b.yaml"):
        (real / name).write_text("{}")
    (tmp_path / "linked").symlink_to(real, target_is_directory=True)
    (real / "link.json").symlink_to(real / "sub" / "b.yaml")
    (real / "dangling.json").symlink_to(tmp_path / "nowhere.json")
    monkeypatch.chdir(real / "sub")
    paths = [str(real / "a.json"), str(tmp_path / "linked" / "sub" / "b.yaml"), str(tmp_path / "linked" / "link.json"),
             str(real / "dangling.json"), "b.yaml", "../a.json", str(tmp_path / "linked" / "sub" / ".." / "a.json"),
             str(tmp_path / "linked") + "//sub/b.yaml", str(tmp_path / "missing" / "c.json")]
    assert real_paths(paths) == {p: str(Path(p).resolve()) for p in paths}
    assert real_paths([str(real / "link.json")])[str(real / "link.json")] == str(real / "sub" / "b.yaml")


def test_specs_run_and_are_admitted_in_plan_order_without_a_stat_of_their_own(tmp_path, monkeypatch):
    """Big specs first, then by path, as ``plan_jobs`` orders them; the sizes come from the stamps
    the run takes anyway, so a fleet's unchanged files are not stat'ed once more to be sorted.
    Of two specs with one file_id, the one first in that order is kept."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "small.yaml").write_text(spec())
    (tmp_path / "b" / "small.yaml").write_text(spec("x-note: " + "n" * 400 + "\n"))
    (tmp_path / "big.yaml").write_text(spec("x-note: " + "n" * 4000 + "\n"))
    (tmp_path / "mid.yaml").write_text(spec("x-note: " + "n" * 900 + "\n"))
    planned = [str(j.path) for j in ingest.plan_jobs([tmp_path], 1500, limits())]
    monkeypatch.setattr(ingest, "_size", lambda path: pytest.fail(f"stat'ed to sort: {path}"))
    first = _run([tmp_path])
    assert first.parsed == planned
    assert [Path(p).name for p in planned] == ["big.yaml", "mid.yaml", "small.yaml", "small.yaml"]
    assert [a.api.source for a in first.apis if a.api.file_id == "small"] == [planned[2]]
    (tmp_path / "mid.yaml").write_text(spec("x-note: " + "m" * 900 + "\n"))
    second = _run([tmp_path], first.state)
    assert planned[1] in second.parsed and planned[0] not in second.parsed
    assert second.parsed == [p for p in planned if p in second.parsed]


def test_with_work_beside_them_the_workers_load_the_tokenizer_and_chunk_as_before(tmp_path):
    examples = Path(__file__).resolve().parents[2] / "examples" / "specs"
    alone = ingest_changed([examples], 1500, None, {}, limits=limits(), workers=1)
    tokens._encoding.cache_clear()
    loaded_in_parent = []
    beside = ingest_changed([examples], 1500, None, {}, limits=limits(), workers=1,
                            meanwhile=lambda: loaded_in_parent.append(tokens._encoding.cache_info().currsize))
    assert loaded_in_parent == [0]  # the parent did not load it before the fork: the worker did
    assert len(alone.apis) == 2 and [a.model_dump() for a in beside.apis] == [a.model_dump() for a in alone.apis]
