"""ReferenceExpander on a hand-built users API (the seed example) and a dict-backed lookup."""

from __future__ import annotations

import logging
import time

import pytest
from llama_index.core.schema import NodeWithScore, TextNode
from llama_index.core.utils import get_tokenizer

from pipeline.nodes import chunk_to_node
from pipeline.settings import Settings
from pipeline.specs.models import Chunk, ChunkType
from pipeline.stages.ref_expand import ChunkLookup, ExpansionResult, ReferenceExpander

POST = "users:paths/~1users/post"
GET = "users:paths/~1users~1{id}/get"
POST_ERR, GET_ERR = POST + ":errors", GET + ":errors"
S = "users:components/schemas/"
USER, USER_CREATE, ADDRESS, COUNTRY = S + "User", S + "UserCreate", S + "Address", S + "Country"
ERROR, VALIDATION = S + "Error", S + "ValidationError"


class DictLookup:
    """ChunkLookup over a dict; records every batch so tests can count calls per level."""

    def __init__(self, chunks: list[Chunk], delays: tuple[float, ...] = ()):
        self.chunks = {c.id: c for c in chunks}
        self.calls: list[list[str]] = []
        self.delays = delays

    def get_chunks(self, ids: list[str]) -> dict[str, Chunk]:
        self.calls.append(list(ids))
        if len(self.calls) <= len(self.delays):
            time.sleep(self.delays[len(self.calls) - 1])
        return {i: self.chunks[i] for i in ids if i in self.chunks}


def chunk(cid: str, refs: list[str] = (), n_tokens: int = 10, text: str | None = None) -> Chunk:
    if cid.endswith(":errors"):
        ctype, kind = ChunkType.ERRORS, "errors"
    elif ":paths/" in cid:
        ctype, kind = ChunkType.ENDPOINT, "operation"
    else:
        ctype, kind = ChunkType.COMPONENT, "schemas"
    name = cid.rsplit("/", 1)[-1] if ctype is ChunkType.COMPONENT else ""
    return Chunk(id=cid, file_id=cid.split(":")[0], type=ctype, kind=kind, name=name,
                 text=text or f"{cid}:\n  type: object\n", embed_text=cid, search_text=cid,
                 n_tokens=n_tokens, ref_ids={r: ["#/x"] for r in refs})


def users_api(**tokens: int) -> list[Chunk]:
    graph = {
        POST: [USER_CREATE, USER, POST_ERR], GET: [USER, GET_ERR],
        USER_CREATE: [ADDRESS], USER: [ADDRESS], ADDRESS: [COUNTRY], COUNTRY: [],
        POST_ERR: [VALIDATION, ERROR], GET_ERR: [ERROR], VALIDATION: [ERROR], ERROR: [],
    }
    return [chunk(cid, refs, tokens.get(cid.rsplit("/", 1)[-1], 10)) for cid, refs in graph.items()]


def primaries(chunks: list[Chunk], *ids: str) -> list[NodeWithScore]:
    by_id = {c.id: c for c in chunks}
    return [NodeWithScore(node=chunk_to_node(by_id[i]), score=1.0 / (rank + 1)) for rank, i in enumerate(ids)]


def run(*ids: str, chunks: list[Chunk] | None = None, **limits) -> tuple[ExpansionResult, DictLookup]:
    chunks = chunks if chunks is not None else users_api()
    lookup = DictLookup(chunks)
    return ReferenceExpander(lookup=lookup, **limits).expand(primaries(chunks, *ids)), lookup


def refs(result: ExpansionResult) -> list[tuple[str, int, str]]:
    return [(c.id, c.depth, c.referenced_from) for c in result.referenced]


def cuts(result: ExpansionResult) -> list[tuple[str, str, int, str]]:
    return [(c.id, c.referenced_from, c.depth, c.reason) for c in result.refs_cut]


def test_full_expansion_is_bfs_with_one_lookup_per_level():
    result, lookup = run(POST)
    assert refs(result) == [
        (USER, 1, POST), (USER_CREATE, 1, POST), (POST_ERR, 1, POST),
        (ADDRESS, 2, USER), (ERROR, 2, POST_ERR), (VALIDATION, 2, POST_ERR),
        (COUNTRY, 3, ADDRESS),
    ]
    assert lookup.calls == [[USER, USER_CREATE, POST_ERR], [ADDRESS, ERROR, VALIDATION], [COUNTRY]]
    assert [c.id for c in result.primary] == [POST]
    assert result.total_tokens == 80 and result.refs_followed == 7
    assert result.refs_cut == [] and result.limits_hit == [] and not result.truncated
    errors = result.referenced[2]
    assert errors.metadata["type"] == "errors" and errors.metadata["source_file"] == "users"


