"""Token budgets of the tools' answers: rebuilt smaller while over, cut at a line as the last resort."""

from __future__ import annotations

import pytest
from specrag.core.tokens import count_tokens
from specrag.serve.budget import FIT_BUILDS, BudgetError, afit, check_budget, cut_to_budget, fit, fixed

HEADING = "# An answer\n\nsome words that every rendering adds around the content\n\n"


def words(n: int) -> str:
    return " ".join(["pet"] * n)


def render(content: str) -> str:
    return HEADING + "```yaml\n" + content + "\n```\n"


def test_an_answer_within_the_budget_is_built_once():
    limits = []
    fitted = fit(lambda limit: limits.append(limit) or words(50), render, 500)
    assert limits == [500] and not fitted.cut and fitted.tokens == count_tokens(render(words(50)))


def test_an_answer_over_the_budget_is_rebuilt_with_less_content_until_it_fits():
    limits = []

    def build(limit: int) -> str:
        limits.append(limit)
        return words(limit)  # content fills whatever limit it is given: the rendering pushes it over

    fitted = fit(build, render, 200)
    assert limits[0] == 200 and len(limits) == 2 and limits[1] < 200
    assert fitted.tokens <= 200 and not fitted.cut and fitted.markdown == render(fitted.found)


@pytest.mark.anyio
async def test_the_awaited_build_fits_the_same_way():
    async def build(limit: int) -> str:
        return words(limit)

    fitted, same = await afit(build, render, 200), fit(lambda limit: words(limit), render, 200)
    assert (fitted.markdown, fitted.tokens, fitted.cut) == (same.markdown, same.tokens, same.cut)


def test_what_does_not_shrink_is_cut_at_a_line_and_says_so():
    """A build that keeps a fixed part (a first operation) stops rebuilding as soon as it stops shrinking."""
    limits, kept = [], "\n".join(f"line {i}: {words(20)}" for i in range(30))
    fitted = fit(lambda limit: limits.append(limit) or kept, render, 150)
    assert len(limits) == 2 < FIT_BUILDS + 1 and fitted.cut and fitted.tokens <= 150
    text = fitted.markdown
    assert text.startswith(HEADING) and text.count("```") == 2  # the open block was closed
    assert text.rstrip().endswith("more lines; ask with a larger token_budget]_")
    assert all(line in kept.splitlines() for line in text.split("```yaml\n")[1].split("\n```")[0].splitlines())


def test_fixed_answers_are_rendered_once_and_cut_only_when_over():
    long = "\n".join(f"- `api_{i}` — {words(10)}" for i in range(100))
    assert fixed(long, lambda t: t, 10_000).markdown == long
    cut = fixed(long, lambda t: t, 300)
    assert cut.cut and count_tokens(cut.markdown) == cut.tokens <= 300 and cut.markdown.startswith("- `api_0`")


def test_cut_to_budget_closes_a_longer_fence():
    text = "intro\n\n````yaml\nexample: ```not a fence```\n" + "\n".join(words(15) for _ in range(40)) + "\n````\n"
    cut = cut_to_budget(text, 120)
    assert count_tokens(cut) <= 120 and "\n````\n\n_[cut here" in cut
    assert cut_to_budget("short", 100) == "short"


@pytest.mark.parametrize("bad", [99, 100_001, 0, -5, True, "400", 400.0, None])
def test_a_budget_out_of_range_is_refused_in_one_line(bad):
    with pytest.raises(BudgetError, match=r"^token_budget must be a whole number of tokens from 100 to 100000"):
        check_budget(bad)
    assert check_budget(100) == 100 and check_budget(100_000) == 100_000
