"""Corpus inputs as the user names them: paths, URLs, and @LIST files of them (comments,
relative paths from the list's folder, no nesting)."""

from __future__ import annotations

from pathlib import Path

import pytest
from specrag.core.errors import CorpusError
from specrag.core.settings import Settings
from specrag.specs.inputs import expand_inputs, is_url, read_list_file, resolve_inputs, shown_url
from specrag.specs.loader import any_spec_file, discover_spec_files


def test_a_list_file_holds_paths_and_urls_with_comments(tmp_path):
    listing = tmp_path / "lists" / "corpus.txt"
    listing.parent.mkdir()
    listing.write_text("# our specs\n\n  specs/users.yaml  \nhttps://api.example.com/openapi.json#frag  # the gateway\n"
                       "/abs/spec.json\t# tab comment\n")
    assert read_list_file(listing) == [listing.parent / "specs/users.yaml", "https://api.example.com/openapi.json#frag",
                                       Path("/abs/spec.json")]


def test_list_files_expand_in_place_and_do_not_nest(tmp_path):
    listing = tmp_path / "a.txt"
    listing.write_text("x.yaml\nhttp://h/s.json\n")
    assert expand_inputs([Path("first.json"), f"@{listing}", "http://h/t.json"]) == [
        Path("first.json"), tmp_path / "x.yaml", "http://h/s.json", "http://h/t.json"]
    listing.write_text("x.yaml\n@other.txt\n")
    with pytest.raises(CorpusError, match=r"a.txt, line 2: list files do not nest \(@other.txt\)"):
        expand_inputs([f"@{listing}"])


def test_a_missing_list_file_is_a_one_line_corpus_error(tmp_path):
    with pytest.raises(CorpusError, match="corpus list .*nope.txt: unreadable"):
        expand_inputs([f"@{tmp_path / 'nope.txt'}"])


def test_only_scheme_urls_are_urls():
    assert is_url("https://h/x") and is_url("ftp://h/x") and is_url("file:///etc/passwd")
    assert not is_url("specs/x.yaml") and not is_url("C:\\specs\\x.yaml") and not is_url("http:/h/x")


def test_paths_alone_fetch_nothing(tmp_path):
    inputs = resolve_inputs(Settings(_env_file=None, data_dir=tmp_path / "data"), [Path("a.yaml"), Path("a.yaml")])
    assert inputs.paths == [Path("a.yaml")] and inputs.fetched == {} and not (tmp_path / "data").exists()


def test_a_password_in_a_url_is_never_shown():
    assert shown_url("https://me:s3cret@h.example/x.json") == "https://me:***@h.example/x.json"
    assert shown_url("https://h.example/x.json?key=1") == "https://h.example/x.json?key=1"


def test_files_found_in_folders_come_in_path_order_without_hidden_or_other_files(tmp_path):
    for rel in ["a-b/x.json", "a/b.json", "a/c/d.yaml", "a.json", "B.YML", "b.yaml", ".hidden.json",
                "notes.txt", ".dir/c.json", "a/.e.yml", "plain"]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("{}")
    given = tmp_path / "a" / "b.json"
    explicit, found = discover_spec_files([tmp_path, given])
    assert explicit == [given]
    # Path's own order, by parts: 'a/c/d.yaml' before 'a-b/…' and 'a.json' (as strings it would come after both)
    assert found == [tmp_path / r for r in ["B.YML", "a/c/d.yaml", "a-b/x.json", "a.json", "b.yaml"]]


def test_whether_any_spec_file_is_there_agrees_with_discovery(tmp_path):
    layouts = {"empty": [], "only hidden or other files": [".a.json", "notes.txt", ".dir/b.yaml"],
               "one nested spec": ["notes.txt", "x/y/z.YAML"], "specs at the top": ["a.json", "b.yml"]}
    for name, files in layouts.items():
        root = tmp_path / name.replace(" ", "_")
        root.mkdir()
        for rel in files:
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text("{}")
        assert any_spec_file([root]) == any(discover_spec_files([root])), name
    assert not any_spec_file([tmp_path / "empty", tmp_path / "only_hidden_or_other_files"])
    assert any_spec_file([tmp_path / "empty", tmp_path / "only_hidden_or_other_files" / "notes.txt"])  # named: taken
    for paths in ([tmp_path / "specs_at_the_top", tmp_path / "gone"], [tmp_path / "gone", tmp_path / "empty"]):
        with pytest.raises(CorpusError, match="no such file or folder: .*gone"):  # wherever the missing path is
            any_spec_file(paths)
        with pytest.raises(CorpusError, match="no such file or folder: .*gone"):
            discover_spec_files(paths)
