"""The one place that talks to an LLM: building the client, retries, output validation.

Transient failures (timeouts, 429, 5xx) are retried with tenacity (exponential backoff, full
jitter), bounded by ``llm_max_attempts`` and by the deadline: ``llm_deadline_s`` from the call's
start, or the query's own deadline (:mod:`specrag.core.deadline`) when that comes first, so all the
calls of one query together end within it. Each request's timeout is cut to the time left. Output that is not the expected JSON is re-asked once with the
validation error. Anything else ends in ``LLMStageError(reason)``, which the stage turns into a
fallback. The clients' own retries are off (``max_retries=0``) so that nothing retries twice.

Structured output goes through ``llm.chat`` + pydantic validation rather than
``structured_predict``: that keeps the usage (tokens) and the raw text for the re-ask, and works
with OpenAI-compatible servers that lack function calling.

Sync and async share one implementation: the ask/validate/re-ask logic is written once as a
coroutine over a ``send`` function. The async entry points pass ``llm.achat`` (tenacity's
``AsyncRetrying``); the sync ones pass ``llm.chat`` and drive the coroutine, which never
suspends, to its end in the calling thread (:func:`_drive`).
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from typing import Any, Awaitable, Callable, Coroutine, TypeVar
from urllib.parse import urlsplit, urlunsplit

from llama_index.core.base.llms.types import ChatMessage, ChatResponse, MessageRole
from llama_index.core.llms import LLM
from llama_index.core.prompts import PromptTemplate
from pydantic import BaseModel, Field, ValidationError
from specrag.core.deadline import current_deadline, earliest
from specrag.core.errors import LLMStageError, SpecragError
from specrag.core.prompts import REASK_PROMPT, PromptInfo
from specrag.core.records import LLMCall
from specrag.core.settings import Settings
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    Retrying,
    retry_if_exception,
    wait_random_exponential,
)

log = logging.getLogger(__name__)
T = TypeVar("T", bound=BaseModel)
RETRYABLE = frozenset({"timeout", "rate_limit", "server_error"})
# every reason a call can fail with (failure_reason, plus an answer that never validated)
CALL_FAILURE_REASONS = frozenset({"timeout", "rate_limit", "server_error", "client_error", "connection_error",
                                  "unexpected_error", "invalid_output"})


def build_llm(settings: Settings) -> LLM | None:
    """The configured client, or None in offline mode (no API key and no base URL)."""
    if not settings.llm_configured:
        return None
    import openai.resources  # noqa: F401  the SDK imports this (~1-3 s) on its first request: not inside a query's deadline
    from llama_index.llms.openai import OpenAI
    from llama_index.llms.openai.utils import ALL_AVAILABLE_MODELS

    # local servers often need no key, but the SDK insists on one
    common: dict[str, Any] = dict(model=settings.llm.llm_model, temperature=0.0, max_retries=0,
                                  timeout=settings.llm.llm_timeout_s, api_base=settings.llm.llm_base_url,
                                  api_key=settings.llm.openai_api_key or "not-needed")
    if settings.llm.llm_model in ALL_AVAILABLE_MODELS:
        return OpenAI(**common)
    from llama_index.llms.openai_like import OpenAILike

    return OpenAILike(is_chat_model=True, is_function_calling_model=False, **common)


class RetryPolicy(BaseModel):
    """Retry bounds for one stage call, from ``Settings``."""

    max_attempts: int = Field(description="requests per answer, the first included")
    deadline_s: float = Field(description="no request runs past this many seconds after the call began")
    timeout_s: float = Field(description="per-request timeout")
    backoff_initial_s: float = Field(description="ceiling of the first backoff; doubles each retry")
    backoff_max_s: float = Field(description="ceiling of any backoff")

    @classmethod
    def from_settings(cls, settings: Settings) -> "RetryPolicy":
        # backoff scales with the request timeout, so short-timeout settings (tests) retry fast
        return cls(max_attempts=max(1, settings.llm.llm_max_attempts), deadline_s=settings.llm.llm_deadline_s,
                   timeout_s=settings.llm.llm_timeout_s, backoff_initial_s=min(1.0, settings.llm.llm_timeout_s / 4),
                   backoff_max_s=min(10.0, settings.llm.llm_deadline_s / 4))


class _Tally(BaseModel):
    """Attempts, tokens and time of one stage call, across retries and the re-ask."""

    started: float = Field(default_factory=time.monotonic)
    attempts: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def add_usage(self, response: ChatResponse) -> None:
        usage = getattr(response.raw, "usage", None)
        counts = response.additional_kwargs or {}
        self.prompt_tokens += int(getattr(usage, "prompt_tokens", None) or counts.get("prompt_tokens") or 0)
        self.completion_tokens += int(getattr(usage, "completion_tokens", None) or counts.get("completion_tokens") or 0)

    def call(self, llm: LLM, stage: str, info: PromptInfo, ok: bool = True) -> LLMCall:
        return LLMCall(stage=stage, model=model_name(llm), prompt_name=info.name, prompt_hash=info.hash,
                       prompt_tokens=self.prompt_tokens, completion_tokens=self.completion_tokens,
                       attempts=self.attempts, ms=round((time.monotonic() - self.started) * 1000, 1), ok=ok)


def model_name(llm: LLM) -> str:
    return str(getattr(llm, "model", None) or llm.metadata.model_name)


class DeadlineExceeded(SpecragError):
    """The overall deadline passed before another request could start (the stage turns it into an
    ``LLMStageError`` with reason "timeout")."""


def _sdk_error(exc: BaseException, name: str) -> bool:
    """``exc`` is the openai SDK's error ``name``. Only a loaded SDK raises its errors, and only
    ``build_llm`` loads it: a process with no LLM configured never imports it (~24 MB of RSS and
    ~0.5 s of a serving process's start)."""
    sdk = sys.modules.get("openai")
    return sdk is not None and isinstance(exc, getattr(sdk, name, ()))


def failure_reason(exc: BaseException) -> str:
    """Map a client exception to a fallback reason."""
    if isinstance(exc, DeadlineExceeded) or _sdk_error(exc, "APITimeoutError"):  # subclass of APIConnectionError: test it first
        return "timeout"
    if _sdk_error(exc, "APIConnectionError"):
        return "connection_error"
    if _sdk_error(exc, "APIStatusError"):
        if exc.status_code == 429:
            return "rate_limit"
        if exc.status_code == 408:
            return "timeout"
        return "server_error" if exc.status_code >= 500 else "client_error"
    return "unexpected_error"


def _retry_after(exc: BaseException) -> float:
    response = getattr(exc, "response", None)
    try:
        return float(response.headers.get("retry-after", 0)) if response is not None else 0.0
    except (TypeError, ValueError):
        return 0.0


Send = Callable[[list[ChatMessage]], Awaitable[str]]


def _retry_options(policy: RetryPolicy, deadline: float) -> dict[str, Any]:
    """tenacity options: transient failures only, backoff with jitter, Retry-After, the deadline."""
    jitter = wait_random_exponential(multiplier=policy.backoff_initial_s, max=policy.backoff_max_s)

    def wait(state: RetryCallState) -> float:  # honour Retry-After on 429, within bounds
        exc = state.outcome.exception() if state.outcome else None
        return min(max(jitter(state), _retry_after(exc)), policy.backoff_max_s)

    def stop(state: RetryCallState) -> bool:  # no retry that would get under a quarter of its timeout
        starts_at = time.monotonic() + state.upcoming_sleep
        return state.attempt_number >= policy.max_attempts or starts_at + policy.timeout_s / 4 >= deadline

    return dict(stop=stop, wait=wait, reraise=True, retry=retry_if_exception(lambda e: failure_reason(e) in RETRYABLE))


def _request_timeout(policy: RetryPolicy, deadline: float, tally: _Tally) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise DeadlineExceeded(f"no time left of the {policy.deadline_s}s deadline")
    tally.attempts += 1
    return min(policy.timeout_s, left)


def endpoint_label(llm: LLM) -> str:
    """The client's base URL as it may be shown in a log: no user:password, no query string."""
    url = str(getattr(llm, "api_base", None) or "")
    if not url:
        return "the LLM endpoint"
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2], query="", fragment=""))


