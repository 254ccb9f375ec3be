"""ReferenceExpander on a hand-built users API (the seed example) and a dict-backed lookup."""

from __future__ import annotations

import json
import logging
import time

import pytest
from llama_index.core.schema import NodeWithScore, TextNode
from specrag.context.nodes import chunk_to_node
from specrag.core.records import ReferenceExpansion
from specrag.core.settings import Settings
from specrag.core.tokens import count_tokens
from specrag.specs.models import Chunk, ChunkLookup, ChunkType
from specrag.stages.ref_expand import (
    LEVEL_FETCH_FACTOR,
    ExpandedNodes,
    ReferenceExpander,
)

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


def run(*ids: str, chunks: list[Chunk] | None = None, **limits) -> tuple[ReferenceExpansion, DictLookup]:
    """Most tests pin the every-primary-kept policy (``closure_first=False``); the closure-first
    tests at the end say so."""
    chunks = chunks if chunks is not None else users_api()
    lookup = DictLookup(chunks)
    limits.setdefault("closure_first", False)
    return ReferenceExpander(lookup=lookup, **limits).follow_references(primaries(chunks, *ids)), lookup


def refs(result: ReferenceExpansion) -> list[tuple[str, int, str]]:
    return [(c.id, c.depth, c.referenced_from) for c in result.referenced]


def cuts(result: ReferenceExpansion) -> list[tuple[str, str, int, str]]:
    return [(c.id, c.referenced_from, c.depth, c.reason) for c in result.refs_cut]


def test_full_expansion_is_bfs_with_one_lookup_per_level():
    result, lookup = run(POST)
    # ref_ids keep the spec's order (UserCreate before User), so Address is credited to UserCreate
    assert list(json.loads(chunk_to_node(users_api()[0]).metadata["ref_ids"])) == [USER_CREATE, USER, POST_ERR]
    assert refs(result) == [
        (USER_CREATE, 1, POST), (USER, 1, POST), (POST_ERR, 1, POST),
        (ADDRESS, 2, USER_CREATE), (VALIDATION, 2, POST_ERR), (ERROR, 2, POST_ERR),
        (COUNTRY, 3, ADDRESS),
    ]
    assert lookup.calls == [[USER_CREATE, USER, POST_ERR], [ADDRESS, VALIDATION, ERROR], [COUNTRY]]
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
    with caplog.at_level(logging.WARNING, logger="specrag.stages.ref_expand"):
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
    # 150 tokens for refs: User (200) does not fit, the smaller refs after it do; Error (10) is one too many
    assert refs(result) == [(USER_CREATE, 1, POST), (POST_ERR, 1, POST), (ADDRESS, 2, USER_CREATE),
                            (VALIDATION, 2, POST_ERR)]
    assert cuts(result) == [(USER, POST, 1, "token_limit"), (ERROR, POST_ERR, 2, "token_limit"),
                            (COUNTRY, ADDRESS, 3, "token_limit")]
    assert result.total_tokens == 250 and result.limits_hit == ["token_limit"]


def test_child_of_a_cut_chunk_is_cut_with_the_parents_reason():
    # without UserCreate, Address hangs off User (500 tokens, cut); Address and Country would fit
    chunks = [c for c in users_api(post=100, User=500) if c.id != USER_CREATE]
    result, lookup = run(POST, chunks=chunks, token_limit=400)
    assert lookup.calls == [[USER_CREATE, USER, POST_ERR], [ADDRESS, VALIDATION, ERROR], [COUNTRY]]
    assert result.refs_missing == [USER_CREATE]
    assert refs(result) == [(POST_ERR, 1, POST), (VALIDATION, 2, POST_ERR), (ERROR, 2, POST_ERR)]
    assert cuts(result) == [(USER, POST, 1, "token_limit"), (ADDRESS, USER, 2, "token_limit"),
                            (COUNTRY, ADDRESS, 3, "token_limit")]
    assert result.total_tokens == 130 and result.limits_hit == ["token_limit"]


def test_slots_bind_the_later_hits_but_not_the_best_hits_closure():
    # one slot for references: the best hit (POST) still gets its whole closure within the tokens;
    # the second hit's error responses are cut for slots
    chunks = users_api(post=100, get=100)
    result, _ = run(POST, GET, chunks=chunks, token_limit=4000, max_total_chunks=3, prioritize_primary=False)
    assert {r[2] for r in refs(result)} <= {POST, USER_CREATE, USER, ADDRESS, POST_ERR}
    assert (COUNTRY, 3, ADDRESS) in refs(result) and len(refs(result)) == 7
    assert cuts(result) == [(GET_ERR, GET, 1, "max_chunks")] and result.limits_hit == ["max_chunks"]


