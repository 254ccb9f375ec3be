"""Fuzz-style: seeded mutations of real specs (deleted keys, swapped types, self-refs, deep
nesting, huge strings, alias-heavy YAML, truncation, flipped bytes, other encodings, hostile refs)
are ingested together. Nothing escapes, every file is read or skipped with a one-line reason, the
chunk graph of every read spec is exact, and the batch ends within the per-spec limit's bound."""

from __future__ import annotations

import copy
import json
import math
import random
import time
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml
from specrag.specs.ingest import ingest_paths

from .hostile import billion_laughs, limits

FIXTURES = Path(__file__).parent / "fixtures"
CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus"
CORPUS_SEEDS = ["toolalpaca/axolotl.json", "toolalpaca/1forge.json", "apis-guru/xkcd.com.json",
                "twilio/twilio_frontline_v1.json"]
TIMEOUT_S = 10.0
WORKERS = 2


def _seeds() -> dict[str, Any]:
    seeds = {p.stem: yaml.safe_load(p.read_text()) for p in sorted(FIXTURES.glob("*.yaml"))}
    for rel in CORPUS_SEEDS:
        if (CORPUS / rel).is_file():
            seeds[Path(rel).stem.replace(".", "_")] = json.loads((CORPUS / rel).read_text())
    return seeds


def _slots(doc: Any) -> list[tuple[Any, Any]]:
    """Every (container, key) of the document, in a stable order."""
    slots, stack = [], [doc]
    while stack:
        node = stack.pop()
        items = list(node.items()) if isinstance(node, dict) else list(enumerate(node)) if isinstance(node, list) else []
        for key, child in items:
            slots.append((node, key))
            stack.append(child)
    return slots


def _pick(rng: random.Random, doc: Any, n: int, want: type | None = None) -> list[tuple[Any, Any]]:
    slots = [s for s in _slots(doc) if want is None or isinstance(s[0][s[1]], want)]
    return rng.sample(slots, min(n, len(slots)))


def delete_keys(doc, rng):
    for parent, key in _pick(rng, doc, 8):
        if isinstance(parent, dict) and key in parent:
            del parent[key]
    return doc


def swap_types(doc, rng):
    others = [None, 0, -1, True, "", "text", [], {}, [1, "a"], {"$ref": 7}, 3.5]
    for parent, key in _pick(rng, doc, 12):
        try:
            parent[key] = rng.choice(others)
        except (IndexError, KeyError):
            pass
    return doc


def self_refs(doc, rng):
    refs = ["#", "#/", "#/paths", "#/info", "#/components", "#/definitions", "#/paths/~1nope"]
    for parent, key in _pick(rng, doc, 6, dict):
        parent[key]["$ref"] = rng.choice(refs)
    for path in list(doc.get("paths") or {})[:3] if isinstance(doc.get("paths"), dict) else []:
        doc["paths"][path] = {"$ref": "#/paths/" + path.replace("~", "~0").replace("/", "~1")}
    return doc


def hostile_refs(doc, rng):
    refs = ["../../../../etc/passwd", ".env", ".git/config.json", "http://example.com/x.json", "//host/x",
            "missing.yaml#/X", "#/paths/%7Bbad", 12, ["list"], "fuzz.txt#/a", "#no-slash", "a\x00b.yaml", "%00.yaml",
            "a/" * 50_000 + "x.yaml", "n" * 300 + ".yaml", "%2e%2e/%2e%2e/x.yaml"]
    for parent, key in _pick(rng, doc, 10, dict):
        parent[key]["$ref"] = rng.choice(refs)
    return doc


def deep_nesting(doc, rng):
    for parent, key in _pick(rng, doc, 2):
        value = parent[key]
        for i in range(rng.choice([60, 150])):
            value = {"nested": value} if i % 2 else [value]
        parent[key] = value
    return doc


def huge_strings(doc, rng):
    for parent, key in _pick(rng, doc, 2):
        parent[key] = rng.choice(["x", "word ", "é", "😀", "a/b{c}"]) * 200_000
    return doc


def int_and_null_keys(doc, rng):
    for parent, key in _pick(rng, doc, 6, dict):
        parent[key].update({1: "int key", None: "null key", True: "bool key", 2.5: "float key"})
    return doc


