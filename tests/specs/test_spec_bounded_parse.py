"""Bounded parsing: alias bombs, merge-key bombs, recursive aliases and deep nesting are refused
with a one-line reason before they are expanded, and the good specs beside them are read."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml
from specrag.core.errors import SpecError
from specrag.specs.ingest import ingest_paths, ingest_spec
from specrag.specs.limits import ParseBudget
from specrag.specs.parse import parse_text

from .hostile import GOOD, billion_laughs, limits, spec

FIXTURES = Path(__file__).parent / "fixtures"


def _parse(text: str, is_json: bool = False, **changes):
    return parse_text(text, is_json, ParseBudget(limits(**changes)))


def test_billion_laughs_is_refused_quickly_and_the_good_spec_beside_it_read(tmp_path):
    (tmp_path / "bomb.yaml").write_text(billion_laughs())
    (tmp_path / "good.yaml").write_text(GOOD)
    assert len(billion_laughs()) < 1024
    started = time.perf_counter()
    result = ingest_paths([tmp_path], workers=1)
    assert time.perf_counter() - started < 30
    [skipped] = result.report.specs_skipped
    assert Path(skipped.file).name == "bomb.yaml"
    assert skipped.reason.startswith("more than 2000000 values") and "SPECRAG_SPEC_MAX_NODES" in skipped.reason
    assert [a.api.file_id for a in result.apis] == ["good"]


def test_shared_anchors_within_the_budget_still_load():
    doc = _parse(spec("x-shared: &s {type: string}\nx-use: [*s, *s, *s]\n"))
    assert doc["x-use"] == [{"type": "string"}] * 3


def test_each_alias_use_counts_its_whole_subtree():
    text = "a: &a [1, 2, 3, 4]\nb: [*a, *a, *a]\n"  # 1 + (1+1+4) + (1+1+3*5) nodes
    assert _parse(text) == {"a": [1, 2, 3, 4], "b": [[1, 2, 3, 4]] * 3}
    with pytest.raises(SpecError, match="more than 20 values"):
        _parse(text, max_nodes=20)


def test_merge_key_bomb_is_refused():
    lines = ["l0: &l0 {a: 1, b: 2, c: 3, d: 4, e: 5, f: 6, g: 7, h: 8, i: 9, j: 10}"]
    lines += [f"l{i}: &l{i} {{<<: [{', '.join([f'*l{i - 1}'] * 10)}], k{i}: 1}}" for i in range(1, 9)]
    with pytest.raises(SpecError, match="SPECRAG_SPEC_MAX_NODES"):
        _parse("\n".join(lines) + "\n")


def test_alias_uses_are_limited():
    text = "a: &a 1\nb: [" + ", ".join(["*a"] * 30) + "]\n"
    assert len(_parse(text)["b"]) == 30
    with pytest.raises(SpecError, match="more than 10 YAML alias uses"):
        _parse(text, max_aliases=10)


@pytest.mark.parametrize("text", ["a: &a [1, *a]\n", "a: &a {b: {c: *a}}\n"])
def test_recursive_alias_is_refused(text):
    with pytest.raises(SpecError, match="recursive YAML alias"):
        _parse(text)


@pytest.mark.parametrize("text, is_json", [
    ("[" * 200 + "]" * 200, False),
    ("a:\n" + "".join("  " * i + "b:\n" for i in range(1, 150)) + "  " * 150 + "c: 1\n", False),
    ("[" * 200 + "]" * 200, True),
    ('{"a": ' * 150 + "1" + "}" * 150, True),
])
def test_deep_nesting_is_refused(text, is_json):
    with pytest.raises(SpecError, match="nested deeper than 100 levels"):
        _parse(text, is_json)


def test_deep_alias_counts_its_depth():
    text = "deep: &d " + "[" * 60 + "]" * 60 + "\nuse: " + "[" * 50 + "*d" + "]" * 50 + "\n"
    with pytest.raises(SpecError, match="nested deeper than 100 levels"):
        _parse(text)


def test_alias_depth_is_its_own_height_not_the_deepest_part_before_it():
    text = "deep: " + "[" * 90 + "]" * 90 + "\nshallow: &s [[1]]\nuse: " + "[" * 90 + "*s" + "]" * 90 + "\n"
    assert _parse(text)["shallow"] == [[1]]


def test_flow_nesting_that_crashes_libyaml_is_a_skip_reason(tmp_path):
    """libyaml's recursive C composer segfaults at ~100k nested '['; the bounded composer stops first."""
    path = tmp_path / "deep.yaml"
    path.write_text("openapi: 3.0.0\npaths: {}\nx: " + "[" * 100_000 + "]" * 100_000 + "\n")
    skipped = ingest_spec(path, "deep", 1500, limits=limits())
    assert skipped.reason == "nested deeper than 100 levels (SPECRAG_SPEC_MAX_DEPTH)"


def test_json_values_are_counted():
    doc = {"openapi": "3.0.0", "paths": {}, "x": list(range(100))}
    assert _parse(json.dumps(doc), True) == doc
    with pytest.raises(SpecError, match="more than 50 values"):
        _parse(json.dumps(doc), True, max_nodes=50)


@pytest.mark.parametrize("text, is_json, reason", [
    ('{"a": "\\ud800x"}', True, "lone UTF-16 surrogate"),
    ('{"\\udce9": 1}', True, "lone UTF-16 surrogate"),
    ('a: "\\udce9"\n', False, "invalid Unicode character escape"),  # libyaml refuses it itself
])
def test_lone_surrogate_escape_is_refused(text, is_json, reason):
    """A lone surrogate can be in no UTF-8 output (report, catalog, Chroma)."""
    with pytest.raises(SpecError, match=reason):
        _parse(text, is_json)


def test_surrogate_pair_escape_is_text():
    assert _parse('{"a": "\\ud83d\\ude00"}', True) == {"a": "\U0001F600"}


def test_unsafe_tags_are_still_refused():
    with pytest.raises(SpecError, match="unsafe or unknown YAML tag"):
        _parse("a: !!python/object/apply:os.system ['true']\n")


@pytest.mark.parametrize("name", ["shop_swagger2.yaml", "zoo_oas3.yaml"])
def test_bounded_loader_reads_what_the_c_loader_reads(name):
    text = (FIXTURES / name).read_text()
    assert _parse(text) == yaml.load(text, Loader=yaml.CSafeLoader)
