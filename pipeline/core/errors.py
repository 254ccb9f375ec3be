"""Exceptions, one root: every error the package raises to its callers is a ``SpecragError``.

The whole tree. Columns: the class, the module that defines it (under ``specrag.``), a built-in
base that callers may catch it by as well, what it means (the class's docstring says more).

    SpecragError                   core.errors                        the root: what this package raises on purpose
    ├── SpecError                  core.errors                        a spec file cannot be used (the message says why)
    │   ├── BudgetExceeded         specs.limits                       a spec over its value or alias budget
    │   └── FetchError             specs.remote                       a spec URL that could not be fetched
    ├── CorpusError                core.errors                        a missing corpus path, a file_id collision
    │   └── EmptyCorpusError       core.errors                        corpus paths with no usable OpenAPI/Swagger spec
    ├── IndexNotBuiltError         core.errors                        a query before `specrag index` ran for the corpus
    ├── IndexDamagedError          core.errors                        an index file missing, truncated or altered
    │   └── IndexFormatError       core.errors                        an index of another specrag version
    ├── IndexBusyError             core.errors                        another `specrag index` holds the index lock
    ├── EmbedModelUnavailableError core.errors                        vectors whose model cannot load to update them
    ├── ChromaUnavailableError     core.errors                        the Chroma server or store cannot be reached
    │   └── ForeignCollectionError index.collections                  this corpus's collection name, another's data
    ├── ChromaCallError            index.chroma_aside +RuntimeError   a Chroma call that failed in a re-index's Chroma process
    ├── LLMStageError              core.errors                        an LLM stage gave no usable answer (its reason)
    ├── DeadlineExceeded           core.llm                           no time for another LLM request (-> LLMStageError)
    ├── JobFailed                  specs.pool                         a worker job with no result (returned, not raised)
    ├── PromptError                core.errors       +ValueError      a prompt file missing, or its {variables} wrong
    ├── SettingsError              core.errors       +ValueError      a setting outside its allowed values
    ├── QueryError                 engine.query_engine +ValueError      an empty query, or APIs not in the index
    ├── GraphQueryError            engine.graph_queries +ValueError      an unknown API, schema or operation
    ├── NotFound                   index.lookup      +LookupError     an operation or schema the API lacks (404)
    ├── PromptError                core.errors       +ValueError      a prompt file missing, or its {variables} wrong
    ├── SettingsError              core.errors       +ValueError      a setting outside its allowed values
    ├── QueryError                 engine.query_engine +ValueError      an empty query, or APIs not in the index
    ├── GraphQueryError            engine.graph_queries +ValueError      an unknown API, schema or operation
    ├── NotFound                   index.lookup      +LookupError     an operation or schema the API lacks (404)
    ├── UnknownKnowledgeBase       serve.kbs         +LookupError     a kb_id or API id no served KB has (404)
    ├── ForbiddenKnowledgeBase     serve.kbs         +PermissionError another tenant's kb_id (403)
    ├── AmbiguousKnowledgeBase     serve.kbs         +ValueError      no kb_id where several KBs could answer
    ├── Unauthorized               serve.tenancy     +PermissionError no API key, or an unknown one (401)
    ├── ForbiddenTenant            serve.tenancy     +PermissionError a body naming another tenant (403)
    ├── SharedCatalogDir           serve.tenancy     +ValueError      one catalog folder for several tenants
    ├── ApiKeysError               serve.keys        +ValueError      an unreadable keys file or a bad key entry
    ├── BudgetError                serve.budget      +ValueError      a token budget outside the range every surface accepts
    ├── ToolInputError             serve.tool_spec   +ValueError      an agent tool argument the tool cannot use
    ├── ServeRefused               cli.serve                          serving beyond loopback without API keys
    ├── BenchError                 bench.query       +ValueError      no queries to time, or the child server failed
    ├── ServerFailed               bench.loadtest                     a load run's server exited or never got ready
    ├── QuerySetError              evals.querysets   +ValueError      an unreadable query-set file (names file, line)
    └── RunFileError               evals.report                       a run folder or results.json that is not a run

Internal control flow, not a SpecragError: raised and caught inside one function, never seen by a
caller. ``tests/test_errors.py`` checks that every exception class of the package is drawn here,
in its module, under its own base class.

    Refused                        serve.guard                        RequestGuard's own answer (status, detail),
                                                                      caught in its __call__: the HTTP response

How the service maps these to HTTP statuses: ``specrag.serve.errors.http_status``.
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