def test_primaries_are_kept_even_over_the_token_limit():
    result, _ = run(POST, GET, chunks=users_api(post=3000, get=2000), token_limit=4000, prioritize_primary=False)
    assert [c.id for c in result.primary] == [POST, GET]
    assert result.referenced == [] and result.total_tokens == 5000 and result.limits_hit == ["token_limit"]
    assert cuts(result) == [
        (USER_CREATE, POST, 1, "token_limit"), (USER, POST, 1, "token_limit"), (POST_ERR, POST, 1, "token_limit"),
        (ADDRESS, USER_CREATE, 2, "token_limit"), (VALIDATION, POST_ERR, 2, "token_limit"),
        (ERROR, POST_ERR, 2, "token_limit"), (COUNTRY, ADDRESS, 3, "token_limit"), (GET_ERR, GET, 1, "token_limit"),
    ]


def test_references_keep_forty_percent_of_tokens_over_large_primaries():
    # primaries take 5000 of 4000 tokens; refs still get 40% = 1600: UserCreate + User fill it exactly
    chunks = users_api(post=3000, get=2000, UserCreate=600, User=1000)
    result, _ = run(POST, GET, chunks=chunks, token_limit=4000)
    assert [c.id for c in result.primary] == [POST, GET]
    assert refs(result) == [(USER_CREATE, 1, POST), (USER, 1, POST)]
    assert result.total_tokens == 6600 and result.limits_hit == ["token_limit"]
    assert cuts(result) == [
        (POST_ERR, POST, 1, "token_limit"), (ADDRESS, USER_CREATE, 2, "token_limit"),
        (VALIDATION, POST_ERR, 2, "token_limit"), (ERROR, POST_ERR, 2, "token_limit"),
        (COUNTRY, ADDRESS, 3, "token_limit"), (GET_ERR, GET, 1, "token_limit"),
    ]
    result, _ = run(POST, GET, chunks=chunks, token_limit=4000, prioritize_primary=False)
    assert result.referenced == [] and result.total_tokens == 5000 and len(result.refs_cut) == 8


def test_tokens_are_counted_when_metadata_has_none():
    text = "User:\n  type: object\n  properties:\n    name: {type: string}\n"
    chunks = [chunk(POST, [USER], n_tokens=0, text="post: {}\n"), chunk(USER, [], n_tokens=0, text=text)]
    result, _ = run(POST, chunks=chunks)
    count = count_tokens
    assert result.primary[0].n_tokens == count("post: {}\n")
    assert result.referenced[0].n_tokens == count(text)
    assert result.total_tokens == count("post: {}\n") + count(text)


PING = "users:paths/~1ping/get"


def test_chunk_limit_cuts_the_refs_of_a_hit_below_the_best():
    # PING (no refs) is the best hit, so POST's closure is the one the slot limit binds
    chunks = [chunk(PING), *users_api()]
    result, lookup = run(PING, POST, chunks=chunks, max_total_chunks=5, prioritize_primary=False)
    assert [c.id for c in result.referenced] == [USER_CREATE, USER, POST_ERR]
    assert cuts(result) == [(ADDRESS, USER_CREATE, 2, "max_chunks"), (VALIDATION, POST_ERR, 2, "max_chunks"),
                            (ERROR, POST_ERR, 2, "max_chunks"), (COUNTRY, ADDRESS, 3, "max_chunks")]
    assert result.limits_hit == ["max_chunks"]
    assert lookup.calls == [[USER_CREATE, USER, POST_ERR], [ADDRESS, VALIDATION, ERROR], [COUNTRY]]
    result, _ = run(PING, POST, chunks=chunks, max_total_chunks=4, prioritize_primary=False)  # cut inside a level
    assert [c.id for c in result.referenced] == [USER_CREATE, USER]
    assert cuts(result) == [(POST_ERR, POST, 1, "max_chunks"), (ADDRESS, USER_CREATE, 2, "max_chunks"),
                            (VALIDATION, POST_ERR, 2, "max_chunks"), (ERROR, POST_ERR, 2, "max_chunks"),
                            (COUNTRY, ADDRESS, 3, "max_chunks")]


def _fleet(n: int) -> list[Chunk]:
    """n operations, each referencing three schemas of its own (slots bind all but the first's)."""
    ops = [chunk(f"f:paths/~1op{i}/get", [_t(3 * i + k) for k in range(3)]) for i in range(n)]
    return ops + [chunk(_t(j)) for j in range(3 * n)]


