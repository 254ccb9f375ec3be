"""A damaged index is never served silently: each failure is one line on stderr (exit 2) for a
query, and the next `specrag index` repairs it into an index that answers as a fresh build."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import chromadb
import numpy as np
import pytest
from chromadb.config import Settings as ChromaSettings
from specrag.cli import main
from specrag.core.settings import Settings
from specrag.engine.factory import build_engine
from specrag.index.lock import IndexLock
from specrag.index.manifest import load_manifest
from specrag.index.workspace import corpus_settings

from .fleet import MODEL_DIR

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "specs"
QUESTION = "How do I create a user?"


@pytest.fixture
def cli(tmp_path, monkeypatch, capsys):
    """Run `specrag ...` in-process against a data dir of its own; (exit code, stdout, stderr)."""
    if not (MODEL_DIR / "model.onnx").is_file():
        pytest.skip(f"local ONNX model folder {MODEL_DIR} is absent")
    monkeypatch.setenv("SPECRAG_EMBED_MODEL_PATH", str(MODEL_DIR))
    for name in ("OPENAI_API_KEY", "SPECRAG_LLM_BASE_URL", "OPENAI_BASE_URL", "SPECRAG_CHROMA_HOST"):
        monkeypatch.delenv(name, raising=False)
    data = tmp_path / "data"

    def run(*argv: str, data_dir: Path = data) -> tuple[int, str, str]:
        code = main([*argv, "--data-dir", str(data_dir)])
        out, err = capsys.readouterr()
        return code, out, err

    run.data = data
    run.index_dir = corpus_settings(Settings(data_dir=data), [EXAMPLES]).storage.data_dir
    return run


def _answer(cli) -> list[str]:
    code, out, err = cli("query", QUESTION, "--json")
    assert code == 0, err
    ctx = json.loads(out)
    return [c["id"] for c in ctx["primary_chunks"]] + [c["id"] for c in ctx["referenced_chunks"]]


def _one_line_error(cli, needle: str) -> None:
    code, out, err = cli("query", QUESTION, "--json")  # --json: no offline-mode notice besides the error
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and out == "" and len(lines) == 1, err
    assert needle in lines[0] and "specrag index" in lines[0], lines[0]


def _local(cli) -> Path:
    return cli.index_dir / "local" / load_manifest(cli.index_dir).local_dir


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


DAMAGE = {
    "truncated manifest": (lambda cli: _truncate(cli.index_dir / "manifest.json"), "manifest.json is truncated"),
    "deleted manifest": (lambda cli: (cli.index_dir / "manifest.json").unlink(), "manifest.json is missing"),
    "truncated chunk store": (lambda cli: _truncate(_local(cli) / "chunks.bin"), "chunks.bin is truncated"),
    "truncated BM25 postings": (lambda cli: _truncate(_local(cli) / "post_docs.npy"), "post_docs.npy is truncated"),
    "deleted BM25 vocabulary": (lambda cli: (_local(cli) / "vocab.json").unlink(), "vocab.json is missing"),
    "deleted vectors": (lambda cli: (_local(cli) / "vectors.f16").unlink(), "vectors.f16 is missing"),
    "altered vectors": (lambda cli: _flip_byte(_local(cli) / "vectors.f16"), "vectors.f16 fails its checksum"),
    "truncated local header": (lambda cli: _truncate(_local(cli) / "pack.json"), "pack.json is truncated"),
    "truncated catalog snapshot": (lambda cli: _truncate(cli.index_dir / "local" / load_manifest(cli.index_dir).catalogs),
                                   "is unreadable"),
    "truncated catalog blob": (lambda cli: _truncate(_catalog_blob(cli)), "is truncated or overwritten"),
    "altered catalog blob": (lambda cli: _flip_byte(_catalog_blob(cli)), "fails its checksum"),
    "deleted catalog blob": (lambda cli: _catalog_blob(cli).unlink(), "(catalog.json of catalogs-"),
}


def _catalog_blob(cli) -> Path:
    """The blob holding the live generation's catalog.json (catalog/snapshot.py)."""
    local = cli.index_dir / "local"
    listing = json.loads((local / load_manifest(cli.index_dir).catalogs).read_bytes())
    return local / "blobs" / listing["files"]["catalog.json"][0]


