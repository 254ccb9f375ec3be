"""The engine's stats from typed stage results, and render_markdown, over a real expansion of a tiny users API."""

from __future__ import annotations

from llama_index.core.schema import NodeWithScore
from specrag.context.knowledge import CutRef, KnowledgeContext, RetrievalStats
from specrag.context.nodes import chunk_to_node
from specrag.core.records import (
    AddedStep,
    ApiSelection,
    Fallback,
    LLMCall,
    QueryExpansion,
    ReferenceExpansion,
    SearchResult,
    StageMode,
)
from specrag.engine.markdown import describe, render_markdown
from specrag.engine.query_engine import retrieval_stats
from specrag.specs.models import Chunk, ChunkType
from specrag.stages.ref_expand import ReferenceExpander

POST = "users:paths/~1users/post"
USER = "users:components/schemas/User"
ADDRESS = "users:components/schemas/Address"
ERRORS = POST + ":errors"
USER_YAML = "type: object\nproperties:\n  address:\n    $ref: '#/components/schemas/Address'\n"


class DictLookup:
    def __init__(self, chunks: list[Chunk]):
        self.chunks = {c.id: c for c in chunks}

    def get_chunks(self, ids: list[str]) -> dict[str, Chunk]:
        return {i: self.chunks[i] for i in ids if i in self.chunks}


def _chunks() -> list[Chunk]:
    common = {"file_id": "users", "embed_text": "", "search_text": "", "n_tokens": 30}
    return [
        Chunk(id=POST, type=ChunkType.ENDPOINT, kind="operation", method="POST", path="/users",
              text="summary: Create a user\nrequestBody:\n  $ref: '#/components/schemas/User'\n",
              ref_ids={USER: ["#/requestBody"], ERRORS: []}, **common),
        Chunk(id=USER, type=ChunkType.COMPONENT, kind="schemas", name="User", text=USER_YAML,
              ref_ids={ADDRESS: ["#/properties/address"]}, **common),
        Chunk(id=ERRORS, type=ChunkType.ERRORS, kind="errors", method="POST", path="/users",
              text="'422':\n  description: \"```not a fence```\"\n", **common),
        Chunk(id=ADDRESS, type=ChunkType.COMPONENT, kind="schemas", name="Address",
              text="type: object\n", ref_ids={"users:components/schemas/Country": []}, **common),
    ]


QUERY = "how do I create a user?"


def _selection() -> ApiSelection:
    selection = ApiSelection(selected_apis=["users"], reasoning="keyword", ms=1.5)
    selection.fall_back("no_llm")
    return selection


def _context(max_depth: int = 1) -> KnowledgeContext:
    chunks = _chunks()
    expansion = ReferenceExpander(lookup=DictLookup(chunks), max_depth=max_depth).follow_references(
        [NodeWithScore(node=chunk_to_node(chunks[0]), score=0.0325)])
    stats = retrieval_stats([], _selection(), QueryExpansion(expanded_query=QUERY), SearchResult(ranking=[POST]),
                            expansion)
    return KnowledgeContext(query=QUERY, primary_chunks=expansion.primary, referenced_chunks=expansion.referenced,
                            total_tokens=expansion.total_tokens, retrieval_stats=stats)


def test_stats_come_from_every_stage_result():
    ctx = _context()
    stats = ctx.retrieval_stats
    assert [c.id for c in ctx.primary_chunks] == [POST]
    assert [c.id for c in ctx.referenced_chunks] == [USER, ERRORS]
    assert [c.id for c in ctx.chunks] == [POST, USER, ERRORS]
    assert ctx.total_tokens == 90 and stats.refs_followed == 2
    assert stats.refs_cut == [CutRef(id=ADDRESS, referenced_from=USER, depth=2, reason="depth")]
    assert stats.limits_hit == ["depth"] and stats.truncated is True and stats.truncated_reason == "depth"  # a cut is a truncation
    assert stats.selected_apis == ["users"] and stats.selection_reasoning == "keyword"
    assert stats.ranking == [POST] and stats.mode == "offline" and stats.timings_ms["select"] == 1.5