DOC_MUTATIONS: dict[str, Callable[[Any, random.Random], Any]] = {
    f.__name__: f for f in (delete_keys, swap_types, self_refs, hostile_refs, deep_nesting, huge_strings,
                            int_and_null_keys)}


def _as_yaml(doc) -> str:
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)


def _byte_mutations(doc, rng) -> dict[str, tuple[str, bytes]]:
    text = json.dumps(doc)
    raw = bytearray(text.encode())
    for i in rng.sample(range(len(raw)), min(20, len(raw))):
        raw[i] = rng.randrange(256)
    shared = _as_yaml(doc).replace("paths:", "x-shared: &shared " + json.dumps(doc.get("info", {})) + "\npaths:", 1)
    return {
        "truncated": (".json", text[: rng.randrange(len(text))].encode()),
        "flipped": (".json", bytes(raw)),
        "utf16": (".json", text.encode("utf-16")),
        "bom_yaml": (".yaml", b"\xef\xbb\xbf" + _as_yaml(doc).encode()),
        "aliases": (".yaml", (shared + "x-uses: [" + ", ".join(["*shared"] * 500) + "]\n").encode()),
        "laughs": (".yaml", (billion_laughs(7) + "x-more: " + json.dumps(doc.get("info", {})) + "\n").encode()),
    }


def _write_corpus(folder: Path) -> list[Path]:
    written = []
    for n, (stem, seed) in enumerate(_seeds().items()):
        for m, (name, mutate) in enumerate(DOC_MUTATIONS.items()):
            doc = mutate(copy.deepcopy(seed), random.Random(1000 * n + m))
            if name == "int_and_null_keys":
                path, data = folder / f"{stem}__{name}.yaml", _as_yaml(doc).encode()
            else:
                path, data = folder / f"{stem}__{name}.json", json.dumps(doc).encode()
            path.write_bytes(data)
            written.append(path)
        for name, (suffix, data) in _byte_mutations(seed, random.Random(n)).items():
            path = folder / f"{stem}__{name}{suffix}"
            path.write_bytes(data)
            written.append(path)
    return written


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fuzz")
    files = _write_corpus(folder)
    started = time.perf_counter()
    result = ingest_paths(files, workers=WORKERS, limits=limits(timeout_s=TIMEOUT_S))
    return files, result, time.perf_counter() - started


def test_every_file_is_read_or_skipped_with_a_reason(fuzzed):
    files, result, _ = fuzzed
    read = {Path(a.api.source).name for a in result.apis}
    skipped = {Path(s.file).name: s.reason for s in result.report.specs_skipped}
    assert read | set(skipped) == {p.name for p in files} and not read & set(skipped)
    for name, reason in skipped.items():
        assert reason.strip() and "\n" not in reason and len(reason) < 300, (name, reason)
        assert not reason.startswith(("internal error", "worker process died")), (name, reason)
    assert len(read) >= len(files) // 3  # most mutations leave a usable spec
    json.loads(result.report.model_dump_json())


def test_read_specs_have_an_exact_chunk_graph(fuzzed):
    _, result, _ = fuzzed
    for api in result.apis:
        by_id = {c.id: c for c in api.chunks}
        assert len(by_id) == len(api.chunks), api.api.file_id
        for chunk in api.chunks:
            assert set(chunk.ref_ids) <= set(by_id), chunk.id
            for rid in chunk.ref_ids:
                assert chunk.id in by_id[rid].referenced_by
        assert api.refs.resolved + api.refs.unresolved == api.refs.total
        json.loads(api.model_dump_json())


def test_hostile_refs_read_nothing_outside_spec_documents(fuzzed):
    _, result, _ = fuzzed
    for api in result.apis:
        assert api.api.files == [], (api.api.file_id, api.api.files)  # no seed has a second file
        assert not any("root:x:0:0" in c.text for c in api.chunks)


def test_batch_ends_within_the_bound_of_the_per_spec_limit(fuzzed):
    files, result, wall = fuzzed
    bound = math.ceil(len(files) / WORKERS) * TIMEOUT_S
    assert wall < bound, (wall, bound)
    print(f"fuzz: {len(files)} files, {result.report.specs_read} read, "
          f"{len(result.report.specs_skipped)} skipped, {wall:.1f} s (bound {bound:.0f} s)")
