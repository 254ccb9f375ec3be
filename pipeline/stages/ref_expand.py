"""Reference expansion: follow ``ref_ids`` breadth-first so the context carries every schema,
parameter and error response the retrieved chunks depend on.

The rules, chosen to keep the output deterministic and the best hit complete:

- Primary chunks (the retriever's nodes, deduped by id, in rank order) are always kept, even
  when they alone exceed the token or chunk limit.
- Fetching is breadth-first: depth 1 holds the refs of the primaries, depth 2 their refs, and
  so on, with ONE batched ``lookup.get_chunks`` call per level (at most
  ``LEVEL_FETCH_FACTOR * max_total_chunks`` candidates per level, best roots first; the rest
  are cut ``max_chunks``). Each id is considered once (visited set): cycles end, and a ref
  reachable twice appears once, at its smallest depth, credited to its first referrer. Every
  candidate inherits the *root*: the primary it descends from.
- Admission is by (root rank, depth, discovery order): the top hit's whole closure (within
  ``max_depth``) comes before the second hit's references, so a budget never starves the best
  answer of its deep dependencies (User -> Address -> Country). The top hit's closure is bound
  by tokens only, not by chunk slots: an operation that needs 18 small schemas gets them all.
- References are shown compact (``compact_references``): a component's property names and types,
  one line each, without examples (see ``specrag.specs.compact``); primaries keep their full text.
  A compact component's ``:partN`` chunks are not followed: the compact text covers it whole.
- Parts of split chunks (``:partN``, the rest of a chunk's own text) come after every root's
  dependencies: a second hit's schemas matter more than the tail of the first hit's text.
- A chunk is admitted only if its referrer was: a child of a cut chunk is cut with the same
  reason (never Country without Address).
- Slots: references get ``max_total_chunks - len(primary)`` slots; tokens, ``token_limit``
  minus the primaries' tokens. With ``prioritize_primary`` references get at least 40% of both
  (the 60/40 split), so large primaries cannot squeeze them out; the total may then exceed
  ``token_limit`` and ``limits_hit`` says so. Without it, references only get what is left.
- Tokens, first fit: a reference that would overflow its budget is cut and admission goes on,
  so a smaller reference later in the order may still fit.
- Refs found on chunks at ``max_depth`` are cut with reason ``depth`` without a lookup.
- Missing ids (not returned by the lookup) are counted and logged, never fatal.
- Timeout, from the start of ``expand``: a lookup still running at the deadline is abandoned,
  every pending candidate is cut with reason ``timeout`` and ``truncated`` is set; what was
  fetched before is still admitted. A lookup that says it reads memory (``in_memory``, as the
  store's memory-mapped index does) runs in the caller's thread and is checked against the
  deadline before each level: a watcher thread per level cost ~1 ms per query, 5 % of a query.

Every cut is named in ``refs_cut`` (a ``CutRef``), so nothing is dropped silently.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, NamedTuple, Optional

from llama_index.core.bridge.pydantic import Field
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle
from specrag.context.nodes import context_chunk, context_node
from specrag.core.ids import base_chunk_id
from specrag.core.records import ContextChunk, ReferenceExpansion
from specrag.core.settings import Settings
from specrag.core.tokens import count_tokens
from specrag.specs.models import Chunk, ChunkLookup, decode_ref_ids
from specrag.stages.events import (
    ReferenceExpansionEndEvent,
    ReferenceExpansionStartEvent,
    emit,
)
from specrag.stages.timing import elapsed_ms

logger = logging.getLogger(__name__)

REFERENCE_SHARE = 0.4  # the references' guaranteed share of chunk slots and tokens (60/40 split)
LEVEL_FETCH_FACTOR = 4  # per level, fetch at most this many times max_total_chunks candidates


class _Candidate(NamedTuple):
    id: str
    referenced_from: str
    depth: int


class ReferenceExpander(BaseNodePostprocessor):
    """Adds every chunk the retrieved chunks reference, within depth, slot, token and time limits."""

    lookup: ChunkLookup = Field(exclude=True, description="chunks by id, one batch per level")
    max_depth: int = Field(3, ge=0, description="ref hops followed from a primary chunk")
    max_total_chunks: int = Field(15, ge=0, description="primary plus referenced chunks (primaries always kept)")
    token_limit: int = Field(4000, ge=0, description="token budget for the whole context (primaries always kept)")
    timeout_ms: int = Field(5000, gt=0, description="wall time for the walk; partial context after it")
    prioritize_primary: bool = Field(True, description="reserve at least 40% of the chunk slots for references")
    compact_references: bool = Field(True, description="references in their compact form (names and types)")
    closure_first: bool = Field(True, description="a hit enters with its whole closure or not at all (after the "
                                                  "first); off: every primary kept, references share what is left")

    def __init__(self, lookup: ChunkLookup, **kwargs: Any) -> None:
        if not isinstance(lookup, ChunkLookup):
            raise ValueError("lookup must have a get_chunks(ids) -> dict[str, Chunk] method")
        super().__init__(lookup=lookup, **kwargs)

    @classmethod
    def class_name(cls) -> str:
        return "ReferenceExpander"

    @classmethod
    def from_settings(cls, lookup: ChunkLookup, settings: Settings) -> "ReferenceExpander":
        return cls(lookup=lookup, max_depth=settings.retrieval.max_depth, max_total_chunks=settings.retrieval.max_total_chunks,
                   token_limit=settings.context.context_token_limit, timeout_ms=settings.retrieval.timeout_ms,
                   prioritize_primary=settings.context.prioritize_primary,
                   compact_references=settings.context.compact_references, closure_first=settings.context.closure_first)

    def follow_references(self, primary: list[NodeWithScore]) -> ReferenceExpansion:
        """Primary chunks plus their references, with every limit hit recorded."""
        start = time.perf_counter()
        deadline = time.monotonic() + self.timeout_ms / 1000
        result, visited = ReferenceExpansion(), set()
        for nws in primary:
            if nws.node.node_id not in visited:
                visited.add(nws.node.node_id)
                result.primary.append(_primary_chunk(nws))
        result.total_tokens = sum(c.n_tokens for c in result.primary)
        if result.total_tokens > self.token_limit:
            result.hit("token_limit")
        roots = {c.id: rank for rank, c in enumerate(result.primary)}
        found = self._walk(result, visited, roots, deadline)
        (self._admit_closure_first if self.closure_first else self._admit)(result, found, roots)
        result.refs_followed = len(result.referenced)
        if result.refs_missing:
            logger.warning("%d referenced chunks not found: %s", len(result.refs_missing), result.refs_missing[:5])
        result.ms = elapsed_ms(start)
        return result

    def _walk(self, result: ReferenceExpansion, visited: set[str], roots: dict[str, int],
              deadline: float) -> list[tuple[_Candidate, Chunk]]:
        """Breadth-first fetch, one batched lookup per level; each candidate inherits its parent's root."""
        fetched: list[tuple[_Candidate, Chunk]] = []
        level = _candidates([(c.id, decode_ref_ids(c.metadata.get("ref_ids"))) for c in result.primary], visited, 1)
        cap = self.max_total_chunks * LEVEL_FETCH_FACTOR
        while level:
            if level[0].depth > self.max_depth:
                result.cut(level, "depth")
                break
            level.sort(key=lambda c: roots[c.referenced_from])  # stable: best-ranked roots first
            level, overflow = level[:cap], level[cap:]
            result.cut(overflow, "max_chunks")
            if not level:  # cap 0 (max_total_chunks=0): nothing to look up
                break
            found = _fetch(self.lookup, [c.id for c in level], deadline)
            if found is None:
                result.cut(level, "timeout")
                result.truncated = True
                break
            parents = []
            for cand in level:
                chunk = found.get(cand.id)
                if chunk is None:
                    result.refs_missing.append(cand.id)
                    continue
                roots[cand.id] = roots[cand.referenced_from]
                fetched.append((cand, chunk))
                parents.append((cand.id, _followed_refs(chunk, self.compact_references)))
            level = _candidates(parents, visited, level[0].depth + 1)
        return fetched

    def _admit(self, result: ReferenceExpansion, fetched: list[tuple[_Candidate, Chunk]], roots: dict[str, int]) -> None:
        """Admit by (root rank, depth): the best hit's whole closure before the next hit's refs."""
        slots = self._reference_slots(len(result.primary))
        budget = self._reference_tokens(result.total_tokens)
        admitted = {c.id for c in result.primary}
        cut_reason: dict[str, str] = {}
        used = 0
        for cand, chunk in sorted(fetched, key=lambda fc: (_is_part(fc[0].id), roots[fc[0].id], fc[0].depth)):
            n_tokens = self._tokens(chunk)
            reason = cut_reason.get(cand.referenced_from)  # never a child without its parent
            if reason is None and len(result.referenced) >= slots and (roots[cand.id] > 0 or _is_part(cand.id)):
                reason = "max_chunks"  # the best hit's closure is bound by tokens only
            if reason is None and used + n_tokens > budget:
                reason = "token_limit"
            if reason is not None or cand.referenced_from not in admitted:
                reason = reason or "max_chunks"
                cut_reason[cand.id] = reason
                result.cut([cand], reason)
                continue
            result.referenced.append(self._reference(cand, chunk))
            admitted.add(cand.id)
            used += n_tokens
        result.total_tokens += used

    def _admit_closure_first(self, result: ReferenceExpansion, fetched: list[tuple[_Candidate, Chunk]],
                             roots: dict[str, int]) -> None:
        """Hit 1 and its closure, then hit 2 with its closure if both fit what is left, and so on:
        a hit whose closure does not fit is left out whole (``primaries_cut``), so every hit in the
        context can be used as it stands. The first hit is always kept, its references first fit
        and bound by tokens only; the others also by chunk slots. Split parts come last."""
        closures: dict[int, list[tuple[_Candidate, Chunk]]] = {}
        parts = []
        for cand, chunk in sorted(fetched, key=lambda fc: (roots[fc[0].id], fc[0].depth)):
            (parts if _is_part(cand.id) else closures.setdefault(roots[cand.id], [])).append((cand, chunk))
        primaries, result.primary = result.primary, result.primary[:1]
        used = sum(c.n_tokens for c in result.primary)
        admitted = {c.id for c in result.primary}
        slots = len(result.primary)  # chunks that count against max_total_chunks (not the first closure)
        used, slots = self._first_fit(result, closures.get(0, []), admitted, used, slots, counted=False)
        for rank, primary in enumerate(primaries[1:], start=1):
            closure = closures.get(rank, [])
            need = primary.n_tokens + sum(self._tokens(chunk) for _, chunk in closure)
            reason = ("token_limit" if used + need > self.token_limit else
                      "max_chunks" if slots + 1 + len(closure) > self.max_total_chunks else None)
            if reason:
                result.primaries_cut.append(primary.id)
                result.cut([c for c, _ in closure], reason)
                continue
            result.primary.append(primary)
            result.referenced += [self._reference(cand, chunk) for cand, chunk in closure]
            admitted |= {primary.id, *(c.id for c, _ in closure)}
            used += need
            slots += 1 + len(closure)
        used, slots = self._first_fit(result, parts, admitted, used, slots, counted=True)
        if result.primaries_cut:
            result.hit("closure_budget")
        result.total_tokens = used

    def _first_fit(self, result: ReferenceExpansion, items: list[tuple[_Candidate, Chunk]], admitted: set[str],
                   used: int, slots: int, counted: bool) -> tuple[int, int]:
        """Admit each item whose referrer is in and whose tokens still fit; ``counted`` items also
        take chunk slots (bound by ``max_total_chunks``). Returns the tokens and slots used."""
        for cand, chunk in items:
            n_tokens = self._tokens(chunk)
            over = used + n_tokens > self.token_limit
            if cand.referenced_from not in admitted or over or (counted and slots >= self.max_total_chunks):
                result.cut([cand], "token_limit" if over or not counted else "max_chunks")
                continue
            result.referenced.append(self._reference(cand, chunk))
            admitted.add(cand.id)
            used += n_tokens
            slots += int(counted)
        return used, slots

    def _tokens(self, chunk: Chunk) -> int:
        """A reference's tokens, in the form it is shown (compact when it has one)."""
        if self.compact_references and chunk.compact_text:
            return chunk.compact_tokens or count_tokens(chunk.compact_text)
        return chunk.n_tokens if chunk.n_tokens > 0 else count_tokens(chunk.text)

    def _reference(self, cand: _Candidate, chunk: Chunk) -> ContextChunk:
        compact = self.compact_references and bool(chunk.compact_text)
        metadata = shown_metadata(self.lookup, chunk)
        return ContextChunk(id=cand.id, text=chunk.compact_text if compact else chunk.text, metadata=metadata,
                            n_tokens=self._tokens(chunk), depth=cand.depth, referenced_from=cand.referenced_from,
                            compact=compact)

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: Optional[QueryBundle] = None
    ) -> list[NodeWithScore]:
        """The primaries as given (duplicates dropped), then every admitted reference. The list
        returned is an :class:`ExpandedNodes`: its ``expansion`` is the typed result of this call."""
        emit(lambda: ReferenceExpansionStartEvent(query=query_bundle, nodes=nodes))
        expansion = self.follow_references(nodes)
        by_id: dict[str, NodeWithScore] = {}
        for nws in nodes:
            by_id.setdefault(nws.node.node_id, nws)
        kept = [by_id[c.id] for c in expansion.primary]
        out = ExpandedNodes([*kept, *(context_node(c) for c in expansion.referenced)], expansion)
        emit(lambda: ReferenceExpansionEndEvent(nodes=list(out), expansion=expansion))
        return out

    def _reference_slots(self, n_primary: int) -> int:
        free = max(0, self.max_total_chunks - n_primary)
        if self.prioritize_primary:
            return max(free, int(self.max_total_chunks * REFERENCE_SHARE))
        return free

    def _reference_tokens(self, primary_tokens: int) -> int:
        """Tokens left for references; with ``prioritize_primary`` at least 40% of the limit."""
        free = max(0, self.token_limit - primary_tokens)
        if self.prioritize_primary:
            return max(free, int(self.token_limit * REFERENCE_SHARE))
        return free


