"""Lookup steps: a query that names an entity ("movies directed by Sofia Coppola", the movie
"Twilight") needs the API's search endpoint first, to turn the name into the id that its
other endpoints take (``{person_id}``, ``{movie_id}``). Plain retrieval rarely ranks those
search endpoints, because the query describes the goal, not the lookup.

When the query names an entity, the search endpoints of the top hit's API are scored:
- their resource is a word of the query (``/search/movie`` for "movies ...");
- their resource is an id that the top hits need (``/movie/{movie_id}/credits`` needs a movie id);
- the entity looks like a person's name and their resource is a kind of person.
The best ``max_added`` are placed right after the top hit, each followed by the call that
consumes its id (the best-ranked endpoint of the API that takes it: ``/search/person`` ->
``/person/{person_id}/movie_credits``) unless that one is already near the top.
"""

from __future__ import annotations

import re
from typing import Any, Callable, NamedTuple, Optional

from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from pipeline.analysis import query_terms as stem_terms
from pipeline.catalog.models import ApiIndex
from pipeline.specs.ids import operation_chunk_id, parse_operation_id
from pipeline.stages.query import SpecQuery
from pipeline.stages.results import ADDED_STEP

LOOKUP_WORDS = {"search", "find", "lookup", "query"}
PERSON_WORDS = {"person", "people", "user", "member", "author", "artist", "actor", "customer", "contact",
                "employee", "player", "owner", "creator"}
_PERSON_STEMS = set(stem_terms(" ".join(PERSON_WORDS)))
_QUOTED = re.compile(r"[\"“”]([^\"“”]{2,80})[\"“”]")
_CONNECTORS = {"of", "the", "and", "de", "von", "van", "la", "in"}
_NOT_NAMES = {"I", "I'm", "I've", "I'd", "API", "ID", "OK"}
_PARAM = re.compile(r"\{([^}]+)\}")


class Entity(NamedTuple):
    text: str
    person_like: bool


class LookupEndpoint(NamedTuple):
    chunk_id: str
    resource: frozenset[str]


def named_entities(query: str) -> list[Entity]:
    """Quoted titles, and runs of capitalised words not at a sentence start ("I" excluded)."""
    found = [Entity(m.group(1).strip(" .,"), False) for m in _QUOTED.finditer(query)]
    for sentence in re.split(r"(?<=[.!?])\s+", _QUOTED.sub(" , ", query)):
        words = [w.strip(",;:?!().") for w in sentence.split()][1:]  # a first word is capitalised anyway
        run: list[str] = []
        for word in [*words, ""]:
            if word[:1].isupper() and word not in _NOT_NAMES:
                run.append(word)
            elif run and word.lower() in _CONNECTORS:
                run.append(word)
            else:
                while run and run[-1].lower() in _CONNECTORS:
                    run.pop()
                if run:
                    found.append(_entity(run))
                run = []
    return found


def _entity(words: list[str]) -> Entity:
    words = [w.rstrip("'’s").rstrip("'’") if w.endswith(("'s", "’s")) else w for w in words]
    person = 2 <= len(words) <= 3 and all(w[:1].isupper() for w in words) and words[0] not in ("The", "A") \
        and not any(ch.isdigit() for w in words for ch in w)
    return Entity(" ".join(words), person)


def lookup_endpoints(file_id: str, index: ApiIndex) -> list[LookupEndpoint]:
    """GET endpoints that search: a search/find/lookup path segment or operationId."""
    out = []
    for ep in index.endpoints:
        if "GET" not in ep.methods:
            continue
        segments = [s.lower() for s in ep.path.strip("/").split("/") if s and not s.startswith("{")]
        op_words = " ".join(ep.operation_ids).lower()
        if not (LOOKUP_WORDS & set(segments) or any(w in op_words for w in LOOKUP_WORDS)):
            continue
        resource = frozenset(stem_terms(" ".join(s for s in segments if s not in LOOKUP_WORDS))) - \
            set(stem_terms(" ".join(LOOKUP_WORDS)))
        out.append(LookupEndpoint(operation_chunk_id(file_id, ep.path, "get"), resource))
    return out


def needed_resources(chunk_ids: list[str]) -> set[str]:
    """Stems of the resources whose ids these endpoints take: ``{movie_id}`` -> movi."""
    needed: set[str] = set()
    for chunk_id in chunk_ids:
        op = parse_operation_id(chunk_id)
        if op is None:
            continue
        for param in _PARAM.findall(op[1]):
            name = re.sub(r"(_?id|Id|ID)$", "", param)
            needed |= set(stem_terms(name)) if name else set()
    return needed