def test_self_reference_and_three_level_cycle_end():
    a, b, c = "x:components/schemas/A", "x:components/schemas/B", "x:components/schemas/C"
    result, lookup = run(a, chunks=[chunk(a, [a])])
    assert result.referenced == [] and lookup.calls == []
    result, lookup = run(a, chunks=[chunk(a, [b]), chunk(b, [c]), chunk(c, [a])], max_depth=10)
    assert refs(result) == [(b, 1, a), (c, 2, b)]
    assert lookup.calls == [[b], [c]]


def test_missing_refs_are_counted_and_logged(caplog):
    ghost = S + "Ghost"
    chunks = [chunk(POST, [ghost, USER])] + [c for c in users_api() if c.id != POST]
    with caplog.at_level(logging.WARNING, logger="pipeline.stages.ref_expand"):
        result, _ = run(POST, chunks=chunks, max_depth=1)
    assert result.refs_missing == [ghost]
    assert refs(result) == [(USER, 1, POST)]
    assert ghost in caplog.text


def test_depth_limit_cuts_without_lookup():
    result, lookup = run(POST, max_depth=2)
    assert COUNTRY not in [c.id for c in result.referenced]
    assert cuts(result) == [(COUNTRY, ADDRESS, 3, "depth")]
    assert result.limits_hit == ["depth"] and len(lookup.calls) == 2
    result, lookup = run(POST, max_depth=0)
    assert result.referenced == [] and lookup.calls == []
    assert [c.reason for c in result.refs_cut] == ["depth"] * 3


def test_token_limit_is_first_fit():
    chunks = users_api(post=100, User=200, UserCreate=20, Address=100)
    chunks = [chunk(c.id, list(c.ref_ids), 20 if c.id == POST_ERR else c.n_tokens) for c in chunks]
    result, _ = run(POST, chunks=chunks, token_limit=250)
    # User (200) does not fit, the smaller refs after it do; Address is reached through UserCreate
    assert refs(result) == [(USER_CREATE, 1, POST), (POST_ERR, 1, POST), (ADDRESS, 2, USER_CREATE), (ERROR, 2, POST_ERR)]
    assert cuts(result) == [(USER, POST, 1, "token_limit"), (VALIDATION, POST_ERR, 2, "token_limit"),
                            (COUNTRY, ADDRESS, 3, "token_limit")]
    assert result.total_tokens == 250 and result.limits_hit == ["token_limit"]


def test_refs_of_a_cut_chunk_are_not_followed():
    chunks = users_api(post=100, User=500)
    result, lookup = run(POST, chunks=[c for c in chunks if c.id != USER_CREATE], token_limit=400)
    assert cuts(result)[0] == (USER, POST, 1, "token_limit")
    assert ADDRESS not in [i for call in lookup.calls for i in call]


def test_primaries_are_kept_even_over_the_token_limit():
    result, _ = run(POST, GET, chunks=users_api(post=3000, get=2000), token_limit=4000)
    assert [c.id for c in result.primary] == [POST, GET]
    assert result.referenced == [] and result.total_tokens == 5000
    assert {c.reason for c in result.refs_cut} == {"token_limit"} and "token_limit" in result.limits_hit


def test_tokens_are_counted_when_metadata_has_none():
    text = "User:\n  type: object\n  properties:\n    name: {type: string}\n"
    chunks = [chunk(POST, [USER], n_tokens=0, text="post: {}\n"), chunk(USER, [], n_tokens=0, text=text)]
    result, _ = run(POST, chunks=chunks)
    def count(t: str) -> int:
        return len(get_tokenizer()(t))

    assert result.primary[0].n_tokens == count("post: {}\n")
    assert result.referenced[0].n_tokens == count(text)
    assert result.total_tokens == count("post: {}\n") + count(text)


def test_chunk_limit_cuts_remaining_refs():
    result, lookup = run(POST, max_total_chunks=4, prioritize_primary=False)
    assert [c.id for c in result.referenced] == [USER, USER_CREATE, POST_ERR]
    assert cuts(result) == [(ADDRESS, USER, 2, "max_chunks"), (ERROR, POST_ERR, 2, "max_chunks"),
                            (VALIDATION, POST_ERR, 2, "max_chunks")]
    assert result.limits_hit == ["max_chunks"] and len(lookup.calls) == 1
    result, _ = run(POST, max_total_chunks=3, prioritize_primary=False)  # cut inside a level
    assert [c.id for c in result.referenced] == [USER, USER_CREATE]
    assert cuts(result)[0] == (POST_ERR, POST, 1, "max_chunks")


def _fleet(n: int) -> list[Chunk]:
    """n operations, each referencing three schemas of its own."""
    ops = [chunk(f"f:paths/~1op{i}/get", [_t(3 * i + k) for k in range(3)]) for i in range(n)]
    return ops + [chunk(_t(j)) for j in range(3 * n)]


