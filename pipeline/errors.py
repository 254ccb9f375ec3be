"""Exceptions, one root:

    SpecragError
    ├── SpecError            a spec file cannot be used (the reason is the message)
    ├── CorpusError          a corpus-level problem: missing path, file_id collision
    │   └── EmptyCorpusError a corpus path that holds no usable OpenAPI/Swagger spec
    ├── IndexNotBuiltError   a query before `specrag index` ran for that corpus
    ├── IndexDamagedError    an index file is missing, truncated or altered (`specrag index` repairs it)
    │   └── IndexFormatError an index written by another version of specrag (`specrag index` rebuilds it)
    ├── IndexBusyError       another `specrag index` holds the corpus's index lock
    ├── EmbedModelUnavailableError  an index with vectors, and its model cannot be loaded to update it
    ├── ChromaUnavailableError  the Chroma server (SPECRAG_CHROMA_HOST) or store cannot be reached
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


class EmptyCorpusError(CorpusError):
    """The corpus paths hold no usable OpenAPI/Swagger spec; raised before its index folder is made
    (or, when the files had to be read to tell, with that folder removed again)."""


class IndexNotBuiltError(SpecragError):
    """The index folder holds no index for this corpus; run `specrag index PATH` first."""


class IndexDamagedError(SpecragError):
    """An index file is missing, truncated or fails its checksum; the next `specrag index` repairs it."""


class IndexFormatError(IndexDamagedError):
    """The index was written in another format; `specrag index` rebuilds it."""


class IndexBusyError(SpecragError):
    """Another `specrag index` run is updating the same index and did not finish in time."""


class EmbedModelUnavailableError(SpecragError):
    """The index holds vectors but the embedding model did not load (offline, a wrong
    SPECRAG_EMBED_MODEL_PATH): an update would rebuild it without them, so none is made."""


class ChromaUnavailableError(SpecragError):
    """The Chroma server named in settings does not answer, or the embedded store cannot be opened."""


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
