"""Exceptions, one root:

    SpecragError
    ├── SpecError            a spec file cannot be used (the reason is the message)
    ├── CorpusError          a corpus-level problem: missing path, file_id collision
    ├── IndexNotBuiltError   a query before `specrag index` ran for that corpus
    ├── LLMStageError        an LLM stage gave no usable answer (carries the fallback reason)
    ├── PromptError          a prompt file is missing or its {variables} don't match its stage
    └── SettingsError        a setting (env var, .env, argument) outside its allowed values
"""


class SpecragError(Exception):
    """Root of every error this package raises on purpose."""


class SpecError(SpecragError):
    """A spec file that cannot be parsed or is not an OpenAPI/Swagger document."""


class CorpusError(SpecragError):
    """A corpus path that is missing or unreadable, or two specs with the same file_id."""


class IndexNotBuiltError(SpecragError):
    """The index folder holds no index for this corpus; run `specrag index PATH` first."""


class LLMStageError(SpecragError):
    """An LLM stage failed after its retries; ``reason`` names the fallback cause."""

    def __init__(self, reason: str, message: str = "", attempts: int = 0, call: object | None = None):
        super().__init__(message or reason)
        self.reason = reason
        self.attempts = attempts
        self.call = call  # the failed call's LLMCall (attempts, tokens, ms), for cost accounting


class PromptError(SpecragError, ValueError):
    """A prompts folder lacks a file, or a file's {variables} differ from what its stage passes."""


class SettingsError(SpecragError, ValueError):
    """A setting outside its allowed values; the one-line message names the variable and the range."""
