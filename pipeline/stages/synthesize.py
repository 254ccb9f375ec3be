"""Optional stage: answer from a KnowledgeContext with ``[Source N]`` citations.

N indexes ``context.chunks`` (primary, then referenced) from 1, the order of the query engine's
``source_nodes``, so a citation leads straight to its node. Retrieval-only stays the default.
"""

from __future__ import annotations

import re
import time

from specrag.context.knowledge import KnowledgeContext
from specrag.core.errors import LLMStageError
from specrag.core.llm import atext_call, text_call
from specrag.core.records import ContextChunk, LLMCall, SynthesisResult
from specrag.stages.llm_stage import LLMStage
from specrag.stages.timing import elapsed_ms

_CITATION = re.compile(r"\[Source\s+(\d+)\]", re.IGNORECASE)


def source_label(chunk: ContextChunk) -> str:
    meta = chunk.metadata
    method, path = str(meta.get("method", "")).upper(), str(meta.get("path", ""))
    what = f"{method} {path}" if method and path else " ".join(str(meta.get(k, "")) for k in ("kind", "name")).strip()
    return f"{chunk.id} ({what})" if what else chunk.id


def render_sources(context: KnowledgeContext) -> str:
    """``[Source N] id (what)`` then the chunk's text, for every chunk in ``context.chunks`` order."""
    return "\n\n".join(f"[Source {n}] {source_label(c)}\n{c.text.rstrip()}" for n, c in enumerate(context.chunks, 1))


def cited_sources(answer: str) -> list[int]:
    """The distinct source numbers an answer cites, in order of first citation."""
    return list(dict.fromkeys(int(n) for n in _CITATION.findall(answer)))


def prompt_vars(context: KnowledgeContext) -> dict[str, str]:
    """Exactly the variables ``synthesize`` is formatted with (a test checks the files use these)."""
    return {"query": context.query, "context": render_sources(context)}


class Synthesizer(LLMStage):
    """Answers from the context; the result is '' (with the reason) when no answer could be made."""

    prompt_key, stage = "synthesize", "synthesize"

    def synthesize(self, context: KnowledgeContext) -> SynthesisResult:
        start, result = time.perf_counter(), self.started(SynthesisResult())
        if self._can_answer(context, result):
            try:
                answer, call = text_call(self.llm, self.prompt, stage=self.stage, prompt_info=self.prompt_info,
                                         settings=self.settings, **prompt_vars(context))
                self._answered_with(answer, call, context, result)
            except LLMStageError as exc:
                self._failed(exc, result)
        result.ms = elapsed_ms(start)
        return result

    async def asynthesize(self, context: KnowledgeContext) -> SynthesisResult:
        start, result = time.perf_counter(), self.started(SynthesisResult())
        if self._can_answer(context, result):
            try:
                answer, call = await atext_call(self.llm, self.prompt, stage=self.stage,
                                                prompt_info=self.prompt_info, settings=self.settings,
                                                **prompt_vars(context))
                self._answered_with(answer, call, context, result)
            except LLMStageError as exc:
                self._failed(exc, result)
        result.ms = elapsed_ms(start)
        return result

    def _can_answer(self, context: KnowledgeContext, result: SynthesisResult) -> bool:
        if self.llm is None:
            return False
        if not context.chunks:
            result.fall_back("no_context", "retrieval found no chunks to answer from")
            return False
        return True

    @staticmethod
    def _answered_with(answer: str, call: LLMCall, context: KnowledgeContext, result: SynthesisResult) -> None:
        result.llm_calls.append(call)
        result.answer, result.cited_sources = answer, cited_sources(answer)
        missing = [n for n in result.cited_sources if not 1 <= n <= len(context.chunks)]
        if missing:
            result.warnings.append(f"answer cites sources that do not exist: {missing}")
