"""One typed settings object, read from the environment (and a ``.env``) or built in code.

Passed into every component explicitly; nothing reads a hidden global. Env var names are the
field aliases below and are listed in the README. Every field has its allowed range; a value
outside it is a ``SettingsError`` whose one line names the variable and what it accepts
(:mod:`specrag.settings_errors`). Which ``.env`` is read, and why a ``.env`` cannot redirect
an API key from the environment: :mod:`specrag.envfile`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from specrag.envfile import default_env_file, key_for_dotenv_url
from specrag.settings_errors import describe_validation_error

NonNegativeWeight = Annotated[float, Field(ge=0, le=100, allow_inf_nan=False)]

_UNSET: Any = object()
DEFAULT_TENANT = "default"
TENANT_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$"
COLLECTION_RULE = "3-512 characters from A-Z a-z 0-9 . _ -, starting and ending with a letter or digit, no '..'"


def _env(*names: str) -> AliasChoices:
    return AliasChoices(*names)


DEFAULT_PROMPTS_PACKAGE = "specrag.default_prompts"  # the prompts a prompts_dir of None means (the repository's prompts/)

class Settings(BaseSettings):
    # .env: chosen per instance in __init__ (specrag.envfile), never the working folder's
    model_config = SettingsConfigDict(env_file=None, extra="ignore", populate_by_name=True, env_ignore_empty=True)

    # where things live
    data_dir: Path = Field(Path(".specrag"), validation_alias=_env("SPECRAG_DATA_DIR"),
                           description="index folder: Chroma, BM25, manifest")
    catalog_dir: Path | None = Field(None, validation_alias=_env("SPECRAG_CATALOG_DIR"),
                                     description="catalog.json and indexes/{file_id}.json; default <data_dir>/catalogs")
    chroma_host: str | None = Field(None, min_length=1, validation_alias=_env("SPECRAG_CHROMA_HOST"),
                                    description="use a Chroma server (HttpClient) instead of the embedded store")
    chroma_port: int = Field(8000, ge=1, le=65535, validation_alias=_env("SPECRAG_CHROMA_PORT"))
    collection: str = Field("specrag_chunks", validation_alias=_env("SPECRAG_COLLECTION"),
                            json_schema_extra={"allowed": COLLECTION_RULE})
    chroma_sync_s: float = Field(30.0, ge=0, le=86_400, allow_inf_nan=False, validation_alias=_env("SPECRAG_CHROMA_SYNC_S"),
                                 description="with a Chroma server: how often (at most, on a request) a serving "
                                             "process checks for a newer published index; 0 = every request")
    chroma_timeout_s: float = Field(30.0, gt=0, le=3_600, allow_inf_nan=False,
                                    validation_alias=_env("SPECRAG_CHROMA_TIMEOUT_S"),
                                    description="with a Chroma server: how long one call to it may take (connect, "
                                                "send, wait for the answer) before it fails as unreachable")
    tenant: str = Field("default", pattern=TENANT_PATTERN, validation_alias=_env("SPECRAG_TENANT"),
                        description="whose indexes: each tenant's corpora, lexical index, caches and Chroma data "
                                    "are its own (data_dir/tenants/<tenant>/ for any tenant but 'default')")
    index_lock_timeout_s: float = Field(600.0, ge=0, le=86_400, allow_inf_nan=False,
                                        validation_alias=_env("SPECRAG_INDEX_LOCK_TIMEOUT_S"),
                                        description="how long an index run waits for another on the same corpus")

    # chunking
    chunk_max_tokens: int = Field(1500, ge=100, le=100_000, validation_alias=_env("SPECRAG_CHUNK_MAX_TOKENS"),
                                  description="a chunk bigger than this is split into parts")

    # hostile input: every spec file is bounded (see pipeline/specs/limits.py)
    spec_max_bytes: int = Field(32 * 1024 * 1024, gt=0, validation_alias=_env("SPECRAG_SPEC_MAX_BYTES"),
                                description="largest spec file (entry or $ref target) read, in bytes")
    spec_timeout_s: float = Field(60.0, gt=0, le=86_400, allow_inf_nan=False,
                                  validation_alias=_env("SPECRAG_SPEC_TIMEOUT_S"),
                                  description="a spec still being read after this is skipped; its worker is replaced")
    spec_max_nodes: int = Field(2_000_000, gt=0, validation_alias=_env("SPECRAG_SPEC_MAX_NODES"),
                                description="values per spec (all its files), a YAML alias counted at every use")
    spec_max_depth: int = Field(100, gt=1, le=400, validation_alias=_env("SPECRAG_SPEC_MAX_DEPTH"),
                                description="nesting depth of a spec document")
    spec_max_aliases: int = Field(10_000, ge=0, validation_alias=_env("SPECRAG_SPEC_MAX_ALIASES"),
                                  description="YAML alias uses per spec")

    # embeddings
    embed_model: str = Field("sentence-transformers/all-MiniLM-L6-v2", min_length=1,
                             validation_alias=_env("SPECRAG_EMBED_MODEL"),
                             description="fastembed model name, 'openai:<model>', or 'none' for lexical only")
    embed_model_path: Path | None = Field(None, validation_alias=_env("SPECRAG_EMBED_MODEL_PATH"),
                                          description="local ONNX folder of the model (offline machines)")
    embed_threads: int | None = Field(None, ge=1, le=256, validation_alias=_env("SPECRAG_EMBED_THREADS"))

    # retrieval (names from the seed)
    max_primary_results: int = Field(5, ge=1, le=100, validation_alias=_env("RETRIEVAL_MAX_PRIMARY_RESULTS"))
    max_total_chunks: int = Field(15, ge=1, le=1000, validation_alias=_env("RETRIEVAL_MAX_TOTAL_CHUNKS"))
    max_depth: int = Field(3, ge=0, le=20, validation_alias=_env("RETRIEVAL_MAX_DEPTH"))
    context_token_limit: int = Field(4000, ge=100, le=2_000_000, validation_alias=_env("CONTEXT_TOKEN_LIMIT"))
    context_full_primaries: int = Field(1, ge=1, le=100, validation_alias=_env("CONTEXT_FULL_PRIMARIES"),
                                        description="of the first max_primary_results hits, how many enter the context in "
                                                    "full with their $ref closure (the others as signatures); 1 was "
                                                    "chosen by leave-one-set-out, see docs/evals.md")
    context_signature_depth: int = Field(10, ge=0, le=100, validation_alias=_env("CONTEXT_SIGNATURE_DEPTH"),
                                         description="ranked operations up to this rank that are not primaries get "
                                                     "a signature in the context (within the token limit); 0: none")
    context_other_api_signatures: int | None = Field(
        2, ge=0, le=100, validation_alias=_env("CONTEXT_OTHER_API_SIGNATURES"),
        description="at most this many signatures of APIs that stage 1 did not select, the best ranked (the "
                    "search fuses the whole fleet in; its best hits are the way back when stage 1 picked wrong); "
                    "None: no limit; 2 chosen by leave-one-set-out, see docs/evals.md")
    timeout_ms: int = Field(5000, ge=1, le=600_000, validation_alias=_env("RETRIEVAL_TIMEOUT_MS"))
    enable_query_analysis: bool = Field(True, validation_alias=_env("ENABLE_QUERY_ANALYSIS"),
                                        description="infer endpoint/schema/error intent and filter by chunk type")
    prioritize_primary: bool = Field(True, validation_alias=_env("CONTEXT_PRIORITIZE_PRIMARY"),
                                     description="60/40 slot split primary/references")
    compact_references: bool = Field(True, validation_alias=_env("CONTEXT_COMPACT_REFERENCES"),
                                     description="referenced components as names and types (primaries stay full)")
    closure_first: bool = Field(True, validation_alias=_env("CONTEXT_CLOSURE_FIRST"),
                                description="the best hits enter with their whole closure, before more hits")
    producer_steps: bool = Field(True, validation_alias=_env("RETRIEVAL_PRODUCER_STEPS"),
                                 description="place the operations that produce a hit's id parameters before it")
    method_weight: float = Field(0.5, ge=0, le=100, allow_inf_nan=False, validation_alias=_env("RETRIEVAL_METHOD_WEIGHT"),
                                 description="stage 3: weight of the operations whose HTTP method the question's verb "
                                             "that changes something asks for, fused with the ranking (1.0); 0 = off")
    log_retrieval_stats: bool = Field(False, validation_alias=_env("LOG_RETRIEVAL_STATS"))
    rrf_k: int = Field(60, ge=1, le=10_000, validation_alias=_env("RETRIEVAL_RRF_K"))
    vector_weight: float = Field(0.6, ge=0, le=100, allow_inf_nan=False, validation_alias=_env("RETRIEVAL_VECTOR_WEIGHT"))
    bm25_weight: float = Field(0.4, ge=0, le=100, allow_inf_nan=False, validation_alias=_env("RETRIEVAL_BM25_WEIGHT"))
    max_selected_apis: int = Field(3, ge=1, le=20, validation_alias=_env("SELECTION_MAX_APIS"),
                                   description="stage 1 by LLM: APIs it may pick")
    selection_keyword_max_apis: int = Field(4, ge=1, le=20, validation_alias=_env("SELECTION_KEYWORD_MAX_APIS"),
                                            description="offline stage 1 (and the LLM's fallback): APIs the keyword "
                                                        "selector keeps (chosen leave-one-set-out, README)")
    selection_drop_off: float = Field(0.9, ge=0, le=1, allow_inf_nan=False, validation_alias=_env("SELECTION_DROP_OFF"),
                                      description="offline stage 1: an API is kept only if its fused score is at "
                                                  "least this share of the first API's (0 keeps all): one API when "
                                                  "its evidence leads clearly, more when unsure; 0.9 chosen by "
                                                  "leave-one-set-out, see docs/evals.md")
    selection_weights: tuple[NonNegativeWeight, NonNegativeWeight, NonNegativeWeight] = Field(
        (0.0, 0.25, 1.0), validation_alias=_env("SELECTION_WEIGHTS"),
        json_schema_extra={"allowed": "a JSON list of three numbers, each >= 0 and <= 100"},
        description="offline stage 1: weights of catalog BM25, catalog vector and endpoint evidence (JSON list)")
    selection_centroid_weight: float = Field(0.5, ge=0, le=1, allow_inf_nan=False,
                                             validation_alias=_env("SELECTION_CENTROID_WEIGHT"),
                                             description="offline stage 1: share of an API's mean endpoint vector in "
                                                         "its catalog vector (0: the catalog entry's text alone)")
    selection_rrf_k: int = Field(10, ge=0, le=10_000, validation_alias=_env("SELECTION_RRF_K"),
                                 description="offline stage 1: reciprocal rank fusion constant")
    selection_evidence_depth: int = Field(50, ge=1, le=1000, validation_alias=_env("SELECTION_EVIDENCE_DEPTH"),
                                          description="offline stage 1: fleet-wide endpoint hits that vote for APIs")
    fleet_weight: float = Field(0.5, ge=0, le=100, allow_inf_nan=False, validation_alias=_env("RETRIEVAL_FLEET_WEIGHT"),
                                description="stage 3: weight of the whole-fleet search fused with the selected "
                                            "APIs' search (1.0); 0 makes stage 1 a hard filter")
    api_decay: float | None = Field(0.6, gt=0, le=1, allow_inf_nan=False, validation_alias=_env("RETRIEVAL_API_DECAY"),
                                    description="stage 3: each selected API is ranked on its own and the i-th "
                                                "weighs decay**i in the merge; unset to rank them as one scope")
    api_order_margin: float = Field(0.07, ge=0, le=1, allow_inf_nan=False,
                                    validation_alias=_env("RETRIEVAL_API_ORDER_MARGIN"),
                                    description="stage 3: when offline stage 1's first API leads the second by "
                                                "less than this share of its score, the per-API merge is fused "
                                                "with the selected APIs ranked as one scope; 0 = never")

    # LLM (stages 1 and 2, optional synthesis)
    openai_api_key: str | None = Field(None, min_length=1, validation_alias=_env("OPENAI_API_KEY"),
                                       json_schema_extra={"secret": True})
    llm_base_url: str | None = Field(None, pattern=r"^https?://\S+$",
                                     validation_alias=_env("SPECRAG_LLM_BASE_URL", "OPENAI_BASE_URL"),
                                     json_schema_extra={"allowed": "an http:// or https:// URL"})
    llm_model: str = Field("gpt-4o-mini", min_length=1, validation_alias=_env("SPECRAG_LLM_MODEL"))
    llm_timeout_s: float = Field(20.0, gt=0, le=600, allow_inf_nan=False, validation_alias=_env("SPECRAG_LLM_TIMEOUT_S"))
    llm_max_attempts: int = Field(3, ge=1, le=10, validation_alias=_env("SPECRAG_LLM_MAX_ATTEMPTS"))
    llm_deadline_s: float = Field(45.0, gt=0, le=3600, allow_inf_nan=False,
                                  validation_alias=_env("SPECRAG_LLM_DEADLINE_S"),
                                  description="all LLM calls of one query end within this many seconds")
    llm_cache_size: int = Field(1024, ge=1, le=1_000_000, validation_alias=_env("SPECRAG_LLM_CACHE_SIZE"))
    llm_cache_ttl_s: float = Field(3600.0, gt=0, le=30 * 86_400, allow_inf_nan=False,
                                   validation_alias=_env("SPECRAG_LLM_CACHE_TTL_S"))
    synthesize: bool = Field(False, validation_alias=_env("SPECRAG_SYNTHESIZE"),
                             description="with an LLM, answer from the context with [Source N] citations")
    prompts_dir: Path | None = Field(None, validation_alias=_env("SPECRAG_PROMPTS_DIR"),
                                     description="folder of prompt files; unset: the prompts shipped in the package")
    selection_prompt_token_budget: int = Field(6000, ge=500, le=1_000_000,
                                               validation_alias=_env("SPECRAG_SELECTION_PROMPT_TOKENS"))
    expansion_prompt_token_budget: int = Field(6000, ge=500, le=1_000_000,
                                               validation_alias=_env("SPECRAG_EXPANSION_PROMPT_TOKENS"))

    def __init__(self, **values: Any) -> None:
        """As BaseSettings, plus: the ``.env`` of :func:`default_env_file` unless ``_env_file`` is
        given, a ``SettingsError`` (one line) instead of pydantic's ValidationError, and the key rule."""
        env_file = values.pop("_env_file", _UNSET)
        env_file = default_env_file() if env_file is _UNSET else env_file
        try:
            super().__init__(_env_file=env_file, **values)
        except ValidationError as exc:
            raise describe_validation_error(exc, type(self)) from None
        withhold, own_key = key_for_dotenv_url(env_file and Path(env_file), _given_fields(values, type(self)))
        if withhold:
            self.openai_api_key = own_key

    @property
    def context_primaries(self) -> int:
        """How many ranked hits a context shows in full, with their closure."""
        return min(self.max_primary_results, self.context_full_primaries)

    @field_validator("collection")
    @classmethod
    def _chroma_name(cls, value: str) -> str:
        import re

        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{1,510}[A-Za-z0-9]", value) or ".." in value:
            raise ValueError(COLLECTION_RULE)
        return value

    @model_validator(mode="after")
    def _weights_rank_something(self) -> "Settings":
        if self.vector_weight + self.bm25_weight <= 0:
            raise ValueError("RETRIEVAL_VECTOR_WEIGHT and RETRIEVAL_BM25_WEIGHT are both 0: at least one "
                             "must be > 0 for the fusion to rank anything")
        return self

    # serving (specrag serve / specrag mcp)
    serve_host: str = Field("127.0.0.1", validation_alias=_env("SPECRAG_HOST"),
                            description="address the HTTP service and the MCP streamable-http transport bind to")
    serve_port: int = Field(8080, ge=0, le=65535, validation_alias=_env("SPECRAG_PORT"))
    serve_threads: int = Field(32, ge=1, le=256, validation_alias=_env("SPECRAG_SERVE_THREADS"),
                               description="worker threads for the requests' CPU work; concurrent searches "
                                           "in them share one matrix product per batch")
    serve_workers: int = Field(1, ge=1, le=64, validation_alias=_env("SPECRAG_SERVE_WORKERS"),
                               description="processes of `specrag serve`, each with its own copy of the index "
                                           "and its own interpreter lock; /metrics sums them all")
    otel_exporter: str = Field("none", pattern="^(none|console|otlp)$", validation_alias=_env("SPECRAG_OTEL_EXPORTER"),
                               description="export each request's span tree: none, console, or otlp "
                                           "(OTEL_EXPORTER_OTLP_ENDPOINT; needs the otel extra)")
    api_keys_file: Path | None = Field(None, validation_alias=_env("SPECRAG_API_KEYS_FILE"),
                                       description="JSON file of API keys (as SHA-256 hashes), each naming its tenant")
    api_keys: SecretStr | None = Field(None, validation_alias=_env("SPECRAG_API_KEYS"),
                                       json_schema_extra={"secret": True,
                                                          "allowed": "comma-separated TENANT:KEY or TENANT:sha256:HEX"},
                                       description="API keys given in the environment (added to the file's)")
    reload_interval_s: float = Field(2.0, ge=0, le=3600, allow_inf_nan=False,
                                     validation_alias=_env("SPECRAG_RELOAD_INTERVAL_S"),
                                     description="how often a server checks for a newer index generation (0: never)")
    shutdown_timeout_s: float = Field(30.0, gt=0, le=3600, allow_inf_nan=False,
                                      validation_alias=_env("SPECRAG_SHUTDOWN_TIMEOUT_S"),
                                      description="on SIGTERM, how long in-flight requests may still run")

    @property
    def tenant_dir(self) -> Path:
        """The folder of this tenant's corpora: the data dir itself for the default tenant, so the
        indexes built before tenants existed stay where they are."""
        return self.data_dir if self.tenant == DEFAULT_TENANT else self.data_dir / "tenants" / self.tenant

    @property
    def catalogs_path(self) -> Path:
        """Catalogs live with the index they describe unless placed elsewhere."""
        return self.catalog_dir or self.data_dir / "catalogs"

    @property
    def llm_configured(self) -> bool:
        return bool(self.openai_api_key or self.llm_base_url)


def _given_fields(values: dict[str, Any], cls: type[Settings]) -> set[str]:
    """Field names of the values passed in code (by field name or by env var name)."""
    names = set()
    for name, field in cls.model_fields.items():
        aliases = set(field.validation_alias.choices) if isinstance(field.validation_alias, AliasChoices) else set()
        if name in values or aliases & set(values):
            names.add(name)
    return names