def test_stats_of_an_llm_run_name_calls_prompts_fallbacks_and_steps():
    call = LLMCall(stage="select", model="m", prompt_name="select_apis", prompt_hash="h", prompt_tokens=9)
    selection = ApiSelection(mode=StageMode.LLM, selected_apis=["users"], prompt="select_apis@h", llm_calls=[call],
                             dropped_ids=["ghost"], cache_hits=1, warnings=["w1"])
    expansion = QueryExpansion(stage="expand", mode=StageMode.LLM, expanded_query="q more", added_terms=["more"],
                               dropped_terms=["nope"], fallbacks=[Fallback(stage="expand", reason="timeout")])
    search = SearchResult(ranking=[POST], intent="endpoint", type_filter_relaxed=True, search_mode="lexical",
                          added_steps=[AddedStep(chunk_id=POST, reason="r")])
    refs = ReferenceExpansion(refs_missing=["users:components/schemas/Ghost"], truncated=True, limits_hit=["timeout"])
    stats = retrieval_stats(["cut"], selection, expansion, search, refs)
    assert stats.mode == "llm" and stats.search_mode == "lexical" and stats.prompts == {"select": "select_apis@h"}
    assert stats.llm_calls == [call] and stats.cache_hits == 1 and stats.dropped_api_ids == ["ghost"]
    assert stats.dropped_terms == ["nope"] and [(f.stage, f.reason) for f in stats.fallbacks] == [("expand", "timeout")]
    assert stats.lookup_steps == [POST] and stats.intent == "endpoint" and stats.type_filter_relaxed
    assert stats.truncated and stats.refs_missing == ["users:components/schemas/Ghost"]
    assert stats.warnings == ["cut", "w1"] and stats.expanded_query == "q more"


def test_markdown_has_sections_ids_and_yaml():
    md = render_markdown(_context(max_depth=3))
    assert md.startswith("# Context for: how do I create a user?\n")
    assert "APIs: `users`" in md
    primary, referenced = md.index("## Primary"), md.index(f"## Referenced (depth 1, from `{POST}`)")
    depth2 = md.index(f"## Referenced (depth 2, from `{USER}`)")
    assert primary < referenced < depth2
    assert f"### 1. `{POST}` — endpoint · POST /users" in md
    assert f"### `{USER}` — component · schemas User" in md
    assert f"### `{ERRORS}` — errors · POST /users" in md
    assert f"```yaml\n{USER_YAML}```" in md
    assert "score 0.0325 · 30 tokens" in md
    assert "````yaml\n'422':" in md  # the fence outgrows backticks inside the text
    footer = md.rstrip().splitlines()[-1]
    assert footer.startswith("Stats: 120 tokens")
    assert "refs followed 3, missing 1, cut 0" in footer  # Country is missing at depth 3
    assert "fallbacks: select/no_llm" in footer and "truncated: no" in footer


def test_markdown_of_empty_context_and_cut_summary():
    ctx = KnowledgeContext(query="nothing", retrieval_stats=RetrievalStats(
        refs_cut=[CutRef(id="a:b", referenced_from="a:c", depth=4, reason="depth")], truncated=True))
    md = render_markdown(ctx)
    assert "APIs: none selected" in md and "_No matching chunks._" in md
    assert "cut 1 (depth: 1)" in md and "truncated: yes" in md and "## Referenced" not in md


def test_describe_falls_back_to_type():
    ctx = _context()
    assert describe(ctx.referenced_chunks[0]) == "component · schemas User"
    assert describe(ctx.primary_chunks[0].model_copy(update={"metadata": {}})) == "chunk"


def test_json_round_trip():
    ctx = _context(max_depth=2)
    again = KnowledgeContext.model_validate_json(ctx.to_json())
    assert again == ctx
    assert again.referenced_chunks[0].referenced_from == POST
    assert again.retrieval_stats.fallbacks[0].reason == "no_llm"