def _flip_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.fixture(scope="module")
def fresh_answer(tmp_path_factory):
    """The answer of a fresh build of the same specs (built once for every damage case)."""
    if not (MODEL_DIR / "model.onnx").is_file():
        pytest.skip(f"local ONNX model folder {MODEL_DIR} is absent")
    data = tmp_path_factory.mktemp("fresh")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SPECRAG_EMBED_MODEL_PATH", str(MODEL_DIR))
        for name in ("OPENAI_API_KEY", "SPECRAG_LLM_BASE_URL", "OPENAI_BASE_URL", "SPECRAG_CHROMA_HOST"):
            mp.delenv(name, raising=False)
        assert main(["index", str(EXAMPLES), "--data-dir", str(data), "--json"]) == 0
        engine = build_engine(corpus_settings(Settings(data_dir=data), [EXAMPLES]))
        ctx = engine.retrieve_context(QUESTION)
    return [c.id for c in ctx.primary_chunks] + [c.id for c in ctx.referenced_chunks]


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_damage_is_one_line_then_repaired(cli, fresh_answer, damage):
    assert cli("index", str(EXAMPLES))[0] == 0
    expected = _answer(cli)
    assert expected == fresh_answer
    harm, needle = DAMAGE[damage]
    harm(cli)
    _one_line_error(cli, needle)
    code, out, err = cli("index", str(EXAMPLES), "--json")
    assert code == 0, err
    run = json.loads(out)
    assert run["index"]["chunks_embedded"] == 0  # the vectors of record (Chroma) are reused
    if "catalog" not in damage:  # the catalogs' snapshot is written again from catalogs/: no index damage
        assert run["index"]["damage"] and "damaged" in run["index"]["full_rebuild"]
    assert _answer(cli) == expected == fresh_answer


def test_a_damaged_working_catalog_is_not_served_and_the_next_index_repairs_it(cli, fresh_answer):
    """``catalogs/`` is the builder's working copy: queries read the generation's snapshot."""
    assert cli("index", str(EXAMPLES))[0] == 0
    _truncate(cli.index_dir / "catalogs" / "catalog.json")
    assert _answer(cli) == fresh_answer
    code, _, err = cli("index", str(EXAMPLES), "--json")
    assert code == 0, err
    json.loads((cli.index_dir / "catalogs" / "catalog.json").read_text())
    assert _answer(cli) == fresh_answer


def _chroma_rows(cli) -> dict[str, np.ndarray]:
    client = chromadb.PersistentClient(path=str(cli.index_dir / "chroma"),
                                       settings=ChromaSettings(anonymized_telemetry=False))
    try:
        [collection] = client.list_collections()
        got = collection.get(include=["embeddings"])
        return {i: np.asarray(v, dtype=np.float32) for i, v in zip(got["ids"], got["embeddings"])}
    finally:
        client.close()


def test_a_deleted_chroma_store_is_restored_by_the_next_index(cli, fresh_answer):
    """Queries read the local index and do not notice; LlamaIndex readers of the collection would.
    The next run counts it as damage and restores every row from the local index's vectors
    (float16: what queries score with), embedding nothing, even with no spec changed."""
    assert cli("index", str(EXAMPLES))[0] == 0
    before = _chroma_rows(cli)
    shutil.rmtree(cli.index_dir / "chroma")
    assert _answer(cli) == fresh_answer
    code, out, err = cli("index", str(EXAMPLES), "--json")
    assert code == 0, err
    run = json.loads(out)["index"]
    assert "Chroma store" in run["damage"] and "was missing" in run["damage"]
    assert run["vectors_added"] == len(before) and run["chunks_embedded"] == 0 and not run["local_written"]
    after = _chroma_rows(cli)
    assert sorted(after) == sorted(before)
    assert max(float(np.abs(after[i] - before[i]).max()) for i in before) < 1e-3  # float16's rounding, no more
    code, out, err = cli("index", str(EXAMPLES), "--json")
    assert code == 0 and not json.loads(out)["index"]["damage"] and json.loads(out)["index"]["vectors_added"] == 0
    assert _answer(cli) == fresh_answer


