"""A spec that hangs its worker (in Python, or where no signal handler can run, as in C code) is
skipped as timed out after the limit; its worker is replaced and every other spec is read."""

from __future__ import annotations

import multiprocessing
import signal
import time
from pathlib import Path

import pytest
from specrag.specs import ingest
from specrag.specs.ingest import ingest_paths

from .hostile import GOOD, DyingChunker, limits, spec

pytestmark = pytest.mark.skipif(multiprocessing.get_start_method() != "fork",
                                reason="the hanging chunker is patched in the parent and inherited by forked workers")

TIMEOUT_S = 2.0


class _HangingChunker(ingest.SpecChunker):
    """Hangs on specs whose file_id says so; the others are chunked as usual."""

    def run(self):
        if self.file_id.startswith("hang_py"):
            while True:
                time.sleep(1)
        if self.file_id.startswith("hang_c"):  # SIGTERM blocked: only SIGKILL ends this worker
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
            time.sleep(3600)
        return super().run()


@pytest.mark.parametrize("workers", [1, 2])
def test_hung_specs_time_out_and_the_others_are_read(tmp_path, monkeypatch, workers):
    monkeypatch.setattr(ingest, "SpecChunker", _HangingChunker)
    for name in ("hang_py", "hang_c"):
        (tmp_path / f"{name}.yaml").write_text(spec())
    for i in range(4):
        (tmp_path / f"good{i}.yaml").write_text(GOOD)
    started = time.perf_counter()
    result = ingest_paths([tmp_path], workers=workers, limits=limits(timeout_s=TIMEOUT_S))
    wall = time.perf_counter() - started
    reasons = {Path(s.file).name: s.reason for s in result.report.specs_skipped}
    assert reasons == {f"{n}.yaml": "timed out after 2 s (SPECRAG_SPEC_TIMEOUT_S)" for n in ("hang_py", "hang_c")}
    assert [a.api.file_id for a in result.apis] == [f"good{i}" for i in range(4)]
    # each hung spec costs its limit plus pebble's terminate->kill grace (3 s) and a new worker
    assert wall < 2 * (TIMEOUT_S + 3 + 2) + 10, wall


def test_a_worker_that_dies_fails_only_its_spec(tmp_path, monkeypatch):
    monkeypatch.setattr(ingest, "SpecChunker", DyingChunker)
    (tmp_path / "crash.yaml").write_text(spec())
    (tmp_path / "good.yaml").write_text(GOOD)
    result = ingest_paths([tmp_path], workers=1, limits=limits(timeout_s=30))
    [skipped] = result.report.specs_skipped
    assert skipped.reason.startswith("worker process died (exit code -9)")
    assert [a.api.file_id for a in result.apis] == ["good"]
