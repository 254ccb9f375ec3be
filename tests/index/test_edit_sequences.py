"""Random edit sequences: an index survives any sequence of add / change / delete / rename of
specs, with and without embeddings, and with kill -9 at any point; the next ``specrag index``
answers like a fresh build of the same files.

Each sequence is seeded (``random.Random(seed)``) and bounded (STEPS edits on a corpus of a few
small real specs). After each step the corpus is indexed incrementally in one data dir and from
scratch in another; chunk ids and texts, the manifest's entries, the catalog and the per-API
indexes, the searches and the context of a few fixed questions must be the same. The kill
variant runs ``specrag index`` in a subprocess, SIGKILLs it at a seeded point, checks that the
index it left serves one generation whole (the one before the edit or the one after), then
re-indexes and compares with a fresh build.

PLAN: lexical 4 sequences x 6 steps, hybrid (real ONNX model) 3 x 5, killed 3 x 3: 10 sequences,
48 steps, each compared with a fresh build (~20 s, ~40 s and, marked slow, ~60 s on 2 cores).
The killed sequences found the pending-API bug (a killed re-index served its last generation
without the API it was rewriting: see test_interrupted_build.py).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from specrag.catalog.io import CATALOG_FILE, INDEX_DIR
from specrag.index import ChunkStore, load_manifest
from specrag.index.workspace import corpus_settings, update_index

from .fleet import MODEL_DIR

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "specs"
SPECRAG = Path(sys.executable).parent / "specrag"
QUERIES = ["create a new user", "list all pets", "delete an order", "weather forecast for a city",
           "update the invoice status"]
# (mode, sequences, steps per sequence): the closing note's "N sequences x M steps"
PLAN = {"lexical": (4, 6), "hybrid": (3, 5), "killed": (3, 3)}
EDITS = ("add", "change", "change", "delete", "rename")
CHANGES = ("describe", "summary", "add_op", "remove_op", "rename_schema")
GENERATED = {"orders": "Order", "invoices": "Invoice", "forecasts": "Forecast", "tickets": "Ticket"}


def generated_spec(res: str, item: str) -> dict:
    props = {f"field_{i}": {"type": "string", "description": f"the field {i} of one of the {res}"} for i in range(3)}
    return {"openapi": "3.0.0",
            "info": {"title": res.title(), "version": "1", "description": f"{res} service"},
            "paths": {f"/{res}": {"get": {"operationId": f"list_{res}", "summary": f"List all {res}",
                                          "responses": {"200": {"description": "ok", "content": {"application/json": {
                                              "schema": {"$ref": f"#/components/schemas/{item}"}}}},
                                                        "404": {"description": f"{res} not found"}}}},
                      f"/{res}/{{id}}": {"delete": {"operationId": f"delete_{res}", "summary": f"Delete one of the {res}",
                                                    "parameters": [{"name": "id", "in": "path", "required": True,
                                                                    "schema": {"type": "string"}}],
                                                    "responses": {"204": {"description": "deleted"}}}}},
            "components": {"schemas": {item: {"type": "object", "description": f"one of the {res}",
                                              "properties": props}}}}


def pool() -> dict[str, str]:
    """File name -> text of every spec a sequence may add: the two examples and small generated ones."""
    specs = {p.name: p.read_text() for p in sorted(EXAMPLES.iterdir())}
    for i, (res, item) in enumerate(GENERATED.items()):
        doc = generated_spec(res, item)
        specs[f"{res}.json" if i % 2 else f"{res}.yaml"] = (json.dumps(doc, indent=1) if i % 2 else
                                                            yaml.safe_dump(doc, sort_keys=False))
    return specs


def load(path: Path) -> dict:
    return json.loads(path.read_text()) if path.suffix == ".json" else yaml.safe_load(path.read_text())


def dump(path: Path, doc: dict) -> None:
    path.write_text(json.dumps(doc, indent=1) if path.suffix == ".json" else yaml.safe_dump(doc, sort_keys=False))


def change(path: Path, rng: random.Random, n: int) -> str:
    """Rewrite one spec: a description, an operation's summary, an operation added or removed, a
    schema renamed (its $refs with it). -> what was done."""
    doc = load(path)
    kind = rng.choice(CHANGES)
    operations = [(p, m) for p, item in doc["paths"].items() for m in item if m in ("get", "post", "put", "delete")]
    schemas_at = ("components", "schemas") if "components" in doc else ("definitions",)
    schemas = doc
    for key in schemas_at:
        schemas = schemas.get(key, {})
    if kind == "remove_op" and len(doc["paths"]) < 2:
        kind = "add_op"
    if kind == "rename_schema" and not schemas:
        kind = "describe"
    if kind == "describe":
        doc["info"]["description"] = f"revision {n}: " + rng.choice(["billing", "travel", "sports", "music"])
    elif kind == "summary":
        p, m = rng.choice(operations)
        doc["paths"][p][m]["summary"] = f"Step {n}: " + rng.choice(["fetch", "archive", "export", "audit"]) + " it"
    elif kind == "add_op":
        doc["paths"][f"/extra{n}"] = {"get": {"operationId": f"extra{n}", "summary": f"Fetch the extra report {n}",
                                              "responses": {"200": {"description": "the report"}}}}
    elif kind == "remove_op":
        del doc["paths"][rng.choice(sorted(doc["paths"]))]
    else:
        old = rng.choice(sorted(schemas))
        new = f"{old}V{n}"
        prefix = "#/" + "/".join(schemas_at) + "/"
        text = json.dumps(doc).replace(json.dumps(prefix + old), json.dumps(prefix + new))
        doc = json.loads(text)
        target = doc
        for key in schemas_at:
            target = target[key]
        target[new] = target.pop(old)
    dump(path, doc)
    return f"{kind} {path.name}"


def edit(corpus: Path, rng: random.Random, n: int) -> str:
    """One random edit of the corpus (at least one spec always stays). -> what was done."""
    present = sorted(p.name for p in corpus.iterdir())
    absent = sorted(set(pool()) - set(present) - {_original(p) for p in present})
    kind = rng.choice(EDITS)
    if kind == "add" and not absent or kind == "delete" and len(present) < 2:
        kind = "change"
    if kind == "add":
        name = rng.choice(absent)
        (corpus / name).write_text(pool()[name])
        return f"add {name}"
    name = rng.choice(present)
    if kind == "delete":
        (corpus / name).unlink()
        return f"delete {name}"
    if kind == "rename":
        stem, suffix = name.split(".", 1)
        new = f"{stem.split('__')[0]}__{n}.{suffix}"
        (corpus / name).rename(corpus / new)
        return f"rename {name} -> {new}"
    return change(corpus / name, rng, n)


def _original(name: str) -> str:
    stem, suffix = name.split(".", 1)
    return f"{stem.split('__')[0]}.{suffix}"


def start_corpus(root: Path, rng: random.Random) -> Path:
    root.mkdir(parents=True)
    specs = pool()
    for name in rng.sample(sorted(specs), 3):
        (root / name).write_text(specs[name])
    return root


def index(settings, corpus: Path, model):
    store = ChunkStore.open(corpus_settings(settings, [corpus]), embed_model=model)
    try:
        local, _ = update_index(settings, [corpus], progress=False, store=store)
    finally:
        store.close()
    return local


def answers(local, model) -> dict:
    """Everything a query can see of the index in ``local.data_dir``."""
    from specrag.engine.factory import build_engine

    store = ChunkStore.open(local, embed_model=model)
    try:
        manifest = load_manifest(local.storage.data_dir)
        served = sorted(store.complete_api_ids())
        seen = {
            "manifest": {fid: (e.state.value, e.content_hash, e.n_chunks, e.chunks_digest)
                         for fid, e in sorted(manifest.apis.items())},
            "served": served,
            "chunks": {fid: [(cid, c.text, c.model_dump_json()) for cid, c in
                             store.get_chunks(store.api_chunk_ids(fid)).items()] for fid in served},
            "order": {fid: store.api_chunk_ids(fid) for fid in served},
            "catalogs": {p.relative_to(local.catalogs_path).as_posix(): p.read_bytes()
                         for p in sorted(local.catalogs_path.rglob("*.json"))
                         if p.name == CATALOG_FILE or p.parent.name == INDEX_DIR},
            "searches": {(name, q): [(h.node.node_id, round(h.score, 5)) for h in getattr(store, name)(q, None, None, 8)]
                         for q in QUERIES for name in ("vector_search", "lexical_search")},
        }
        engine = build_engine(local, store=store)
        seen["context"] = {q: [c.id for c in engine.retrieve_context(q).chunks] for q in QUERIES[:3]}
        return seen
    finally:
        store.close()


def differences(ours: dict, theirs: dict) -> list[str]:
    out = []
    for key in theirs:
        if ours[key] != theirs[key]:
            inner = theirs[key]
            if isinstance(inner, dict):
                keys = sorted({*ours[key], *inner}, key=str)
                out += [f"{key}[{k}]: {ours[key].get(k)!r:.300} != fresh {inner.get(k)!r:.300}"
                        for k in keys if ours[key].get(k) != inner.get(k)]
            else:
                out.append(f"{key}: {ours[key]!r:.300} != fresh {inner!r:.300}")
    return out


def fresh_answers(settings, corpus: Path, model, folder: Path) -> dict:
    shutil.rmtree(folder, ignore_errors=True)
    local = index(settings.model_copy(update={"data_dir": folder}), corpus, model)
    seen = answers(local, model)
    shutil.rmtree(folder, ignore_errors=True)
    return seen


def mode_settings(settings, mode: str):
    base = settings.model_copy(update={"openai_api_key": None, "llm_base_url": None})
    if mode == "lexical":
        return base.model_copy(update={"embed_model": "none", "embed_model_path": None})
    return base


def sequence_ids(mode: str) -> list[int]:
    return list(range(PLAN[mode][0]))


@pytest.mark.parametrize("mode", ["lexical", "hybrid"])
def test_random_edit_sequences_answer_like_a_fresh_build(mode, settings, embed_model, tmp_path):
    """PLAN[mode] sequences x steps; every step compared with a fresh build: 0 differences."""
    sequences, steps = PLAN[mode]
    model = embed_model if mode == "hybrid" else None
    base = mode_settings(settings, mode)
    compared = 0
    for seed in range(sequences):
        rng = random.Random(f"{mode}-{seed}")
        corpus = start_corpus(tmp_path / f"seq{seed}" / "specs", rng)
        ours = base.model_copy(update={"data_dir": tmp_path / f"seq{seed}" / "data"})
        index(ours, corpus, model)
        history = []
        for step in range(steps):
            history.append(edit(corpus, rng, step))
            local = index(ours, corpus, model)
            diff = differences(answers(local, model), fresh_answers(base, corpus, model, tmp_path / "fresh"))
            assert not diff, f"seed {seed} after {history}:\n" + "\n".join(diff[:10])
            compared += 1
        print(f"{mode} sequence {seed}: {history}")
    assert compared == sequences * steps


KILLED_INDEX_TIMEOUT_S = 120


def killed_index(corpus: Path, data_dir: Path, rng: random.Random, tmp_path: Path) -> str:
    """``specrag index`` in a subprocess, SIGKILLed at a seeded point: mid-Chroma while the changed
    API is pending (the builder's pause hook) or after a random delay. -> where."""
    from specrag.index.builder import PAUSE_HOOK_ENV

    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPECRAG_", "OPENAI_"))}
    (tmp_path / "empty.env").touch()
    env |= {"SPECRAG_EMBED_MODEL_PATH": str(MODEL_DIR), "SPECRAG_ENV_FILE": str(tmp_path / "empty.env")}
    hooked = rng.random() < 0.6
    if hooked:  # right after the first Chroma batch of the first changed API: it is pending
        env[PAUSE_HOOK_ENV] = "0"
    delay = rng.uniform(1.0, 5.0)
    proc = subprocess.Popen([str(SPECRAG), "index", str(corpus), "--data-dir", str(data_dir)], env=env,
                            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    started = time.monotonic()
    try:
        if hooked:  # the pause line, or the end of a run that changed fewer APIs than the hook counts
            while time.monotonic() - started < KILLED_INDEX_TIMEOUT_S:
                line = proc.stderr.readline()
                if not line or "pausing mid-build" in line:
                    break
        else:
            try:
                proc.wait(timeout=delay)
            except subprocess.TimeoutExpired:
                pass
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        rest = proc.stderr.read()
        proc.stderr.close()
    assert proc.returncode in (0, -signal.SIGKILL), f"specrag index failed: {rest[-2000:]}"
    where = f"hook {env[PAUSE_HOOK_ENV]}" if hooked else f"after {delay:.1f} s"
    return where + (" (killed)" if proc.returncode == -signal.SIGKILL else f" (ended rc={proc.returncode})")


@pytest.mark.slow  # ~80 s: each step starts `specrag index` (model load) before it kills it
def test_kill_9_at_a_random_point_then_index_answers_like_a_fresh_build(settings, embed_model, tmp_path):
    """PLAN['killed'] sequences x steps: each step's index run is killed at a seeded point; what it
    leaves serves one whole generation, and the next run answers like a fresh build."""
    sequences, steps = PLAN["killed"]
    base = mode_settings(settings, "hybrid")
    killed = 0
    for seed in range(sequences):
        rng = random.Random(f"killed-{seed}")
        corpus = start_corpus(tmp_path / f"seq{seed}" / "specs", rng)
        ours = base.model_copy(update={"data_dir": tmp_path / f"seq{seed}" / "data"})
        local = index(ours, corpus, embed_model)
        history = []
        for step in range(steps):
            before = answers(local, embed_model)["served"]
            history.append(edit(corpus, rng, step))
            where = killed_index(corpus, ours.storage.data_dir, rng, tmp_path)
            history.append(where)
            killed += "(killed)" in where
            store = ChunkStore.open(local, embed_model=embed_model)  # as `specrag serve` opens it: no repair
            served = sorted(store.complete_api_ids())
            store.close()
            after = fresh_answers(base, corpus, embed_model, tmp_path / "fresh")
            assert served in (before, after["served"]), f"seed {seed} after {history}: serves {served}"
            local = index(ours, corpus, embed_model)
            diff = differences(answers(local, embed_model), after)
            assert not diff, f"seed {seed} after {history}:\n" + "\n".join(diff[:10])
        print(f"killed sequence {seed}: {history}")
    assert killed >= 1  # at least one run was really cut short