def test_unreachable_chroma_server_is_one_line(cli, monkeypatch):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens here once the socket is closed
    monkeypatch.setenv("SPECRAG_CHROMA_HOST", "127.0.0.1")
    monkeypatch.setenv("SPECRAG_CHROMA_PORT", str(port))
    code, out, err = cli("index", str(EXAMPLES))
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and out == "", err  # fails before reading any spec
    assert f"127.0.0.1:{port}" in lines[0] and lines[0].count("unreachable") == 1, lines[0]


def test_index_lock_refuses_or_waits(cli, monkeypatch):
    assert cli("index", str(EXAMPLES))[0] == 0
    with IndexLock(cli.index_dir, timeout_s=0):
        monkeypatch.setenv("SPECRAG_INDEX_LOCK_TIMEOUT_S", "0")
        code, _, err = cli("index", str(EXAMPLES))
        assert code == 2 and len(err.strip().splitlines()) == 1
        assert f"pid {os.getpid()}" in err and "is updating" in err
    monkeypatch.setenv("SPECRAG_INDEX_LOCK_TIMEOUT_S", "60")
    assert cli("index", str(EXAMPLES))[0] == 0  # released: goes ahead


def test_two_index_runs_at_once(tmp_path):
    """Two real processes on the same corpus: the second waits for the first; both succeed and
    the index is whole (no temp-file collision, no half-written generation)."""
    if not (MODEL_DIR / "model.onnx").is_file():
        pytest.skip(f"local ONNX model folder {MODEL_DIR} is absent")
    data = tmp_path / "data"
    env = os.environ | {"SPECRAG_EMBED_MODEL_PATH": str(MODEL_DIR), "SPECRAG_INDEX_LOCK_TIMEOUT_S": "120"}
    env.pop("SPECRAG_CHROMA_HOST", None)
    specrag = Path(sys.executable).parent / "specrag"
    if not specrag.exists():
        pytest.skip(f"no `specrag` script at {specrag}")
    argv = [str(specrag), "index", str(EXAMPLES), "--data-dir", str(data), "--json"]
    procs = [subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)]
    time.sleep(0.5)
    procs.append(subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    results = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err for _, err in results]
    runs = [json.loads(out) for out, _ in results]
    embedded = sorted(r["index"]["chunks_embedded"] for r in runs)
    assert embedded[0] == 0 and embedded[1] > 0  # one built, the other found it built
    index_dir = corpus_settings(Settings(data_dir=data), [EXAMPLES]).storage.data_dir
    manifest = load_manifest(index_dir)
    assert not manifest.pending_ids()
    assert sorted(p.name for p in (index_dir / "local").iterdir()) == sorted([manifest.catalogs, manifest.local_dir,
                                                                             "blobs"])


def test_index_of_an_older_format_is_rebuilt(cli):
    assert cli("index", str(EXAMPLES))[0] == 0
    expected = _answer(cli)
    manifest = json.loads((cli.index_dir / "manifest.json").read_text())
    (cli.index_dir / "manifest.json").write_text(json.dumps(manifest | {"format_version": 1}))
    (cli.index_dir / "bm25" / "gen-3").mkdir(parents=True)  # what format 1 kept beside the manifest
    _one_line_error(cli, "written by another version of specrag (format 1")
    code, out, err = cli("index", str(EXAMPLES), "--json")
    assert code == 0, err
    run = json.loads(out)["index"]
    assert "another format" in run["full_rebuild"] and run["apis_added"]
    assert not (cli.index_dir / "bm25").exists()
    assert _answer(cli) == expected


def test_index_files_are_readable_by_others(cli):
    """Files replaced atomically are 0644 like the rest (a temp file alone would be 0600)."""
    assert cli("index", str(EXAMPLES))[0] == 0
    catalogs = cli.index_dir / "catalogs"
    written = [cli.index_dir / "manifest.json", cli.index_dir / "sources.json", catalogs / "catalog.json",
               *sorted((catalogs / "indexes").iterdir())]
    assert {p.name: oct(p.stat().st_mode & 0o777) for p in written} == {p.name: "0o644" for p in written}
    assert not list(cli.index_dir.rglob("*.tmp"))
