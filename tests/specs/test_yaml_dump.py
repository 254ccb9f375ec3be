"""The fast YAML renderer writes exactly what the generic PyYAML dumper writes."""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import pytest
import yaml
from specrag.specs.yaml_dump import to_yaml, to_yaml_reference

FIXTURES = [Path(__file__).parent / "fixtures" / name for name in ("shop_swagger2.yaml", "zoo_oas3.yaml")]
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "specs"

AWKWARD = {
    "plain": "string", "empty": "", "looks_bool": "true", "yes": "yes", "looks_int": "123", "looks_float": "1e5",
    "null_word": "null", "tilde": "~", "colon": "a: b", "hash": "a #b", "lead_dash": "- x", "star": "*x",
    "amp": "&x", "bang": "!x", "quote": "it's", "dq": 'say "hi"', "trailing": "x  ", "leading": "  x",
    "multi": "line one  \nline two\n\n\nlast  ", "multi_lead": "  indented\nnext", "multi_end": "a\n",
    "unicode": "caf\u00e9 \u2603 \U0001f600", "control": "bell\x07", "tab": "a\tb", "long": "word " * 1200,
    "long_key_" + "k" * 140: 1, 200: {"description": "OK"}, True: "bool key", None: "none key", 1.5: "float key",
    "numbers": [0, -1, 10**20, 1.0, 1e17, -0.0, float("inf"), float("-inf"), float("nan")],
    "nested": [[], {}, [[1, 2], {"a": [None, False]}], {"k": {"k": {"k": "deep"}}}],
    "dates": [datetime.date(2024, 1, 2), datetime.datetime(2024, 1, 2, 3, 4, 5)],
    "other": [(1, 2), b"\x00\x01", {1, 2}, Path("/x")],
}


def test_awkward_values_render_exactly_as_pyyaml():
    assert to_yaml(AWKWARD) == to_yaml_reference(AWKWARD)
    for key, value in AWKWARD.items():
        assert to_yaml({key: value}) == to_yaml_reference({key: value}), key
        assert to_yaml([value]) == to_yaml_reference([value]), key


def test_a_shared_subtree_is_rendered_inline_each_time_not_as_an_alias():
    shared = {"type": "string", "enum": ["a", "b"]}
    doc = {"one": shared, "two": [shared, shared]}
    text = to_yaml(doc)
    assert text == to_yaml_reference(doc)
    assert "&" not in text and "*" not in text and text.count("enum:") == 3


@pytest.mark.parametrize("path", FIXTURES + sorted(EXAMPLES.glob("*.*")), ids=lambda p: p.name)
def test_every_fragment_of_real_specs_renders_exactly_as_pyyaml(path):
    doc = json.loads(path.read_text()) if path.suffix == ".json" else yaml.safe_load(path.read_text())
    stack = [doc]
    seen = 0
    while stack:
        node = stack.pop()
        assert to_yaml(node) == to_yaml_reference(node)
        seen += 1
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else []
        stack.extend(c for c in children if isinstance(c, (dict, list)))
    assert seen > 20
