"""Decomposition with an LLM (prompts/decompose.txt), the offline splitter as its fallback.

The answer is checked: empty parts are dropped, at most ``max_parts`` are kept, and an answer
with no usable part falls back to :func:`~specrag.engine.agentic.split.split_question` with the
reason recorded. Never raises to the caller.
"""

from __future__ import annotations

import time

from pydantic import BaseModel, Field
from specrag.core.llm import model_name
from specrag.core.records import StageMode, StageResult
from specrag.core.ttl_cache import cache_key
from specrag.engine.agentic.split import split_question
from specrag.stages.llm_stage import LLMStage
from specrag.stages.timing import elapsed_ms

MAX_PART_CHARS = 500


class DecompositionAnswer(BaseModel):
    """What the LLM is asked to return."""

    sub_queries: list[str] = Field(description="searches in call order")
    reasoning: str = ""


class Decomposition(StageResult):
    """The question's parts in call order (the question itself when it has one intent)."""

    stage: str = "decompose"
    sub_queries: list[str] = Field(default_factory=list)
    reasoning: str = ""


def offline_decomposition(question: str, max_parts: int) -> Decomposition:
    """The splitter's answer, recorded as the offline mode (``no_llm``)."""
    start = time.perf_counter()
    result = Decomposition(mode=StageMode.OFFLINE, sub_queries=split_question(question, max_parts),
                           reasoning="split at clause boundaries")
    result.fall_back("no_llm", "no LLM client configured")
    result.ms = elapsed_ms(start)
    return result


class Decomposer(LLMStage):
    prompt_key, stage = "decompose", "decompose"

    def decompose(self, question: str, max_parts: int) -> Decomposition:
        start, result = time.perf_counter(), self.started(Decomposition())
        answer = self.ask(DecompositionAnswer, self._key(question, max_parts), result,
                          lambda: self.prompt_vars(question, max_parts))
        return self._finish(question, max_parts, answer, result, start)

    async def adecompose(self, question: str, max_parts: int) -> Decomposition:
        start, result = time.perf_counter(), self.started(Decomposition())
        answer = await self.aask(DecompositionAnswer, self._key(question, max_parts), result,
                                 lambda: self.prompt_vars(question, max_parts))
        return self._finish(question, max_parts, answer, result, start)

    @staticmethod
    def prompt_vars(question: str, max_parts: int) -> dict:
        """Exactly the variables ``decompose`` is formatted with (a test checks the file uses these)."""
        return {"query": question, "max_parts": max_parts}

    def _key(self, question: str, max_parts: int) -> tuple:
        return cache_key(self.stage, question, catalog_version="", prompt_hash=self.prompt_info.hash,
                         model=model_name(self.llm) if self.llm is not None else "", extra=(str(max_parts),))

    def _finish(self, question: str, max_parts: int, answer: DecompositionAnswer | None, result: Decomposition,
                start: float) -> Decomposition:
        parts = [" ".join(str(p).split())[:MAX_PART_CHARS] for p in (answer.sub_queries if answer else [])]
        parts = list(dict.fromkeys(p for p in parts if p))[:max_parts]
        if answer is not None and not parts:
            result.fall_back("empty_decomposition", answer.reasoning)
        if not parts:
            result.sub_queries, result.reasoning = split_question(question, max_parts), "split at clause boundaries"
        else:
            result.sub_queries, result.reasoning = parts, answer.reasoning
        result.ms = elapsed_ms(start)
        return result
