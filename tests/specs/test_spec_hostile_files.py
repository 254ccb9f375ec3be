"""Files that are not what they seem: FIFOs, devices, symlinks out of the corpus, oversized files,
odd encodings and file names that are not UTF-8. Each is skipped with its reason or read right;
nothing blocks, and the report always serialises."""

from __future__ import annotations

import codecs
import json
import os
from pathlib import Path

import pytest
from specrag.specs.files import decode_text, safe_text
from specrag.specs.ingest import ingest_paths, ingest_spec

from .hostile import GOOD, limits, spec


def _reasons(result) -> dict[str, str]:
    return {Path(os.fsencode(s.file).decode("utf-8", "replace")).name: s.reason for s in result.report.specs_skipped}


def test_fifo_and_device_are_skipped_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "fifo.yaml")
    (tmp_path / "zero.yaml").symlink_to("/dev/zero")
    (tmp_path / "good.yaml").write_text(GOOD)
    result = ingest_paths([tmp_path], workers=1, limits=limits(timeout_s=20))
    assert _reasons(result) == {"fifo.yaml": "not a regular file: a FIFO",
                                "zero.yaml": "symlink to a file outside its folder (/dev/zero); give that file itself"}
    assert [a.api.file_id for a in result.apis] == ["good"]


def test_fifo_given_by_name_is_reported(tmp_path):
    os.mkfifo(tmp_path / "pipe.json")
    result = ingest_paths([tmp_path / "pipe.json"], workers=1, limits=limits(timeout_s=20))
    assert _reasons(result) == {"pipe.json": "not a regular file: a FIFO"}


def test_device_inside_the_folder_is_not_read(tmp_path):
    """A device node is refused on its stat, before it is opened."""
    skipped = ingest_spec(Path("/dev/null"), "null", 1500, limits=limits())
    assert skipped.reason == "not a regular file: a character device"


def test_oversized_file_is_skipped(tmp_path):
    (tmp_path / "big.yaml").write_text(spec("x-pad: '" + "a" * 5000 + "'\n"))
    (tmp_path / "small.yaml").write_text(spec())
    result = ingest_paths([tmp_path], workers=1, limits=limits(max_bytes=4096))
    assert _reasons(result)["big.yaml"].endswith("larger than 4096 (SPECRAG_SPEC_MAX_BYTES)")
    assert [a.api.file_id for a in result.apis] == ["small"]


def test_symlinked_entry_inside_its_folder_keeps_that_folder_as_root(tmp_path):
    """``latest.yaml -> v2/api.yaml``: refs resolve next to the real file, confined to the folder
    of the link (so ``../secret.yaml`` from v2/ is inside, ``../../`` is not)."""
    corpus = tmp_path / "corpus"
    (corpus / "v2").mkdir(parents=True)
    (tmp_path / "outside.yaml").write_text("X: {type: string, description: SECRET-OUTSIDE}\n")
    (corpus / "shared.yaml").write_text("Shared: {type: string, description: shared-model}\n")
    (corpus / "v2" / "model.yaml").write_text("Model: {type: integer}\n")
    (corpus / "v2" / "api.yml").write_text(spec(
        "components:\n  schemas:\n    M: {$ref: 'model.yaml#/Model'}\n    S: {$ref: '../shared.yaml#/Shared'}\n"
        "    O: {$ref: '../../outside.yaml#/X'}\n"))
    (corpus / "latest.yaml").symlink_to("v2/api.yml")
    api = ingest_spec(corpus / "latest.yaml", "latest", 1500, limits=limits())
    assert api.api.files == ["shared.yaml", "v2/model.yaml"]
    assert api.refs.external == {"escapes_root": 1} and api.refs.resolved == 2
    assert not any("SECRET-OUTSIDE" in c.text for c in api.chunks)
    # given as the real file, its own folder is the root: ../shared.yaml is outside then
    direct = ingest_spec(corpus / "v2" / "api.yml", "api", 1500, limits=limits())
    assert direct.refs.external == {"escapes_root": 2} and direct.api.files == ["model.yaml"]


