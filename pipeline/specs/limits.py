"""Bounds on reading one spec: every spec file is treated as hostile.

A spec may only cost so many bytes, values (a YAML alias counts again at every use, so a
"billion laughs" document is refused before it is expanded), nesting levels, alias uses and
seconds. The values come from ``Settings`` (``SPECRAG_SPEC_*``); ingest workers get them as
this small picklable model.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from specrag.core.errors import SpecError
from specrag.core.settings import Settings


class SpecLimits(BaseModel):
    model_config = ConfigDict(frozen=True)

    max_bytes: int
    timeout_s: float
    max_nodes: int
    max_depth: int
    max_aliases: int

    @classmethod
    def from_settings(cls, settings: Settings | None = None) -> "SpecLimits":
        s = settings if settings is not None else Settings()
        return cls(max_bytes=s.ingest.spec_max_bytes, timeout_s=s.ingest.spec_timeout_s, max_nodes=s.ingest.spec_max_nodes,
                   max_depth=s.ingest.spec_max_depth, max_aliases=s.ingest.spec_max_aliases)


class BudgetExceeded(SpecError):
    """The spec as a whole is over its value or alias budget: stop reading it (a referenced file
    that is bad in itself is only refused)."""


class ParseBudget:
    """What one spec (all of its files together) may still spend on values and alias uses."""

    def __init__(self, limits: SpecLimits):
        self.limits = limits
        self.nodes = 0
        self.aliases = 0

    def add_nodes(self, n: int) -> None:
        self.nodes += n
        if self.nodes > self.limits.max_nodes:
            raise BudgetExceeded(f"more than {self.limits.max_nodes} values "
                                 "(YAML aliases counted at each use; SPECRAG_SPEC_MAX_NODES)")

    def add_alias(self) -> None:
        self.aliases += 1
        if self.aliases > self.limits.max_aliases:
            raise BudgetExceeded(f"more than {self.limits.max_aliases} YAML alias uses (SPECRAG_SPEC_MAX_ALIASES)")

    def check_depth(self, depth: int) -> None:
        if depth > self.limits.max_depth:
            raise SpecError(self.too_deep())

    def too_deep(self) -> str:
        return f"nested deeper than {self.limits.max_depth} levels (SPECRAG_SPEC_MAX_DEPTH)"