def failure_detail(exc: BaseException, endpoint: str) -> str:
    """What failed, in one line a person can act on: the client's own text ("Connection error.")
    names neither the cause nor the server."""
    if isinstance(exc, DeadlineExceeded):
        return str(exc)
    if _sdk_error(exc, "APITimeoutError"):
        return f"no answer from {endpoint} within the request timeout (SPECRAG_LLM_TIMEOUT_S)"
    if _sdk_error(exc, "APIConnectionError"):
        cause = _os_error(exc)
        if isinstance(cause, ConnectionRefusedError):
            return f"connection refused at {endpoint}"
        return f"cannot connect to {endpoint}" + (f": {cause.strerror or cause}" if cause is not None else "")
    if _sdk_error(exc, "APIStatusError"):
        said = re.sub(r"^Error code: \d+ - ", "", _short_error(exc))  # the SDK's prefix repeats the status
        return f"HTTP {exc.status_code} from {endpoint}: {said}"
    return f"{type(exc).__name__}: {_short_error(exc)}"


def _os_error(exc: BaseException) -> OSError | None:
    """The socket error under a client error (httpx and httpcore wrap it), if any."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, OSError):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def _stage_error(exc: Exception, tally: _Tally, endpoint: str) -> LLMStageError:
    reason = failure_reason(exc)
    if reason == "unexpected_error":
        log.warning("LLM call failed unexpectedly", exc_info=True)
    return LLMStageError(reason, failure_detail(exc, endpoint), attempts=tally.attempts)


def _sync_send(llm: LLM, policy: RetryPolicy, deadline: float, tally: _Tally) -> Send:
    async def send(messages: list[ChatMessage]) -> str:  # never suspends: see _drive
        try:
            for attempt in Retrying(**_retry_options(policy, deadline)):
                with attempt:
                    response = llm.chat(messages, timeout=_request_timeout(policy, deadline, tally))
        except Exception as exc:
            raise _stage_error(exc, tally, endpoint_label(llm)) from exc
        tally.add_usage(response)
        return response.message.content or ""

    return send


def _async_send(llm: LLM, policy: RetryPolicy, deadline: float, tally: _Tally) -> Send:
    async def send(messages: list[ChatMessage]) -> str:
        try:
            async for attempt in AsyncRetrying(**_retry_options(policy, deadline)):
                with attempt:
                    response = await llm.achat(messages, timeout=_request_timeout(policy, deadline, tally))
        except Exception as exc:
            raise _stage_error(exc, tally, endpoint_label(llm)) from exc
        tally.add_usage(response)
        return response.message.content or ""

    return send


def _drive(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine whose awaits all complete at once (sync calls in disguise) to its end."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    coroutine.close()
    raise RuntimeError("a synchronous LLM call suspended; use the async entry point")


def parse_output(output_cls: type[T], text: str) -> T:
    """The JSON object in ``text`` (code fences and chatter around it ignored) as ``output_cls``."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0:
        raise ValueError("no JSON object in the answer")
    try:
        data = json.loads(text[start : end + 1] if end > start else text[start:])
    except json.JSONDecodeError as exc:
        raise ValueError(f"malformed JSON: {exc}") from exc
    return output_cls.model_validate(data)


