"""Closure fit: each operation's reference closure, measured per API as ingest admits it."""

from __future__ import annotations

from specrag.specs.closure import closure_fit, operation_closures
from specrag.specs.ingest import ingest_paths

SPEC = """\
openapi: 3.0.0
info: {title: Chain, version: "1"}
paths:
  /a:
    get:
      responses:
        "200": {description: ok, content: {application/json: {schema: {$ref: "#/components/schemas/A"}}}}
  /lone:
    get:
      responses:
        "204": {description: nothing}
components:
  schemas:
    A: {type: object, properties: {b: {$ref: "#/components/schemas/B"}}}
    B: {type: object, properties: {c: {$ref: "#/components/schemas/C"}}}
    C: {type: object, properties: {d: {$ref: "#/components/schemas/D"}}}
    D: {type: object, properties: {id: {type: string}}}
"""


def test_closures_reach_three_hops_and_the_report_sums_them(tmp_path):
    (tmp_path / "chain.yaml").write_text(SPEC)
    result = ingest_paths([tmp_path], 1500, workers=1)
    api = result.apis[0]
    tokens = {c.name or c.path: c.n_tokens for c in api.chunks}
    closures = dict(zip(("/a", "/lone"), operation_closures(api)))
    assert closures["/a"][1] == 4 and closures["/lone"] == (tokens["/lone"], 1, tokens["/lone"])  # op, A, B, C: not D
    assert closures["/a"][2] == tokens["/a"] + tokens["A"] + tokens["B"] + tokens["C"]
    assert result.report.closure == closure_fit(list(closures.values()))
    assert result.report.closure.operations == 2 and result.report.closure.fit == 1.0
