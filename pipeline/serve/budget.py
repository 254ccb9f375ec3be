"""Token budgets of the answers the tools give (MCP tools, ``SpecragToolSpec``): the text a
model reads is held to ``token_budget`` cl100k tokens.

An answer is built with a content limit (the context's chunk texts, a plan's contexts, a
definition's text), rendered as markdown and counted. When the rendering's own lines (headings,
fences, the stats line) push it over the budget, it is built again with the content limit cut by
the overshoot, at most ``FIT_BUILDS`` times in all, so what is left out is left out whole and
named (``refs_cut``, a truncated definition) rather than chopped. What still does not fit (a first
operation larger than the budget) is cut at a line (:func:`cut_to_budget`), and says so.

No HTTP here: the MCP server, the HTTP routes and the tool spec share these.
"""

from __future__ import annotations

from typing import Awaitable, Callable, Generic, TypeVar

from specrag.core.api_models import AgenticRetrievalRequest
from specrag.core.errors import SpecragError
from specrag.core.tokens import count_tokens, truncate_tokens

_BUDGET = AgenticRetrievalRequest.model_fields["token_budget"].metadata
TOKEN_BUDGET_MIN = next(m.ge for m in _BUDGET if hasattr(m, "ge"))
TOKEN_BUDGET_MAX = next(m.le for m in _BUDGET if hasattr(m, "le"))
FIT_BUILDS = 3
CUT_REASON = "token_budget"  # truncated_reason when the text itself was cut at a line to fit
CUT_NOTE = "_[cut here to the token budget of {budget} tokens: {lines} more lines; ask with a larger token_budget]_"

T = TypeVar("T")


class BudgetError(SpecragError, ValueError):
    """A token budget outside the range every surface accepts."""


def within_budget(engine, token_budget: int | None):
    """``engine``, or a shallow copy of it whose context (references and signatures) is built within
    ``token_budget`` cl100k tokens instead of the server's ``context_token_limit``."""
    if token_budget is None:
        return engine
    update = {"references": engine.references.model_copy(update={"token_limit": token_budget})}
    if engine.signatures is not None:
        update["signatures"] = engine.signatures.model_copy(update={"token_limit": token_budget})
    return engine.model_copy(update=update)


def check_budget(token_budget: int) -> int:
    """The budget, or a one-line BudgetError when it is outside the range every surface accepts."""
    if isinstance(token_budget, bool) or not isinstance(token_budget, int) \
            or not TOKEN_BUDGET_MIN <= token_budget <= TOKEN_BUDGET_MAX:
        raise BudgetError(f"token_budget must be a whole number of tokens from {TOKEN_BUDGET_MIN} to "
                         f"{TOKEN_BUDGET_MAX}, not {token_budget!r}")
    return token_budget


class Fitted(Generic[T]):
    """What was built, its markdown (within the budget), the markdown's tokens, and whether the text
    had to be cut at a line to fit."""

    def __init__(self, found: T, markdown: str, tokens: int, cut: bool):
        self.found, self.markdown, self.tokens, self.cut = found, markdown, tokens, cut


def fit(build: Callable[[int], T], render: Callable[[T], str], budget: int) -> Fitted[T]:
    """``build(limit)`` then ``render``, rebuilt with a smaller limit while the text is over ``budget``."""
    limit, best = budget, None
    for _ in range(FIT_BUILDS):
        found = build(limit)
        markdown = render(found)
        best, limit = _step(best, found, markdown, limit, budget)
        if limit is None:
            break
    return _finish(best, budget)


async def afit(build: Callable[[int], Awaitable[T]], render: Callable[[T], str], budget: int) -> Fitted[T]:
    """:func:`fit` for a build that is awaited."""
    limit, best = budget, None
    for _ in range(FIT_BUILDS):
        found = await build(limit)
        markdown = render(found)
        best, limit = _step(best, found, markdown, limit, budget)
        if limit is None:
            break
    return _finish(best, budget)


def fixed(found: T, render: Callable[[T], str], budget: int) -> Fitted[T]:
    """What cannot be built smaller (a list, a report): rendered once, cut at a line when over ``budget``."""
    markdown = render(found)
    return _finish((found, markdown, count_tokens(markdown)), budget)


def _step(best, found, markdown: str, limit: int, budget: int):
    """(the best build so far, the next limit to try or None to stop)."""
    tokens = count_tokens(markdown)
    if best is not None and tokens >= best[2]:
        return best, None  # a smaller limit did not shrink the text: the rest is fixed (a kept operation)
    best = (found, markdown, tokens)
    if tokens <= budget or limit <= 1:
        return best, None
    return best, max(1, limit - (tokens - budget))


def _finish(best, budget: int) -> Fitted:
    found, markdown, tokens = best
    if tokens <= budget:
        return Fitted(found, markdown, tokens, False)
    markdown = cut_to_budget(markdown, budget)
    return Fitted(found, markdown, count_tokens(markdown), True)


def cut_to_budget(text: str, budget: int) -> str:
    """``text`` cut after its last whole line that fits ``budget`` tokens with the note saying so; a
    code fence left open is closed. Text within the budget is returned as it is."""
    if count_tokens(text) <= budget:
        return text
    lines = text.splitlines()
    note = CUT_NOTE.format(budget=budget, lines=len(lines))
    room = max(0, budget - count_tokens(note) - 8)  # 8: the closing fence and the line breaks
    head, _, _ = truncate_tokens(text, room)
    kept = head.splitlines()[:-1] if not head.endswith("\n") else head.splitlines()
    fence = _open_fence(kept)
    tail = [fence] if fence else []
    note = CUT_NOTE.format(budget=budget, lines=len(lines) - len(kept))
    return "\n".join([*kept, *tail, "", note]) + "\n"


def _open_fence(lines: list[str]) -> str:
    """The fence that closes the code block ``lines`` leave open, or ''."""
    open_fence = ""
    for line in lines:
        stripped = line.strip()
        if not open_fence and stripped.startswith("```"):
            open_fence = stripped[: len(stripped) - len(stripped.lstrip("`"))]
        elif open_fence and stripped == open_fence:
            open_fence = ""
    return open_fence
