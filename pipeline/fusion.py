"""Weighted reciprocal rank fusion (Cormack et al. 2009): ``score(d) = sum_i w_i / (k + rank_i(d))``.

One implementation for every fusion here: chunk rankings in stage 3, API rankings in stage 1.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TypeVar

K = TypeVar("K", bound=Hashable)
DEFAULT_K = 60


def weighted_rrf(rankings: Sequence[tuple[Sequence[K | None], float]], k: int = DEFAULT_K) -> list[tuple[K, float]]:
    """(item, fused score), best first; ties broken by the item itself so output is stable.
    An item repeated within one ranking counts at its first (best) rank only; a ``None`` entry
    holds a rank without an item (a ranking with some items taken out keeps its ranks)."""
    if k < 0:
        raise ValueError(f"RRF k must be >= 0, got {k}")
    scores: dict[K, float] = {}
    for ranking, weight in rankings:
        seen: set[K] = set()
        for rank, item in enumerate(ranking, start=1):
            if item is not None and item not in seen:
                seen.add(item)
                scores[item] = scores.get(item, 0.0) + weight / (k + rank)
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))
