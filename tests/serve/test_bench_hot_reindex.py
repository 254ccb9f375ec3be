"""The load benchmark's hot re-index pieces: the corpus copy, the spec change (JSON and YAML),
and a probe that sees the change only in an answer's chunks (never in the echoed query)."""

from __future__ import annotations

import json
import time

import httpx
import pytest
import yaml

from .tenants import SPECS


def test_prepare_copies_and_change_spec_edits_one_summary(tmp_path):
    from specrag.bench.hot_reindex import change_spec, prepare

    copy, smallest = prepare(SPECS, tmp_path, None)
    assert copy != SPECS and smallest.parent == copy
    assert {p.name for p in copy.iterdir()} == {p.name for p in SPECS.iterdir()}
    petstore = copy / "petstore_v2.json"
    operation = change_spec(petstore, "hotswapabc")
    method, path = operation.split(" ")
    assert json.loads(petstore.read_text())["paths"][path][method.lower()]["summary"].endswith(" hotswapabc")
    _, users = prepare(SPECS, tmp_path / "again", "users_api.yaml")
    method, path = change_spec(users, "hotswapdef").split(" ")
    assert yaml.safe_load(users.read_text())["paths"][path][method.lower()]["summary"].endswith(" hotswapdef")
    assert (SPECS / "users_api.yaml").read_text() != users.read_text()  # the original is untouched
    with pytest.raises(ValueError, match="no spec"):
        prepare(SPECS, tmp_path / "third", "nope.yaml")


@pytest.mark.anyio
async def test_the_probe_sees_no_change_in_an_unchanged_index(app, kb_id, tmp_path):
    from specrag.bench.hot_reindex import HotReindex, ReindexReport, probe

    hot = HotReindex(corpus=SPECS, spec=SPECS / "users_api.yaml", data_dir=tmp_path, at_s=0)
    report = ReindexReport(spec="users_api.yaml", operation="", started_s=0)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://specrag") as http:
        await probe(http, kb_id, hot, report, time.perf_counter(), time.perf_counter() + 0.5)
    assert report.probes >= 1 and report.probe_errors == 0 and report.first_seen_s is None