def _short_error(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'answer'}: {e['msg']}" for e in exc.errors()[:5])
    return re.sub(r"\s+", " ", str(exc))[:300]


async def _structured(send: Send, output_cls: type[T], messages: list[ChatMessage], deadline: float,
                      make_call: Callable[[bool], LLMCall]) -> tuple[T, LLMCall]:
    """Ask, validate as ``output_cls``, re-ask once with the validation error."""
    error = ""
    for round_ in range(2):  # the answer, then one re-ask with the validation error
        if round_ and time.monotonic() >= deadline:
            break
        try:
            text = await send(messages)
        except LLMStageError as exc:
            exc.call = make_call(False)
            raise
        try:
            return parse_output(output_cls, text), make_call(True)
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            error = _short_error(exc)
            messages = [*messages, ChatMessage(role=MessageRole.ASSISTANT, content=text),
                        ChatMessage(role=MessageRole.USER, content=REASK_PROMPT.format(error=error))]
    raise LLMStageError("invalid_output", f"the answer was not the expected JSON: {error}",
                        attempts=make_call(False).attempts, call=make_call(False))


async def _text(send: Send, messages: list[ChatMessage], make_call: Callable[[bool], LLMCall]) -> tuple[str, LLMCall]:
    try:
        text = await send(messages)
        if not text.strip():
            raise LLMStageError("invalid_output", "empty answer")
    except LLMStageError as exc:
        exc.call = make_call(False)
        exc.attempts = exc.call.attempts
        raise
    return text.strip(), make_call(True)


