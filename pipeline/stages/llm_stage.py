"""The base of every LLM stage: one prompt loaded from a file, exposed through LlamaIndex's
``PromptMixin`` (``get_prompts`` / ``update_prompts``, variables re-checked on update), and one
cached, structured LLM call per query, sync or async.

A call records what it cost and why it failed into the stage's own result (a ``StageResult``
made for that query), never into shared state.
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar

from llama_index.core.llms import LLM
from llama_index.core.prompts import PromptTemplate
from llama_index.core.prompts.mixin import PromptDictType, PromptMixin, PromptMixinType
from pydantic import BaseModel
from specrag.core.errors import LLMStageError
from specrag.core.fallbacks import llm_call_failed
from specrag.core.llm import astructured_call, model_name, structured_call
from specrag.core.prompts import PromptInfo, PromptSet, check_template
from specrag.core.records import LLMCall, StageMode, StageResult
from specrag.core.settings import Settings
from specrag.core.tokens import count_tokens
from specrag.core.ttl_cache import TTLCache
from specrag.stages.timing import elapsed_ms

T = TypeVar("T", bound=BaseModel)
MakeVars = Callable[[], "dict[str, Any] | None"]


class LLMStage(PromptMixin):
    """Subclasses set ``prompt_key`` (the prompt file's name) and ``stage`` (the stats name)."""

    prompt_key: str = ""
    stage: str = ""

    def __init__(self, llm: LLM | None, prompts: PromptSet, settings: Settings, cache: TTLCache | None = None):
        self.llm, self.settings, self.cache = llm, settings, cache
        self.prompt: PromptTemplate = prompts.template(self.prompt_key)
        self.prompt_info: PromptInfo = prompts.info(self.prompt_key)

    # ---- PromptMixin ----------------------------------------------------------------------
    def _get_prompts(self) -> PromptDictType:
        return {self.prompt_key: self.prompt}

    def _get_prompt_modules(self) -> PromptMixinType:
        return {}

    def _update_prompts(self, prompts_dict: PromptDictType) -> None:
        if self.prompt_key in prompts_dict:
            prompt = prompts_dict[self.prompt_key]
            if not isinstance(prompt, PromptTemplate):
                raise TypeError(f"{self.prompt_key} must be a PromptTemplate, got {type(prompt).__name__}")
            self.prompt, self.prompt_info = prompt, check_template(self.prompt_key, prompt)

    # ---- calls ----------------------------------------------------------------------------
    def started(self, result: StageResult) -> StageResult:
        """Mark ``result`` as this stage's LLM run; with no client it records ``no_llm``."""
        result.mode, result.prompt = StageMode.LLM, self.prompt_info.label
        if self.llm is None:
            result.fall_back("no_llm", "no LLM client configured")
        return result

    def ask(self, output_cls: type[T], key: tuple, result: StageResult, make_vars: MakeVars) -> T | None:
        """The cached answer, else one structured call with ``make_vars()`` (built only on a miss;
        None means the stage already recorded why it falls back). None after a failure."""
        template_vars = self._prepare(key, result, make_vars)
        if not isinstance(template_vars, dict):
            return template_vars  # the cached answer, or None
        try:
            answer, call = structured_call(self.llm, output_cls, self.prompt, stage=self.stage,
                                           prompt_info=self.prompt_info, settings=self.settings, **template_vars)
        except LLMStageError as exc:
            return self._failed(exc, result)
        return self._answered(key, answer, call, result)

    async def aask(self, output_cls: type[T], key: tuple, result: StageResult, make_vars: MakeVars) -> T | None:
        template_vars = self._prepare(key, result, make_vars)
        if not isinstance(template_vars, dict):
            return template_vars
        try:
            answer, call = await astructured_call(self.llm, output_cls, self.prompt, stage=self.stage,
                                                  prompt_info=self.prompt_info, settings=self.settings,
                                                  **template_vars)
        except LLMStageError as exc:
            return self._failed(exc, result)
        return self._answered(key, answer, call, result)

    def count(self, text: str) -> int:
        return count_tokens(text)

    def _prepare(self, key: tuple, result: StageResult, make_vars: MakeVars) -> Any:
        """The prompt variables for a call, or instead the cached answer or None (no call)."""
        if self.llm is None:
            return None
        cached = self._cached(key, result)
        return cached if cached is not None else make_vars()

    def _cached(self, key: tuple, result: StageResult) -> Any:
        cached = self.cache.get(key) if self.cache is not None else None
        if cached is not None:
            result.cache_hits += 1
            result.llm_calls.append(LLMCall(stage=self.stage, model=model_name(self.llm),
                                            prompt_name=self.prompt_info.name, prompt_hash=self.prompt_info.hash,
                                            attempts=0, cached=True))
        return cached

    def _failed(self, exc: LLMStageError, result: StageResult) -> None:
        """Record the failure in the query's result, and have it told once (``specrag.core.fallbacks``)."""
        if isinstance(exc.call, LLMCall):
            result.llm_calls.append(exc.call)
        result.fall_back(exc.reason, str(exc))
        llm_call_failed(result.fallbacks[-1])
        return None

    def _answered(self, key: tuple, answer: T, call: LLMCall, result: StageResult) -> T:
        result.llm_calls.append(call)
        if self.cache is not None:
            self.cache.put(key, answer)
        return answer


def with_fallback(result: StageResult, fallback: StageResult, start: float) -> StageResult:
    """The keyword ``fallback``'s answer under the LLM stage's record: its mode, its calls, and
    the reason the LLM answer was not used (the keyword stage's own ``no_llm`` is dropped)."""
    merged = fallback.model_copy(update={
        "mode": StageMode.LLM, "prompt": result.prompt, "llm_calls": list(result.llm_calls),
        "cache_hits": result.cache_hits, "warnings": [*result.warnings, *fallback.warnings],
        "fallbacks": list(result.fallbacks) or [*fallback.fallbacks]})
    for name in ("dropped_ids", "dropped_terms"):
        if name in type(result).model_fields:
            setattr(merged, name, list(getattr(result, name)))
    merged.ms = elapsed_ms(start)
    return merged