def _t(j: int) -> str:
    return f"f:components/schemas/T{j:02d}"


@pytest.mark.parametrize(("n_primary", "prioritize", "n_refs"), [(8, True, 4), (8, False, 3), (3, True, 7), (10, False, 3)])
def test_sixty_forty_split(n_primary, prioritize, n_refs):
    chunks = _fleet(n_primary)
    result, _ = run(*[c.id for c in chunks[:n_primary]], chunks=chunks, max_total_chunks=10,
                    prioritize_primary=prioritize)
    assert len(result.primary) == n_primary  # primaries always kept
    assert [c.id for c in result.referenced] == [_t(j) for j in range(n_refs)]
    assert [c.id for c in result.refs_cut] == [_t(j) for j in range(n_refs, 3 * n_primary)]
    assert {c.reason for c in result.refs_cut} == {"max_chunks"}


def test_top_hit_closure_comes_before_lower_hits_refs():
    # seed example: POST /users is the top hit of 5; 10 ref slots, 14 refs found
    chunks = users_api() + _fleet(3)
    ops = [f"f:paths/~1op{i}/get" for i in range(3)]
    result, lookup = run(POST, GET, *ops, chunks=chunks, max_total_chunks=15)
    assert lookup.calls == [[USER_CREATE, USER, POST_ERR, GET_ERR] + [_t(j) for j in range(9)],
                            [ADDRESS, VALIDATION, ERROR], [COUNTRY]]
    assert refs(result) == [
        (USER_CREATE, 1, POST), (USER, 1, POST), (POST_ERR, 1, POST), (ADDRESS, 2, USER_CREATE),
        (VALIDATION, 2, POST_ERR), (ERROR, 2, POST_ERR), (COUNTRY, 3, ADDRESS),  # the whole closure
        (GET_ERR, 1, GET), (_t(0), 1, ops[0]), (_t(1), 1, ops[0]),
    ]
    assert cuts(result) == [(_t(j), ops[j // 3], 1, "max_chunks") for j in range(2, 9)]
    assert len(result.primary) + len(result.referenced) == 15 and result.limits_hit == ["max_chunks"]


def _wide(n_ops: int, n_refs: int) -> list[Chunk]:
    """n_ops operations, each referencing n_refs schemas of its own."""
    ops = [chunk(f"w:paths/~1op{i}/get", [_t(n_refs * i + k) for k in range(n_refs)]) for i in range(n_ops)]
    return ops + [chunk(_t(j)) for j in range(n_ops * n_refs)]


@pytest.mark.parametrize("prioritize", [True, False])
def test_level_fetch_cap_cuts_lowest_ranked_roots_first(prioritize):
    cap = 5 * LEVEL_FETCH_FACTOR
    k = cap // 2 + 1  # op0 and most of op1 fit the cap; the rest of op1 and all of op2 do not
    chunks = _wide(3, k)
    ops = [c.id for c in chunks[:3]]
    result, lookup = run(*ops, chunks=chunks, max_total_chunks=5, prioritize_primary=prioritize)
    assert lookup.calls == [[_t(j) for j in range(cap)]]  # one lookup, capped
    # 5 - 3 = 2 slots (40% of 5 is 2 too), which bind op1, not the best hit op0's closure
    assert [c.id for c in result.referenced] == [_t(j) for j in range(k)]
    overflow = [(_t(j), ops[j // k], 1, "max_chunks") for j in range(cap, 3 * k)]
    assert overflow[0][1] == ops[1] and overflow[-1][1] == ops[2]
    admission = [(_t(j), ops[j // k], 1, "max_chunks") for j in range(k, cap)]
    assert cuts(result) == overflow + admission and result.limits_hit == ["max_chunks"]


def test_in_memory_lookup_runs_in_the_callers_thread_and_a_passed_deadline_stops_the_next_level():
    """A lookup that reads memory is called directly (a watcher thread per level cost ~1 ms a
    query); the deadline is still checked before each level: a slow level ends the walk."""
    import threading

    class MemoryLookup(DictLookup):
        in_memory = True

        def get_chunks(self, ids):
            self.threads = [*getattr(self, "threads", []), threading.current_thread()]
            return super().get_chunks(ids)

    lookup = MemoryLookup(users_api(), delays=(0.2,))
    result = ReferenceExpander(lookup=lookup, timeout_ms=100).follow_references(primaries(users_api(), POST))
    assert lookup.threads == [threading.current_thread()]  # one level, in this thread, then out of time
    assert [c.id for c in result.referenced] == [USER_CREATE, USER, POST_ERR]  # the level it finished is kept
    assert result.truncated and (ADDRESS, USER_CREATE, 2, "timeout") in cuts(result)


def test_no_slots_means_no_lookup():
    result, lookup = run(POST, max_total_chunks=0, prioritize_primary=False)
    assert lookup.calls == [] and [c.id for c in result.primary] == [POST] and result.referenced == []
    assert cuts(result) == [(USER_CREATE, POST, 1, "max_chunks"), (USER, POST, 1, "max_chunks"),
                            (POST_ERR, POST, 1, "max_chunks")]


def test_timeout_returns_partial_context():
    lookup = DictLookup(users_api(), delays=(0.0, 0.5))
    expander = ReferenceExpander(lookup=lookup, timeout_ms=150)
    started = time.monotonic()
    result = expander.follow_references(primaries(users_api(), POST))
    assert time.monotonic() - started < 0.45
    assert result.truncated and "timeout" in result.limits_hit
    assert [c.id for c in result.referenced] == [USER_CREATE, USER, POST_ERR]
    assert cuts(result) == [(ADDRESS, USER_CREATE, 2, "timeout"), (VALIDATION, POST_ERR, 2, "timeout"),
                            (ERROR, POST_ERR, 2, "timeout")]
    assert lookup.calls == [[USER_CREATE, USER, POST_ERR], [ADDRESS, VALIDATION, ERROR]]


def test_lookup_errors_propagate():
    class Broken:
        def get_chunks(self, ids):
            raise RuntimeError("store down")

    with pytest.raises(RuntimeError, match="store down"):
        ReferenceExpander(lookup=Broken()).follow_references(primaries(users_api(), POST))


def test_empty_input_and_bad_lookup():
    result, lookup = run()
    assert result.model_copy(update={"ms": 0.0}) == ReferenceExpansion() and lookup.calls == []
    assert ReferenceExpander(lookup=DictLookup([])).postprocess_nodes([]) == []
    with pytest.raises(ValueError, match="get_chunks"):
        ReferenceExpander(lookup=object())


@pytest.mark.parametrize("raw", ["{not json", "[1, 2]", "42", None])
def test_malformed_ref_ids_mean_no_refs(raw):
    metadata = {"type": "endpoint", "n_tokens": 5} | ({"ref_ids": raw} if raw is not None else {})
    node = NodeWithScore(node=TextNode(id_=POST, text="post", metadata=metadata), score=1.0)
    lookup = DictLookup(users_api())
    result = ReferenceExpander(lookup=lookup).follow_references([node])
    assert [c.id for c in result.primary] == [POST] and result.referenced == [] and lookup.calls == []


def test_shared_refs_appear_once_at_smallest_depth():
    result, lookup = run(POST, GET, USER)
    ids = [c.id for c in result.referenced]
    assert len(ids) == len(set(ids)) and USER not in ids  # a primary is never repeated as a ref
    # admission by (root rank, depth): POST's closure, then GET's, then User's (Address at depth 1)
    assert refs(result) == [(USER_CREATE, 1, POST), (POST_ERR, 1, POST), (VALIDATION, 2, POST_ERR),
                            (ERROR, 2, POST_ERR), (GET_ERR, 1, GET), (ADDRESS, 1, USER), (COUNTRY, 2, ADDRESS)]
    assert lookup.calls == [[USER_CREATE, POST_ERR, GET_ERR, ADDRESS], [VALIDATION, ERROR, COUNTRY]]


def test_postprocess_nodes_returns_primary_then_refs_with_the_typed_result():
    chunks = users_api()
    lookup = DictLookup(chunks)
    expander = ReferenceExpander(lookup=lookup, max_depth=1)
    nodes = primaries(chunks, POST, POST)
    out = expander.postprocess_nodes(nodes, query_str="create a user")
    assert [n.node.node_id for n in out] == [POST, USER_CREATE, USER, POST_ERR]
    assert out[0] is nodes[0] and out[1].score is None
    assert out[1].node.metadata["depth"] == 1 and out[1].node.metadata["referenced_from"] == POST
    assert "depth" not in out[1].node.get_content(metadata_mode="llm")
    assert isinstance(out, ExpandedNodes) and out.expansion.refs_followed == 3
    assert [c.id for c in out.expansion.referenced] == [USER_CREATE, USER, POST_ERR]
    assert not hasattr(expander, "last_result") and not hasattr(expander, "_last_result")  # no state kept


def test_from_settings_and_serialization():
    settings = Settings(max_depth=2, max_total_chunks=9, context_token_limit=1000, timeout_ms=200,
                        prioritize_primary=False)
    expander = ReferenceExpander.from_settings(DictLookup([]), settings)
    assert (expander.max_depth, expander.max_total_chunks, expander.token_limit, expander.timeout_ms,
            expander.prioritize_primary) == (2, 9, 1000, 200, False)
    assert isinstance(expander.lookup, ChunkLookup)
    assert "lookup" not in expander.to_dict()


def test_parts_of_split_chunks_come_after_every_roots_dependencies():
    part2, part3 = POST + ":part2", POST + ":part3"
    graph = users_api() + [chunk(part2, n_tokens=10), chunk(part3, n_tokens=10)]
    graph[0] = chunk(POST, [USER_CREATE, part2, part3, POST_ERR])
    result, _ = run(POST, GET, chunks=graph, max_depth=1)
    assert [c.id for c in result.referenced] == [USER_CREATE, POST_ERR, USER, GET_ERR, part2, part3]
    tight, _ = run(POST, GET, chunks=graph, max_depth=1, max_total_chunks=6, prioritize_primary=False)
    assert [c.id for c in tight.referenced] == [USER_CREATE, POST_ERR, USER, GET_ERR]
    assert {(c.id, c.reason) for c in tight.refs_cut if c.reason != "depth"} == {(part2, "max_chunks"), (part3, "max_chunks")}


def test_references_are_shown_compact_and_a_compact_components_parts_are_not_followed():
    part2 = USER + ":part2"
    chunks = [chunk(c.id, list(c.ref_ids) + ([part2] if c.id == USER else []), c.n_tokens) for c in users_api()]
    chunks = [c.model_copy(update={"compact_text": f"# {c.name} [compact]", "compact_tokens": 3})
              if c.id == USER else c for c in chunks] + [chunk(part2, [], 500)]
    result, lookup = run(GET, chunks=chunks)
    user = next(c for c in result.referenced if c.id == USER)
    assert user.compact and user.text == "# User [compact]" and user.n_tokens == 3
    assert "compact_text" not in user.metadata
    assert part2 not in [c for call in lookup.calls for c in call]  # the compact text covers the whole User
    assert not next(c for c in result.referenced if c.id == ADDRESS).compact  # no compact form: full text
    full, lookup = run(GET, chunks=chunks, compact_references=False)
    assert next(c for c in full.referenced if c.id == USER).text.startswith(USER)
    assert part2 in [c.id for c in full.referenced]


def test_closure_first_admits_each_hit_with_its_whole_closure_or_leaves_it_out():
    # POST (100) + its closure (6 x 10) = 160; GET (300) + GET_ERR (10) do not fit the 400 left after
    # PING; PUT (50, no refs) does: a later, smaller hit still gets in
    put = "users:paths/~1users~1{id}/put"
    chunks = [*users_api(post=100, get=300), chunk(put, [], 50)]
    result, _ = run(POST, GET, put, chunks=chunks, token_limit=250, closure_first=True)
    assert [c.id for c in result.primary] == [POST, put]
    assert result.primaries_cut == [GET]
    assert {c.id for c in result.referenced} == {USER_CREATE, USER, POST_ERR, ADDRESS, VALIDATION, ERROR, COUNTRY}
    assert (GET_ERR, GET, 1, "token_limit") in cuts(result)
    assert result.total_tokens == 100 + 70 + 50 and "closure_budget" in result.limits_hit


def test_closure_first_keeps_the_first_hit_and_cuts_its_refs_first_fit():
    result, _ = run(POST, chunks=users_api(post=3000, User=2000), token_limit=3100, closure_first=True)
    assert [c.id for c in result.primary] == [POST] and result.primaries_cut == []
    assert USER not in [c.id for c in result.referenced] and (USER, POST, 1, "token_limit") in cuts(result)
    assert ADDRESS in [c.id for c in result.referenced]  # reached through UserCreate, which fits


def test_closure_first_slots_bind_later_hits_only():
    result, _ = run(POST, GET, chunks=users_api(), max_total_chunks=2, closure_first=True)
    assert [c.id for c in result.primary] == [POST] and len(result.referenced) == 7
    assert result.primaries_cut == [GET] and (GET_ERR, GET, 1, "max_chunks") in cuts(result)


def test_closure_first_postprocess_returns_only_the_kept_primaries():
    chunks = users_api(post=100, get=4000)
    expander = ReferenceExpander(lookup=DictLookup(chunks), token_limit=1000)
    nodes = expander.postprocess_nodes(primaries(chunks, POST, GET))
    ids = [n.node.node_id for n in nodes]
    assert ids[0] == POST and GET not in ids and nodes.expansion.primaries_cut == [GET]