def test_symlinked_entry_pointing_out_of_its_folder_is_refused_before_reading(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "api.yaml").write_text(spec())
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "api.yaml").symlink_to(tmp_path / "elsewhere" / "api.yaml")
    (tmp_path / "corpus" / "good.yaml").write_text(GOOD)
    result = ingest_paths([tmp_path / "corpus"], workers=1)
    assert _reasons(result)["api.yaml"].startswith("symlink to a file outside its folder")
    assert [a.api.file_id for a in result.apis] == ["good"]


def test_symlinked_ref_out_of_the_tree_is_not_read(tmp_path):
    (tmp_path / "secret.yaml").write_text("K: {description: SECRET}\n")
    (tmp_path / "api").mkdir()
    (tmp_path / "api" / "models.yaml").symlink_to(tmp_path / "secret.yaml")
    (tmp_path / "api" / "api.yaml").write_text(spec("components:\n  schemas:\n    S: {$ref: 'models.yaml#/K'}\n"))
    api = ingest_spec(tmp_path / "api" / "api.yaml", "api", 1500, limits=limits())
    assert api.refs.external == {"escapes_root": 1} and api.api.files == []


@pytest.mark.parametrize("encoding, suffix", [
    ("utf-8-sig", ".yaml"), ("utf-16", ".yaml"), ("utf-16-le", ".json"), ("utf-16-be", ".json"),
    ("utf-16", ".json"), ("utf-8-sig", ".json"), ("utf-32", ".json"),
])
def test_bom_and_utf16_specs_are_read(tmp_path, encoding, suffix):
    """Found in a folder (so the openapi sniff must see through the encoding) and read whole."""
    text = spec() if suffix == ".yaml" else json.dumps(
        {"openapi": "3.0.0", "info": {"title": "Ünïcode ✓", "version": "1"},
         "paths": {"/a": {"get": {"responses": {"200": {"description": "ok"}}}}}})
    (tmp_path / f"api{suffix}").write_bytes(text.encode(encoding))
    result = ingest_paths([tmp_path], workers=1)
    assert result.report.specs_skipped == []
    [api] = result.apis
    assert [c.id for c in api.chunks] == ["api:paths/~1a/get"]
    assert api.api.title in ("T", "Ünïcode ✓")


@pytest.mark.parametrize("raw, reason", [
    (b"openapi: 3.0.0\ninfo: {title: caf\xe9}\npaths: {}\n", "not utf-8 text: cannot decode byte 0xe9 at offset 32"),
    (codecs.BOM_UTF16_LE + b"o\x00p\x00\x00\xd8", "not utf-16 text: cannot decode byte 0x00 at offset 6"),
])
def test_undecodable_bytes_give_a_clear_reason(tmp_path, raw, reason):
    (tmp_path / "bad.yaml").write_bytes(raw)
    assert ingest_spec(tmp_path / "bad.yaml", "bad", 1500, limits=limits()).reason == reason


def test_decode_strips_the_bom():
    assert decode_text(codecs.BOM_UTF8 + b"a: 1") == "a: 1"
    assert decode_text("a: ✓".encode("utf-16")) == "a: ✓"


def test_non_utf8_file_name_is_skipped_and_the_report_serialises(tmp_path):
    folder = tmp_path / "specs"
    folder.mkdir()
    weird = folder / os.fsdecode(b"caf\xe9.yaml")
    weird.write_text(spec())
    os.mkfifo(folder / os.fsdecode(b"pipe\xff.yaml"))
    (folder / "good.yaml").write_text(GOOD)
    result = ingest_paths([folder], workers=1, limits=limits(timeout_s=20))
    report = json.loads(result.report.model_dump_json())
    skipped = {Path(s["file"]).name: s["reason"] for s in report["specs_skipped"]}
    assert skipped == {"caf\\xe9.yaml": "file name is not valid UTF-8 (chunk ids must be text); rename the file",
                       "pipe\\xff.yaml": "not a regular file: a FIFO"}
    assert report["specs_read"] == 1


def test_safe_text_keeps_text_and_escapes_the_rest():
    assert safe_text("plain ✓") == "plain ✓"
    assert safe_text(os.fsdecode(b"a\xe9")) == "a\\xe9"
    assert safe_text("lone \ud800") == "lone \\ud800"