class LookupStepAdder(BaseNodePostprocessor):
    """Reorders a ranking (hits of one query), placing lookup steps after the top hit. Added nodes
    carry their reason in ``metadata["added_step"]``."""

    load_index: Any = Field(exclude=True, description="file_id -> ApiIndex | None")
    hydrate: Any = Field(None, exclude=True, description="stub hits -> full nodes (the store's hydrate)")
    retriever: Any = Field(None, exclude=True, description="ranks one API's endpoints for the follow-ups")
    max_added: int = Field(2, description="lookup endpoints added at most")
    top_hits: int = Field(3, description="hits whose id parameters a lookup may resolve")
    _cache: dict = PrivateAttr(default_factory=dict)

    @classmethod
    def class_name(cls) -> str:
        return "LookupStepAdder"

    def _postprocess_nodes(self, nodes: list[NodeWithScore],
                           query_bundle: Optional[QueryBundle] = None) -> list[NodeWithScore]:
        if query_bundle is None or not nodes:
            return nodes
        question = query_bundle.question if isinstance(query_bundle, SpecQuery) else query_bundle.query_str

        def search_api(api: str) -> list[str]:
            narrowed = SpecQuery(query_str=query_bundle.query_str, custom_embedding_strs=[question],
                                 file_ids=[api], types=["endpoint"], top_k=30, hydrate=False)
            return [n.node.node_id for n in self.retriever.retrieve(narrowed)]

        depth = (query_bundle.top_k if isinstance(query_bundle, SpecQuery) else None) or len(nodes)
        out, added = self.add(question, nodes, self.hydrate or (lambda hits: hits), depth,
                              search_api if self.retriever is not None else None)
        marked = set(added)
        return [_marked(n, "a lookup step: the question names something this call finds, or uses what it finds")
                if n.node.node_id in marked else n for n in out]

    def _lookups(self, file_id: str) -> list[LookupEndpoint]:
        if file_id not in self._cache:  # a race only computes the same list twice
            index = self.load_index(file_id)
            self._cache[file_id] = lookup_endpoints(file_id, index) if index else []
        return self._cache[file_id]

    def _scored(self, query: str, ranked_ids: list[str]) -> list[LookupEndpoint]:
        entities = named_entities(query)
        if not entities or not ranked_ids:
            return []
        api = ranked_ids[0].split(":", 1)[0]
        query_stems = set(stem_terms(query))
        needed = needed_resources(ranked_ids[: self.top_hits])
        person = any(e.person_like for e in entities)
        scored = []
        for rank, lookup in enumerate(self._lookups(api)):
            score = 2 * bool(lookup.resource & query_stems) + bool(lookup.resource & needed) + \
                2 * bool(person and lookup.resource & _PERSON_STEMS)
            if score:
                scored.append((-score, rank, lookup))
        return [lookup for _, _, lookup in sorted(scored)[: self.max_added]]

    def follow_ups(self, lookups: list[LookupEndpoint], api_ranking: list[str], taken: set[str]) -> dict[str, str]:
        """lookup id -> the best-ranked endpoint (in ``api_ranking``) that takes its resource's id."""
        out: dict[str, str] = {}
        for lookup in lookups:
            for chunk_id in api_ranking:
                if chunk_id not in taken and lookup.resource & needed_resources([chunk_id]):
                    out[lookup.chunk_id] = chunk_id
                    taken = taken | {chunk_id}
                    break
        return out

    def add(self, query: str, ranked: list[NodeWithScore], hydrate: Callable[[list[NodeWithScore]], list[NodeWithScore]],
            depth: int, search_api: Callable[[str], list[str]] | None = None) -> tuple[list[NodeWithScore], list[str]]:
        """The ranking with lookups (and their follow-up calls) right after the top hit; an
        endpoint already ranked is moved up, not repeated. ``search_api(api)`` ranks one API's
        endpoints for the query (for the follow-ups)."""
        ranked_ids = [n.node.node_id for n in ranked]
        lookups = self._scored(query, ranked_ids)
        if not lookups:
            return ranked, []
        near_top = set(ranked_ids[: self.top_hits + 1])
        follow = self.follow_ups(lookups, search_api(ranked_ids[0].split(":", 1)[0]), near_top | {l.chunk_id for l in lookups}) \
            if search_api else {}
        added = list(dict.fromkeys(i for l in lookups for i in (l.chunk_id, follow.get(l.chunk_id)) if i))
        present = {n.node.node_id: n for n in ranked}
        score = ranked[0].score
        new = {n.node.node_id: n for n in hydrate(
            [NodeWithScore(node=TextNode(id_=i, text=""), score=score) for i in added if i not in present])}
        inserted = [present.get(i) or new.get(i) for i in added]
        inserted = [n for n in inserted if n is not None and n.node.node_id != ranked_ids[0]]
        moved = {n.node.node_id for n in inserted}
        rest = [n for n in ranked[1:] if n.node.node_id not in moved]
        return [ranked[0], *inserted, *rest][:depth], [n.node.node_id for n in inserted]


def _marked(hit: NodeWithScore, reason: str) -> NodeWithScore:
    node = hit.node.model_copy(update={"metadata": {**hit.node.metadata, ADDED_STEP: reason}})
    node.excluded_embed_metadata_keys = [*hit.node.excluded_embed_metadata_keys, ADDED_STEP]
    node.excluded_llm_metadata_keys = [*hit.node.excluded_llm_metadata_keys, ADDED_STEP]
    return NodeWithScore(node=node, score=hit.score)
