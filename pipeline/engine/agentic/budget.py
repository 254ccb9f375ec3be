"""The budgets of one agentic request, checked before every step."""

from __future__ import annotations

import time
from typing import Callable

from specrag.core.api_models import AgenticRetrievalRequest

CONTEXT_SHARE = 0.7  # the context may use 70% of token_budget; the rest is left for the answer


class Budget:
    """Steps taken, context tokens admitted, time spent; ``stop`` names the first one exhausted."""

    def __init__(self, request: AgenticRetrievalRequest, clock: Callable[[], float] = time.perf_counter):
        self.max_steps = request.max_steps
        self.token_budget = request.token_budget
        self.context_cap = int(request.token_budget * CONTEXT_SHARE)
        self.max_latency_ms = request.max_latency_ms
        self.clock, self.start = clock, clock()
        self.steps = 0
        self.context_tokens = 0
        self.llm_tokens = 0
        self.exhausted: str | None = None
        self.cut = False  # a chunk did not fit the context share

    def elapsed_ms(self) -> float:
        return (self.clock() - self.start) * 1000

    def allows_step(self) -> bool:
        """Checked before a step: False (and ``exhausted`` set) when any budget is used up."""
        if self.exhausted is None:
            if self.steps >= self.max_steps:
                self.exhausted = "max_steps"
            elif self.elapsed_ms() >= self.max_latency_ms:
                self.exhausted = "max_latency_ms"
            elif self.context_tokens >= self.context_cap:
                self.exhausted = "token_budget"
            elif self.context_tokens + self.llm_tokens >= self.token_budget:
                self.exhausted = "token_budget"
        return self.exhausted is None

    def admits(self, n_tokens: int, limit: int | None = None) -> bool:
        """Room for ``n_tokens`` more context (within ``limit`` total, default the 70% cap); a
        chunk that does not fit is cut, and the response says ``token_budget``."""
        if self.context_tokens + n_tokens > min(self.context_cap, limit if limit is not None else self.context_cap):
            self.cut = True
            return False
        self.context_tokens += n_tokens
        return True

    def reason(self) -> str | None:
        """Why the response is partial: the budget that stopped a step, else a cut chunk's."""
        return self.exhausted or ("token_budget" if self.cut else None)

    @property
    def total_tokens(self) -> int:
        return self.context_tokens + self.llm_tokens
