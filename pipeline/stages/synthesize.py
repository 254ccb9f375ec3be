"""Optional stage: answer from a KnowledgeContext with ``[Source N]`` citations.

N indexes ``context.chunks`` (primary, then referenced) from 1, the order of the query engine's
``source_nodes``, so a citation leads straight to its node. Retrieval-only stays the default.
"""

from __future__ import annotations

import re

from llama_index.core.llms import LLM

from pipeline.context import ContextChunk, KnowledgeContext, LLMCall
from pipeline.errors import LLMStageError
from pipeline.llm import model_name, text_call
from pipeline.prompts import PromptSet
from pipeline.settings import Settings

STAGE, PROMPT = "synthesize", "synthesize"
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


def synthesize_answer(llm: LLM, prompts: PromptSet, context: KnowledgeContext, *,
                      settings: Settings) -> tuple[str, LLMCall]:
    """The answer and its call record; "" when no answer could be made (the reason is in the stats).

    Records the prompt, the call and any fallback in ``context.retrieval_stats``; never raises.
    """
    stats, info = context.retrieval_stats, prompts.info(PROMPT)
    stats.mode = "llm"
    stats.prompts[STAGE] = info.label
    if not context.chunks:
        stats.add_fallback(STAGE, "no_context", "retrieval found no chunks to answer from")
        return "", LLMCall(stage=STAGE, model=model_name(llm), prompt_name=info.name, prompt_hash=info.hash,
                           attempts=0, ok=False)
    try:
        answer, call = text_call(llm, prompts.synthesize, stage=STAGE, prompt_info=info, settings=settings,
                                 **prompt_vars(context))
    except LLMStageError as exc:
        call = exc.call if isinstance(exc.call, LLMCall) else LLMCall(
            stage=STAGE, model=model_name(llm), prompt_name=info.name, prompt_hash=info.hash,
            attempts=exc.attempts, ok=False)
        stats.llm_calls.append(call)
        stats.add_fallback(STAGE, exc.reason, str(exc))
        return "", call
    stats.llm_calls.append(call)
    missing = [n for n in cited_sources(answer) if not 1 <= n <= len(context.chunks)]
    if missing:
        stats.warnings.append(f"answer cites sources that do not exist: {missing}")
    return answer, call