class _Call:
    """One stage call's bounds and accounting: the policy, the deadline, the tally.

    The deadline is the earliest of the call's own ``llm_deadline_s``, the caller's ``deadline``
    and the current query's (:func:`specrag.core.deadline.current_deadline`)."""

    def __init__(self, llm: LLM, stage: str, prompt_info: PromptInfo, settings: Settings, deadline: float | None):
        self.llm, self.stage, self.info = llm, stage, prompt_info
        self.policy, self.tally = RetryPolicy.from_settings(settings), _Tally()
        self.deadline = earliest(self.tally.started + self.policy.deadline_s, deadline, current_deadline())

    def record(self, ok: bool) -> LLMCall:
        return self.tally.call(self.llm, self.stage, self.info, ok=ok)

    def sync_send(self) -> Send:
        return _sync_send(self.llm, self.policy, self.deadline, self.tally)

    def async_send(self) -> Send:
        return _async_send(self.llm, self.policy, self.deadline, self.tally)


def structured_call(llm: LLM, output_cls: type[T], prompt: PromptTemplate, *, stage: str, prompt_info: PromptInfo,
                    settings: Settings, deadline: float | None = None, **template_vars: Any) -> tuple[T, LLMCall]:
    """Render ``prompt``, ask, validate as ``output_cls``; re-ask once on invalid output.

    ``deadline`` (a ``time.monotonic()`` instant) caps the call beyond its own
    ``llm_deadline_s``. Raises ``LLMStageError`` (reason and the failed ``LLMCall`` attached)
    when no valid answer came.
    """
    call = _Call(llm, stage, prompt_info, settings, deadline)
    return _drive(_structured(call.sync_send(), output_cls, prompt.format_messages(**template_vars),
                              call.deadline, call.record))


async def astructured_call(llm: LLM, output_cls: type[T], prompt: PromptTemplate, *, stage: str,
                           prompt_info: PromptInfo, settings: Settings, deadline: float | None = None,
                           **template_vars: Any) -> tuple[T, LLMCall]:
    """:func:`structured_call` on the event loop (``llm.achat``)."""
    call = _Call(llm, stage, prompt_info, settings, deadline)
    return await _structured(call.async_send(), output_cls, prompt.format_messages(**template_vars),
                             call.deadline, call.record)


def text_call(llm: LLM, prompt: PromptTemplate, *, stage: str, prompt_info: PromptInfo, settings: Settings,
              deadline: float | None = None, **template_vars: Any) -> tuple[str, LLMCall]:
    """Render ``prompt`` and return the answer text, with the same retries; raises LLMStageError."""
    call = _Call(llm, stage, prompt_info, settings, deadline)
    return _drive(_text(call.sync_send(), prompt.format_messages(**template_vars), call.record))


async def atext_call(llm: LLM, prompt: PromptTemplate, *, stage: str, prompt_info: PromptInfo, settings: Settings,
                     deadline: float | None = None, **template_vars: Any) -> tuple[str, LLMCall]:
    call = _Call(llm, stage, prompt_info, settings, deadline)
    return await _text(call.async_send(), prompt.format_messages(**template_vars), call.record)
