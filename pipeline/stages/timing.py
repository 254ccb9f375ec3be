"""Stage timing: every stage result carries its own wall time."""

from __future__ import annotations

import time


def elapsed_ms(start: float) -> float:
    """Milliseconds since ``start`` (a ``time.perf_counter()`` reading)."""
    return round((time.perf_counter() - start) * 1000, 3)
