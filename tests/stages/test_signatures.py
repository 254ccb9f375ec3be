"""The signature tier: ranked operations that are not primaries reach the context as signatures,
in rank order, within the budget the expansion left (``specrag.stages.signatures``), rendered from
the chunk's own fields (``specrag.specs.signature``)."""

from __future__ import annotations

from specrag.context.knowledge import KnowledgeContext
from specrag.core.records import ContextChunk, ReferenceExpansion
from specrag.core.tokens import count_tokens
from specrag.engine.markdown import render_markdown
from specrag.graph.models import ParamNeed
from specrag.specs.models import Chunk, ChunkType
from specrag.specs.signature import operation_signature
from specrag.stages.signatures import SignatureTier

GET = "pets:paths/~1pets~1{petId}/get"
LIST = "pets:paths/~1pets/get"
DELETE = "pets:paths/~1pets~1{petId}/delete"
PET = "pets:components/schemas/Pet"
OTHER = "shop:paths/~1orders/get"
OTHER_2 = "shop:paths/~1carts/get"


def operation(cid: str, method: str, path: str, op_id: str, summary: str = "", params=(), refs=()) -> Chunk:
    return Chunk(id=cid, file_id="pets", type=ChunkType.ENDPOINT, kind="operation", method=method, path=path,
                 operation_id=op_id, summary=summary, text=f"{method} {path}", embed_text="", search_text="",
                 params=list(params), ref_ids={r: ["#/x"] for r in refs})


CHUNKS = {
    GET: operation(GET, "GET", "/pets/{petId}", "getPet", "Find a pet by its id",
                   [ParamNeed(name="petId", location="path", required=True)], [PET, "pets:components/securitySchemes/key", GET + ":errors"]),
    LIST: operation(LIST, "GET", "/pets", "listPets", "List pets", [ParamNeed(name="limit", location="query")], [PET]),
    DELETE: operation(DELETE, "DELETE", "/pets/{petId}", "deletePet", "",
                      [ParamNeed(name="petId", location="path", required=True)]),
    OTHER: Chunk(id=OTHER, file_id="shop", type=ChunkType.ENDPOINT, kind="operation", method="GET", path="/orders",
                 operation_id="listOrders", text="GET /orders", embed_text="", search_text=""),
    OTHER_2: Chunk(id=OTHER_2, file_id="shop", type=ChunkType.ENDPOINT, kind="operation", method="GET", path="/carts",
                   operation_id="listCarts", text="GET /carts", embed_text="", search_text=""),
    PET: Chunk(id=PET, file_id="pets", type=ChunkType.COMPONENT, kind="schemas", name="Pet", text="Pet: object",
               embed_text="", search_text=""),
}


class DictLookup:
    def __init__(self):
        self.calls: list[list[str]] = []

    def get_chunks(self, ids: list[str]) -> dict[str, Chunk]:
        self.calls.append(list(ids))
        return {i: CHUNKS[i] for i in ids if i in CHUNKS}


def expansion(*primary: str, tokens: int = 100) -> ReferenceExpansion:
    return ReferenceExpansion(primary=[ContextChunk(id=p, text="x", metadata={}, n_tokens=tokens) for p in primary],
                              total_tokens=tokens * len(primary))


def test_a_signature_names_the_call_its_parameters_and_what_it_uses():
    assert operation_signature(CHUNKS[GET]) == (
        "# GET /pets/{petId}  (getPet) — Find a pet by its id [signature]\n"
        "params: petId (path, required)\n"
        "uses: Pet, key")
    assert operation_signature(CHUNKS[DELETE]) == "# DELETE /pets/{petId}  (deletePet) [signature]\nparams: petId (path, required)"
    assert operation_signature(CHUNKS[PET]) == ""  # a component has no signature


def test_ranked_operations_beyond_the_primaries_get_signatures_in_rank_order():
    tier = SignatureTier(lookup=DictLookup(), depth=10, token_limit=4000)
    out = tier.signatures([GET, PET, LIST, GET + ":errors", DELETE], expansion(GET))
    assert [c.id for c in out] == [LIST, DELETE]  # the primary, a component and an errors chunk are skipped
    assert all(c.compact and c.n_tokens == count_tokens(c.text) for c in out)


def test_signatures_stop_at_the_depth_and_fit_the_budget_left():
    assert [c.id for c in SignatureTier(lookup=DictLookup(), depth=2).signatures([GET, LIST, DELETE], expansion())] \
        == [GET, LIST]
    list_tokens = count_tokens(operation_signature(CHUNKS[LIST]))
    tier = SignatureTier(lookup=DictLookup(), depth=10, token_limit=100 + list_tokens)
    # GET's signature does not fit what is left; LIST's does, first fit goes on to it
    assert [c.id for c in tier.signatures([GET, LIST, DELETE], expansion(PET, tokens=100))] == [LIST]
    assert SignatureTier(lookup=DictLookup(), depth=0).signatures([GET], expansion()) == []


def test_the_context_counts_and_shows_its_signatures():
    tier = SignatureTier(lookup=DictLookup(), depth=10, token_limit=4000)
    refs = expansion(GET)
    signatures = tier.signatures([GET, LIST], refs)
    ctx = KnowledgeContext.assemble("find a pet", refs, signatures)
    assert ctx.total_tokens == 100 + signatures[0].n_tokens
    assert [c.id for c in ctx.chunks] == [GET, LIST]
    text = render_markdown(ctx)
    assert "## Also ranked" in text and "GET /pets  (listPets) — List pets [signature]" in text
    assert text.index("## Primary") < text.index("## Also ranked")


def test_apis_stage_1_did_not_select_get_at_most_their_best_ranked_signatures():
    tier = SignatureTier(lookup=DictLookup(), depth=10, token_limit=4000, other_api_limit=1)
    ranked = [GET, LIST, OTHER, DELETE, OTHER_2]
    assert [c.id for c in tier.signatures(ranked, expansion(GET), ["pets"])] == [LIST, OTHER, DELETE]  # the best one
    assert [c.id for c in tier.signatures(ranked, expansion(GET), ["pets", "shop"])] == [LIST, OTHER, DELETE, OTHER_2]
    assert [c.id for c in tier.signatures(ranked, expansion(GET))] == [LIST, OTHER, DELETE, OTHER_2]  # no selection
    assert [c.id for c in SignatureTier(lookup=DictLookup(), other_api_limit=0).signatures(ranked, expansion(GET), ["pets"])] \
        == [LIST, DELETE]
    # a primary's API is in scope too: the top hit came from the fleet, its neighbours follow it
    tier0 = SignatureTier(lookup=DictLookup(), other_api_limit=0)
    assert [c.id for c in tier0.signatures(ranked, expansion(OTHER), ["pets"])] == [GET, LIST, DELETE, OTHER_2]
    assert [c.id for c in SignatureTier(lookup=DictLookup()).signatures(ranked, expansion(GET), ["pets"])] \
        == [LIST, OTHER, DELETE, OTHER_2]  # no limit