class ExpandedNodes(list):
    """``postprocess_nodes``' answer: a plain list of nodes to any pipeline, which also carries
    the call's typed :class:`ReferenceExpansion` (so no state is kept on the expander)."""

    def __init__(self, nodes: list[NodeWithScore], expansion: ReferenceExpansion):
        super().__init__(nodes)
        self.expansion = expansion


def _primary_chunk(nws: NodeWithScore) -> ContextChunk:
    n_tokens = int(nws.node.metadata.get("n_tokens", 0) or 0)
    return context_chunk(nws, n_tokens if n_tokens > 0 else count_tokens(nws.node.get_content()))


def _candidates(parents: list[tuple[str, list[str]]], visited: set[str], depth: int) -> list[_Candidate]:
    """Unvisited refs of ``parents`` (id, its refs), in parent order then ref order; marks them visited."""
    out = []
    for parent_id, ref_ids in parents:
        for ref_id in ref_ids:
            if ref_id not in visited:
                visited.add(ref_id)
                out.append(_Candidate(ref_id, parent_id, depth))
    return out


def _is_part(chunk_id: str) -> bool:
    return base_chunk_id(chunk_id) != chunk_id


def _followed_refs(chunk: Chunk, compact: bool) -> list[str]:
    """A fetched chunk's refs, followed at the next level; a compact one's own parts are not
    (its compact text already names every property of the whole component)."""
    return [r for r in chunk.ref_ids if not (compact and chunk.compact_text and _is_part(r))]


def shown_metadata(lookup: ChunkLookup, chunk: Chunk) -> dict[str, Any]:
    """A fetched chunk's metadata as a context shows it (without the compact text): from the
    lookup's kept copy when it offers one (read-only), else encoded from the chunk."""
    stored = getattr(lookup, "stored_metadata", None)
    kept = stored(chunk.id) if stored is not None else None
    return {k: v for k, v in (kept if kept is not None else chunk.metadata()).items() if k != "compact_text"}


def _fetch(lookup: ChunkLookup, ids: list[str], deadline: float) -> dict[str, Chunk] | None:
    """One batched lookup, abandoned (None) if it is still running at the deadline."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        return None
    if getattr(lookup, "in_memory", False):
        return lookup.get_chunks(ids)
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = lookup.get_chunks(ids)
        except Exception as exc:  # re-raised in the caller's thread
            box["error"] = exc

    worker = threading.Thread(target=run, name="ref-expand-lookup", daemon=True)
    worker.start()
    worker.join(remaining)
    if worker.is_alive():
        return None
    if "error" in box:
        raise box["error"]
    return box["value"]
