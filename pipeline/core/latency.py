"""One percentile and one latency summary, for the eval, the benchmarks and the ingest report."""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import BaseModel, Field


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100), linear between closest ranks (numpy's default); 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    low, high = math.floor(pos), math.ceil(pos)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


class Latency(BaseModel):
    """Milliseconds of a set of timed calls, rounded to 0.01 ms."""

    p50: float = 0.0
    p95: float = 0.0
    p99: float = 0.0
    mean: float = 0.0
    max: float = 0.0
    n: int = Field(0, description="timed calls")

    @classmethod
    def of(cls, values: Sequence[float]) -> "Latency":
        if not values:
            return cls()
        return cls(p50=round(percentile(values, 50), 2), p95=round(percentile(values, 95), 2),
                   p99=round(percentile(values, 99), 2), mean=round(sum(values) / len(values), 2),
                   max=round(max(values), 2), n=len(values))