def _t(j: int) -> str:
    return f"f:components/schemas/T{j:02d}"


@pytest.mark.parametrize(("n_primary", "prioritize", "n_refs"), [(8, True, 4), (8, False, 2), (3, True, 7), (10, False, 0)])
def test_sixty_forty_split(n_primary, prioritize, n_refs):
    chunks = _fleet(n_primary)
    result, _ = run(*[c.id for c in chunks[:n_primary]], chunks=chunks, max_total_chunks=10,
                    prioritize_primary=prioritize)
    assert len(result.primary) == n_primary  # primaries always kept
    assert [c.id for c in result.referenced] == [_t(j) for j in range(n_refs)]
    assert [c.id for c in result.refs_cut] == [_t(j) for j in range(n_refs, 3 * n_primary)]
    assert {c.reason for c in result.refs_cut} == {"max_chunks"}


def test_timeout_returns_partial_context():
    lookup = DictLookup(users_api(), delays=(0.0, 0.5))
    expander = ReferenceExpander(lookup=lookup, timeout_ms=150)
    started = time.monotonic()
    result = expander.expand(primaries(users_api(), POST))
    assert time.monotonic() - started < 0.45
    assert result.truncated and "timeout" in result.limits_hit
    assert [c.id for c in result.referenced] == [USER, USER_CREATE, POST_ERR]
    assert cuts(result) == [(ADDRESS, USER, 2, "timeout"), (ERROR, POST_ERR, 2, "timeout"),
                            (VALIDATION, POST_ERR, 2, "timeout")]


def test_lookup_errors_propagate():
    class Broken:
        def get_chunks(self, ids):
            raise RuntimeError("store down")

    with pytest.raises(RuntimeError, match="store down"):
        ReferenceExpander(lookup=Broken()).expand(primaries(users_api(), POST))


def test_empty_input_and_bad_lookup():
    result, lookup = run()
    assert result == ExpansionResult() and lookup.calls == []
    assert ReferenceExpander(lookup=DictLookup([])).postprocess_nodes([]) == []
    with pytest.raises(ValueError, match="get_chunks"):
        ReferenceExpander(lookup=object())


@pytest.mark.parametrize("raw", ["{not json", "[1, 2]", "42", None])
def test_malformed_ref_ids_mean_no_refs(raw):
    metadata = {"type": "endpoint", "n_tokens": 5} | ({"ref_ids": raw} if raw is not None else {})
    node = NodeWithScore(node=TextNode(id_=POST, text="post", metadata=metadata), score=1.0)
    lookup = DictLookup(users_api())
    result = ReferenceExpander(lookup=lookup).expand([node])
    assert [c.id for c in result.primary] == [POST] and result.referenced == [] and lookup.calls == []


def test_shared_refs_appear_once_at_smallest_depth():
    result, lookup = run(POST, GET, USER)
    ids = [c.id for c in result.referenced]
    assert len(ids) == len(set(ids)) and USER not in ids  # a primary is never repeated as a ref
    assert refs(result)[:3] == [(USER_CREATE, 1, POST), (POST_ERR, 1, POST), (GET_ERR, 1, GET)]
    assert (ADDRESS, 1, USER) in refs(result) and (ERROR, 2, POST_ERR) in refs(result)
    assert lookup.calls[0] == [USER_CREATE, POST_ERR, GET_ERR, ADDRESS]


def test_postprocess_nodes_returns_primary_then_refs_and_keeps_stats():
    chunks = users_api()
    lookup = DictLookup(chunks)
    expander = ReferenceExpander(lookup=lookup, max_depth=1)
    nodes = primaries(chunks, POST, POST)
    out = expander.postprocess_nodes(nodes, query_str="create a user")
    assert [n.node.node_id for n in out] == [POST, USER, USER_CREATE, POST_ERR]
    assert out[0] is nodes[0] and out[1].score is None
    assert out[1].node.metadata["depth"] == 1 and out[1].node.metadata["referenced_from"] == POST
    assert "depth" not in out[1].node.get_content(metadata_mode="llm")
    assert expander.last_result is not None and expander.last_result.refs_followed == 3


def test_from_settings_and_serialization():
    settings = Settings(max_depth=2, max_total_chunks=9, context_token_limit=1000, timeout_ms=200,
                        prioritize_primary=False)
    expander = ReferenceExpander.from_settings(DictLookup([]), settings)
    assert (expander.max_depth, expander.max_total_chunks, expander.token_limit, expander.timeout_ms,
            expander.prioritize_primary) == (2, 9, 1000, 200, False)
    assert isinstance(expander.lookup, ChunkLookup)
    assert "lookup" not in expander.to_dict()
