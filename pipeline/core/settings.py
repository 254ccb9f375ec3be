"""One typed settings object in sections, read from the environment (and a ``.env``) or built in code.

Passed into every component explicitly; nothing reads a hidden global. ``Settings`` holds one
typed section per concern (``settings.storage.data_dir``, ``settings.retrieval.rrf_k``, ...);
each section field keeps the flat environment variable it always had (``SPECRAG_DATA_DIR``,
``RETRIEVAL_RRF_K``): :mod:`specrag.core.settings_sources` reads those names and nests them, and
``Settings(rrf_k=5)`` (flat keywords, by field name or variable name) lands in the section that
owns the field. docs/configuration.md lists the variables, generated from these sections and
their fields' descriptions (:mod:`specrag.core.settings_reference`). Every field has its allowed
range; a value outside it is a ``SettingsError`` whose one line names the variable and what it
accepts (:mod:`specrag.core.settings_errors`). Which ``.env`` is read, and why a ``.env`` cannot
redirect an API key from the environment: :mod:`specrag.core.envfile`.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, SettingsConfigDict
from specrag.core import caches
from specrag.core.envfile import default_env_file, key_for_dotenv_url
from specrag.core.settings_errors import describe_validation_error
from specrag.core.settings_sources import FlatNamesSource, field_keys, given_fields

NonNegativeWeight = Annotated[float, Field(ge=0, le=100, allow_inf_nan=False)]

_UNSET: Any = object()
DEFAULT_TENANT = "default"
TENANT_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$"
COLLECTION_RULE = "3-512 characters from A-Z a-z 0-9 . _ -, starting and ending with a letter or digit, no '..'"


def _env(*names: str) -> AliasChoices:
    return AliasChoices(*names)


DEFAULT_PROMPTS_PACKAGE = "specrag.default_prompts"  # the prompts a prompts_dir of None means (the repository's prompts/)


class Section(BaseModel):
    """One group of settings. Its title heads its table in docs/configuration.md; a field is set by
    its name or by its environment variable name (the alias)."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore")


class StorageSettings(Section):
    """Where indexes, catalogs and Chroma data live, and whose they are (tenant)."""

    model_config = ConfigDict(title='Storage')

    data_dir: Path = Field(Path(".specrag"), validation_alias=_env("SPECRAG_DATA_DIR"),
                           description="index folder; each corpus gets `corpora/<name>-<hash>/` (manifest, local "
                                       "index, Chroma, catalogs; see [What lives "
                                       "where](architecture.md#what-lives-where))")
    catalog_dir: Path | None = Field(None, validation_alias=_env("SPECRAG_CATALOG_DIR"),
                                     description="where `catalog.json` and `indexes/{file_id}.json` go (`ingest` "
                                                 "and `index` alike); unset: the corpus's own folder, `<data "
                                                 "dir>/corpora/<name>-<hash>/catalogs`")
    tenant: str = Field("default", pattern=TENANT_PATTERN, validation_alias=_env("SPECRAG_TENANT"),
                        description="whose indexes a command reads and writes (1-63 of `A-Za-z0-9_-`): each "
                                    "tenant's corpora, lexical index, caches and Chroma data are its own; a tenant "
                                    "other than `default` keeps its corpora under `<data dir>/tenants/<tenant>/`, "
                                    "and on a Chroma server in a Chroma tenant of that name")
    index_lock_timeout_s: float = Field(600.0, ge=0, le=86_400, allow_inf_nan=False,
                                        validation_alias=_env("SPECRAG_INDEX_LOCK_TIMEOUT_S"),
                                        description="how long `specrag index` waits for another run on the same "
                                                    "corpus before it refuses (0: refuse at once)")
    chroma_host: str | None = Field(None, min_length=1, validation_alias=_env("SPECRAG_CHROMA_HOST"),
                                    description="use a Chroma server (`HttpClient`) on this host instead of the "
                                                "embedded `PersistentClient`")
    chroma_port: int = Field(8000, ge=1, le=65535, validation_alias=_env("SPECRAG_CHROMA_PORT"),
                             description="port of the Chroma server on `SPECRAG_CHROMA_HOST`")
    collection: str = Field("specrag_chunks", validation_alias=_env("SPECRAG_COLLECTION"),
                            json_schema_extra={"allowed": COLLECTION_RULE},
                            description="Chroma collection name; on a server, the prefix of each corpus's "
                                        "collection `<prefix>-<corpus key>`")
    chroma_sync_s: float = Field(30.0, ge=0, le=86_400, allow_inf_nan=False, validation_alias=_env("SPECRAG_CHROMA_SYNC_S"),
                                 description="with a Chroma server: a serving replica checks for a newer published "
                                             "index at most this often (started by a request, in a background "
                                             "thread: no request waits for it; the local index serves meanwhile); 0 "
                                             "= on every request, one check at a time. `/readyz` reports the last "
                                             "check under `chroma`")
    chroma_timeout_s: float = Field(30.0, gt=0, le=3_600, allow_inf_nan=False,
                                    validation_alias=_env("SPECRAG_CHROMA_TIMEOUT_S"),
                                    description="with a Chroma server: how long one call to it (connecting, "
                                                "sending, waiting for the answer) may take before it fails as "
                                                "unreachable, one line naming host:port. A stopped or hung server "
                                                "then fails a build, a pull or a replica's first query within this "
                                                "time; a serving replica keeps serving its local index")

    @field_validator("collection")
    @classmethod
    def _chroma_name(cls, value: str) -> str:
        import re

        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{1,510}[A-Za-z0-9]", value) or ".." in value:
            raise ValueError(COLLECTION_RULE)
        return value


class IngestSettings(Section):
    """How specs are chunked, and the bounds on every spec file read: hostile input (see pipeline/specs/limits.py)."""

    model_config = ConfigDict(title='Ingest limits')

    chunk_max_tokens: int = Field(1500, ge=100, le=100_000, validation_alias=_env("SPECRAG_CHUNK_MAX_TOKENS"),
                                  description="a chunk bigger than this is split into parts that reference each "
                                              "other; recorded in the index: a change re-chunks every spec (vectors "
                                              "of unchanged texts are kept)")
    spec_max_bytes: int = Field(32 * 1024 * 1024, gt=0, validation_alias=_env("SPECRAG_SPEC_MAX_BYTES"),
                                description="largest spec file read (entry or `$ref` target), in bytes (default 32 "
                                            "MiB); a bigger one is skipped with its reason")
    spec_timeout_s: float = Field(60.0, gt=0, le=86_400, allow_inf_nan=False,
                                  validation_alias=_env("SPECRAG_SPEC_TIMEOUT_S"),
                                  description="a spec still being read after this many seconds is skipped as `timed "
                                              "out`; its worker process is replaced")
    spec_max_nodes: int = Field(2_000_000, gt=0, validation_alias=_env("SPECRAG_SPEC_MAX_NODES"),
                                description="values per spec, all its files together; a YAML alias counts its whole "
                                            "subtree at every use")
    spec_max_depth: int = Field(100, gt=1, le=400, validation_alias=_env("SPECRAG_SPEC_MAX_DEPTH"),
                                description="nesting depth of a spec document")
    spec_max_aliases: int = Field(10_000, ge=0, validation_alias=_env("SPECRAG_SPEC_MAX_ALIASES"),
                                  description="YAML alias uses per spec")


class RemoteSettings(Section):
    """Specs at URLs (``--corpus https://...``): the bounds on every fetch."""

    model_config = ConfigDict(title='Spec URLs')

    remote_max_bytes: int = Field(32 * 1024 * 1024, gt=0, validation_alias=_env("SPECRAG_REMOTE_MAX_BYTES"),
                                  description="most bytes fetched for one spec URL, its referenced documents "
                                              "included (default 32 MiB); a download stops as soon as it passes "
                                              "this and the URL is skipped with its reason")
    remote_timeout_s: float = Field(30.0, gt=0, le=3600, allow_inf_nan=False,
                                    validation_alias=_env("SPECRAG_REMOTE_TIMEOUT_S"),
                                    description="seconds to connect, to wait for each read, and for one document's "
                                                "whole download; past it the URL is skipped as timed out")
    remote_max_redirects: int = Field(5, ge=0, le=30, validation_alias=_env("SPECRAG_REMOTE_MAX_REDIRECTS"),
                                      description="redirects followed per request (to http/https URLs only)")
    remote_max_documents: int = Field(2000, ge=1, le=100_000, validation_alias=_env("SPECRAG_REMOTE_MAX_DOCUMENTS"),
                                      description="documents fetched for one spec URL: the entry and the "
                                                  "documents its relative `$ref`s name")


class EmbeddingSettings(Section):
    """The embedding model and its runtime."""

    model_config = ConfigDict(title='Embeddings')

    embed_model: str = Field("sentence-transformers/all-MiniLM-L6-v2", min_length=1,
                             validation_alias=_env("SPECRAG_EMBED_MODEL"),
                             description="fastembed model name; `openai:<model>` (extra `openai-embeddings`); "
                                         "`none` for lexical only")
    embed_model_path: Path | None = Field(None, validation_alias=_env("SPECRAG_EMBED_MODEL_PATH"),
                                          description="local ONNX folder of the model (offline machines)")
    embed_threads: int | None = Field(None, ge=1, le=256, validation_alias=_env("SPECRAG_EMBED_THREADS"),
                                      description="ONNX Runtime threads; unset: all cores")


class RetrievalSettings(Section):
    """Stage 3: the ranking (fusion, per-API merge, priors) and the reference expansion's bounds."""

    model_config = ConfigDict(title='Retrieval')

    max_primary_results: int = Field(5, ge=1, le=100, validation_alias=_env("RETRIEVAL_MAX_PRIMARY_RESULTS"),
                                     description="primary chunks per query (the retriever's top k; plans read this "
                                                 "many)")
    max_total_chunks: int = Field(15, ge=1, le=1000, validation_alias=_env("RETRIEVAL_MAX_TOTAL_CHUNKS"),
                                  description="primary + referenced chunks")
    max_depth: int = Field(3, ge=0, le=20, validation_alias=_env("RETRIEVAL_MAX_DEPTH"),
                           description="`$ref` hops followed")
    timeout_ms: int = Field(5000, ge=1, le=600_000, validation_alias=_env("RETRIEVAL_TIMEOUT_MS"),
                            description="reference expansion deadline, in milliseconds; after it the context is "
                                        "partial, marked `truncated`")
    enable_query_analysis: bool = Field(True, validation_alias=_env("ENABLE_QUERY_ANALYSIS"),
                                        description="infer endpoint / schema / errors intent and filter by chunk "
                                                    "type (relaxed when < 3 results)")
    rrf_k: int = Field(60, ge=1, le=10_000, validation_alias=_env("RETRIEVAL_RRF_K"),
                       description="reciprocal rank fusion constant of the vector and BM25 rankings")
    vector_weight: float = Field(0.6, ge=0, le=100, allow_inf_nan=False, validation_alias=_env("RETRIEVAL_VECTOR_WEIGHT"),
                                 description="weight of the vector ranking in the fusion (this and `bm25_weight` "
                                             "not both 0)")
    bm25_weight: float = Field(0.4, ge=0, le=100, allow_inf_nan=False, validation_alias=_env("RETRIEVAL_BM25_WEIGHT"),
                               description="weight of the BM25 ranking in the fusion (this and `vector_weight` not "
                                           "both 0)")
    fleet_weight: float = Field(0.5, ge=0, le=100, allow_inf_nan=False, validation_alias=_env("RETRIEVAL_FLEET_WEIGHT"),
                                description="stage 3 (soft stage 1): weight of the whole-fleet ranking merged with "
                                            "the selected APIs' (1.0); 0 makes stage 1 a hard filter")
    api_decay: float | None = Field(0.6, gt=0, le=1, allow_inf_nan=False, validation_alias=_env("RETRIEVAL_API_DECAY"),
                                    description="stage 3: each selected API is ranked on its own and the i-th "
                                                "weighs decay^i in the merge; unset: the selected APIs ranked as "
                                                "one scope")
    api_order_margin: float = Field(0.07, ge=0, le=1, allow_inf_nan=False,
                                    validation_alias=_env("RETRIEVAL_API_ORDER_MARGIN"),
                                    description="stage 3: when offline stage 1's first API leads the second by less "
                                                "than this share of its fused score, the per-API merge is fused "
                                                "(equal weights) with the selected APIs ranked as one scope: an "
                                                "unsure order does not cost the API with the stronger hits its "
                                                "places; 0 = never (chosen leave-one-set-out, see "
                                                "[evals.md](evals.md#tuned-constants))")
    method_weight: float = Field(0.5, ge=0, le=100, allow_inf_nan=False, validation_alias=_env("RETRIEVAL_METHOD_WEIGHT"),
                                 description="stage 3's method prior: weight of the operations whose HTTP method "
                                             "the question's verb that changes something asks for ('create' "
                                             "POST/PUT, 'rename' PUT/PATCH/POST, 'remove' DELETE), fused with the "
                                             "ranking (1.0); 0 = off (chosen leave-one-set-out, see "
                                             "[evals.md](evals.md#tuned-constants))")
    producer_steps: bool = Field(True, validation_alias=_env("RETRIEVAL_PRODUCER_STEPS"),
                                 description="producer expansion: the operations that yield a hit's id parameters "
                                             "are placed before it in the ranking")
    log_retrieval_stats: bool = Field(False, validation_alias=_env("LOG_RETRIEVAL_STATS"),
                                      description="log every query's stats as JSON")

    @model_validator(mode="after")
    def _weights_rank_something(self) -> "RetrievalSettings":
        if self.vector_weight + self.bm25_weight <= 0:
            raise ValueError("RETRIEVAL_VECTOR_WEIGHT and RETRIEVAL_BM25_WEIGHT are both 0: at least one "
                             "must be > 0 for the fusion to rank anything")
        return self


class ContextSettings(Section):
    """What a context shows: its token budget, full primaries, signatures."""

    model_config = ConfigDict(title='Context')

    context_token_limit: int = Field(4000, ge=100, le=2_000_000, validation_alias=_env("CONTEXT_TOKEN_LIMIT"),
                                     description="token budget of the context (tiktoken cl100k)")
    context_full_primaries: int = Field(1, ge=1, le=100, validation_alias=_env("CONTEXT_FULL_PRIMARIES"),
                                        description="of the first `max_primary_results` hits, how many a context "
                                                    "shows in full with their `$ref` closure (the others as "
                                                    "signatures); 1 chosen leave-one-set-out, see "
                                                    "[evals.md](evals.md#context-what-reaches-the-reader)")
    context_signature_depth: int = Field(10, ge=0, le=100, validation_alias=_env("CONTEXT_SIGNATURE_DEPTH"),
                                         description="ranked operations up to this rank that are not shown in full "
                                                     "get a signature (method, path, summary, parameters, "
                                                     "components used) in the budget left; 0: none")
    context_other_api_signatures: int | None = Field(
        2, ge=0, le=100, validation_alias=_env("CONTEXT_OTHER_API_SIGNATURES"),
        description="at most this many signatures go to APIs that stage 1 did not select (and that no full primary "
                    "comes from), the best ranked: the search fuses the whole fleet in, and its best hits are the "
                    "way back when stage 1 picked wrong; None (in code): no limit; 2 chosen leave-one-set-out, see "
                    "[evals.md](evals.md#context-what-reaches-the-reader)")
    prioritize_primary: bool = Field(True, validation_alias=_env("CONTEXT_PRIORITIZE_PRIMARY"),
                                     description="60/40 split: references keep at least 40% of the chunk slots and "
                                                 "of the tokens")
    compact_references: bool = Field(True, validation_alias=_env("CONTEXT_COMPACT_REFERENCES"),
                                     description="referenced components as property names and types (primaries stay "
                                                 "full)")
    context_example_requests: bool = Field(True, validation_alias=_env("CONTEXT_EXAMPLE_REQUESTS"),
                                           description="each primary operation comes with a ready request (curl and "
                                                       "raw HTTP: base URL, auth, required parameters, a minimal "
                                                       "valid body); its tokens count in the budget")
    closure_first: bool = Field(True, validation_alias=_env("CONTEXT_CLOSURE_FIRST"),
                                description="after the best hit, a hit enters the context only with its whole "
                                            "closure (else it is listed in `primaries_cut`); false: every primary "
                                            "kept, references share the rest (60/40)")


class SelectionSettings(Section):
    """Stage 1: which APIs a question goes to, offline and by LLM."""

    model_config = ConfigDict(title='API selection (stage 1)')

    max_selected_apis: int = Field(3, ge=1, le=20, validation_alias=_env("SELECTION_MAX_APIS"),
                                   description="stage 1 by LLM: APIs it may pick")
    selection_keyword_max_apis: int = Field(4, ge=1, le=20, validation_alias=_env("SELECTION_KEYWORD_MAX_APIS"),
                                            description="offline stage 1 (and the LLM's fallback): APIs the keyword "
                                                        "selector keeps (chosen leave-one-set-out, see "
                                                        "[evals.md](evals.md#tuned-constants))")
    selection_drop_off: float = Field(0.9, ge=0, le=1, allow_inf_nan=False, validation_alias=_env("SELECTION_DROP_OFF"),
                                      description="offline stage 1: an API is kept only if its fused score is at "
                                                  "least this share of the first API's: one API when its evidence "
                                                  "leads clearly, up to `SELECTION_KEYWORD_MAX_APIS` when unsure; 0 "
                                                  "keeps all (0.9 chosen leave-one-set-out, see "
                                                  "[evals.md](evals.md#context-what-reaches-the-reader))")
    selection_weights: tuple[NonNegativeWeight, NonNegativeWeight, NonNegativeWeight] = Field(
        (0.0, 0.25, 1.0), validation_alias=_env("SELECTION_WEIGHTS"),
        json_schema_extra={"allowed": "a JSON list of three numbers, each >= 0 and <= 100"},
        description="offline stage 1: weights of catalog BM25, catalog vector and endpoint evidence, as a JSON list "
                    "(chosen leave-one-set-out, see [evals.md](evals.md#tuned-constants))")
    selection_centroid_weight: float = Field(0.5, ge=0, le=1, allow_inf_nan=False,
                                             validation_alias=_env("SELECTION_CENTROID_WEIGHT"),
                                             description="offline stage 1: share of an API's mean endpoint vector "
                                                         "in its catalog vector, beside the entry's own text (name, "
                                                         "description, domains), which many specs leave at a "
                                                         "placeholder; 0: the entry's text alone (chosen "
                                                         "leave-one-set-out, see "
                                                         "[evals.md](evals.md#tuned-constants))")
    selection_rrf_k: int = Field(10, ge=0, le=10_000, validation_alias=_env("SELECTION_RRF_K"),
                                 description="offline stage 1: reciprocal rank fusion constant")
    selection_evidence_depth: int = Field(50, ge=1, le=1000, validation_alias=_env("SELECTION_EVIDENCE_DEPTH"),
                                          description="offline stage 1: fleet-wide endpoint hits that vote for APIs")


class LLMSettings(Section):
    """The LLM stages (1, 2 and optional synthesis): server, model, budgets, cache, prompts."""

    model_config = ConfigDict(title='LLM')

    openai_api_key: str | None = Field(None, min_length=1, validation_alias=_env("OPENAI_API_KEY"),
                                       json_schema_extra={"secret": True},
                                       description="enables the LLM stages with OpenAI (sent to "
                                                   "`SPECRAG_LLM_BASE_URL`'s server when one is set); never echoed "
                                                   "in an error")
    llm_base_url: str | None = Field(None, pattern=r"^https?://\S+$",
                                     validation_alias=_env("SPECRAG_LLM_BASE_URL", "OPENAI_BASE_URL"),
                                     json_schema_extra={"allowed": "an http:// or https:// URL"},
                                     description="any OpenAI-compatible server (vLLM, Ollama, llama.cpp)")
    llm_model: str = Field("gpt-4o-mini", min_length=1, validation_alias=_env("SPECRAG_LLM_MODEL"),
                           description="model for stages 1, 2 and synthesis")
    llm_timeout_s: float = Field(20.0, gt=0, le=600, allow_inf_nan=False, validation_alias=_env("SPECRAG_LLM_TIMEOUT_S"),
                                 description="timeout of one LLM request, in seconds")
    llm_max_attempts: int = Field(3, ge=1, le=10, validation_alias=_env("SPECRAG_LLM_MAX_ATTEMPTS"),
                                  description="requests per LLM call (the first and its retries)")
    llm_deadline_s: float = Field(45.0, gt=0, le=3600, allow_inf_nan=False,
                                  validation_alias=_env("SPECRAG_LLM_DEADLINE_S"),
                                  description="one deadline per query for all its LLM calls together (selection, "
                                              "expansion, synthesis): a query whose server never answers falls back "
                                              "within it")
    llm_cache_size: int = Field(1024, ge=1, le=1_000_000, validation_alias=_env("SPECRAG_LLM_CACHE_SIZE"),
                                description="entries of the LRU+TTL cache of selections and expansions")
    llm_cache_ttl_s: float = Field(3600.0, gt=0, le=30 * 86_400, allow_inf_nan=False,
                                   validation_alias=_env("SPECRAG_LLM_CACHE_TTL_S"),
                                   description="how long, in seconds, a cached selection or expansion is reused")
    synthesize: bool = Field(False, validation_alias=_env("SPECRAG_SYNTHESIZE"),
                             description="with an LLM, `query` answers from the context with `[Source N]` citations")
    prompts_dir: Path | None = Field(None, validation_alias=_env("SPECRAG_PROMPTS_DIR"),
                                     description="a folder of prompt files (`--prompts DIR` swaps the whole set); "
                                                 "unset: the prompts shipped in the package "
                                                 "(`specrag.default_prompts`, the repository's `prompts/`)")
    selection_prompt_token_budget: int = Field(6000, ge=500, le=1_000_000,
                                               validation_alias=_env("SPECRAG_SELECTION_PROMPT_TOKENS"),
                                               description="token budget of the stage 1 (selection) prompt; a "
                                                           "catalog that does not fit is shortlisted by BM25 first")
    expansion_prompt_token_budget: int = Field(6000, ge=500, le=1_000_000,
                                               validation_alias=_env("SPECRAG_EXPANSION_PROMPT_TOKENS"),
                                               description="token budget of the stage 2 (expansion) prompt; each "
                                                           "selected API's index gets an equal share, its lines "
                                                           "sharing words with the question kept first")


class ServingSettings(Section):
    """``specrag serve`` / ``specrag mcp``: listening, workers, keys, reloads, tracing."""

    model_config = ConfigDict(title='Serving')

    serve_host: str = Field("127.0.0.1", validation_alias=_env("SPECRAG_HOST"),
                            description="address `specrag serve` (and `specrag mcp --transport streamable-http`) "
                                        "listen on; `--host` overrides")
    serve_port: int = Field(8080, ge=0, le=65535, validation_alias=_env("SPECRAG_PORT"),
                            description="port `specrag serve` (and `specrag mcp --transport streamable-http`) "
                                        "listen on; `--port` overrides")
    serve_threads: int = Field(32, ge=1, le=256, validation_alias=_env("SPECRAG_SERVE_THREADS"),
                               description="worker threads of `specrag serve` for the requests' CPU work; "
                                           "concurrent vector searches in them share one matrix product. The "
                                           "service also runs BLAS single-threaded and freezes its startup objects "
                                           "out of the garbage collector (`pipeline/serve/concurrency.py` says why)")
    serve_workers: int = Field(1, ge=1, le=64, validation_alias=_env("SPECRAG_SERVE_WORKERS"),
                               description="processes of `specrag serve` (`--workers`) on one port, each with its "
                                           "own copy of the index (about 650 MB resident over the whole fleet) and "
                                           "its own interpreter lock; their metrics meet in a Prometheus "
                                           "multiprocess directory (`PROMETHEUS_MULTIPROC_DIR`, a fresh temporary "
                                           "one), so /metrics, whichever worker answers it, sums every worker's "
                                           "counters and histograms")
    reload_interval_s: float = Field(2.0, ge=0, le=3600, allow_inf_nan=False,
                                     validation_alias=_env("SPECRAG_RELOAD_INTERVAL_S"),
                                     description="how often `serve` checks each served index for a newer generation "
                                                 "and swaps it in; 0: never")
    shutdown_timeout_s: float = Field(30.0, gt=0, le=3600, allow_inf_nan=False,
                                      validation_alias=_env("SPECRAG_SHUTDOWN_TIMEOUT_S"),
                                      description="on SIGTERM, how long requests in flight may still run")
    api_keys_file: Path | None = Field(None, validation_alias=_env("SPECRAG_API_KEYS_FILE"),
                                       description="JSON file of API keys as SHA-256 hashes, each naming its tenant "
                                                   "(`specrag api-key TENANT --file F`); with keys, every route but "
                                                   "`/healthz`, `/readyz`, `/metrics`, `/openapi.json` needs one")
    api_keys: SecretStr | None = Field(None, validation_alias=_env("SPECRAG_API_KEYS"),
                                       json_schema_extra={"secret": True,
                                                          "allowed": "comma-separated TENANT:KEY or TENANT:sha256:HEX"},
                                       description="API keys in the environment, added to the file's: "
                                                   "comma-separated `TENANT:KEY` or `TENANT:sha256:<64 hex>`; never "
                                                   "echoed in an error")
    otel_exporter: str = Field("none", pattern="^(none|console|otlp)$", validation_alias=_env("SPECRAG_OTEL_EXPORTER"),
                               description="`console` or `otlp` exports each request's span tree to OpenTelemetry "
                                           "(`otlp` reads the standard `OTEL_EXPORTER_OTLP_*` variables; `pip "
                                           "install 'specrag[otel]'`); `none`: off")


class Settings(BaseSettings):
    """Every setting, one typed section per concern: ``settings.retrieval.rrf_k``.

    Built from flat names, as before sections existed: ``Settings(rrf_k=5, data_dir=...)`` puts
    each keyword in the section that owns the field (a field name or its variable name both
    work), and a section may be given whole (``retrieval=RetrievalSettings(...)``, or a dict of
    some of its fields); a flat keyword beats the same field in a section given beside it.
    ``model_copy(update={"data_dir": ...})`` takes flat field names the same way.
    """

    # .env: chosen per instance in __init__ (specrag.core.envfile), never the working folder's
    model_config = SettingsConfigDict(env_file=None, extra="ignore", populate_by_name=True, env_ignore_empty=True)

    storage: StorageSettings = Field(default_factory=StorageSettings)
    ingest: IngestSettings = Field(default_factory=IngestSettings)
    remote: RemoteSettings = Field(default_factory=RemoteSettings)
    embeddings: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings)
    context: ContextSettings = Field(default_factory=ContextSettings)
    selection: SelectionSettings = Field(default_factory=SelectionSettings)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    serving: ServingSettings = Field(default_factory=ServingSettings)

    def __init__(self, **values: Any) -> None:
        """As BaseSettings, plus: the ``.env`` of :func:`default_env_file` unless ``_env_file`` is
        given, a ``SettingsError`` (one line) instead of pydantic's ValidationError, and the key rule."""
        env_file = values.pop("_env_file", _UNSET)
        env_file = default_env_file() if env_file is _UNSET else env_file
        try:
            super().__init__(_env_file=env_file, **values)
        except ValidationError as exc:
            raise describe_validation_error(exc, type(self)) from None
        withhold, own_key = key_for_dotenv_url(env_file and Path(env_file), given_fields(type(self), values))
        if withhold:
            self.llm.openai_api_key = own_key

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings], init_settings: Any, env_settings: Any,
                                   dotenv_settings: Any, file_secret_settings: Any) -> tuple[FlatNamesSource]:
        """One source: code, then the environment, then the ``.env``, each read by the flat names of
        the section fields and nested (pydantic-settings would look for one variable per section)."""
        return (FlatNamesSource(settings_cls, init_settings.init_kwargs, dotenv_settings.env_file,
                                dotenv_settings.env_file_encoding),)

    @classmethod
    def sections(cls) -> dict[str, type[Section]]:
        """Section attribute -> its model, in the order of the reference."""
        return {name: field.annotation for name, field in cls.model_fields.items()}  # type: ignore[misc]

    @classmethod
    @caches.register
    @cache
    def flat_fields(cls) -> dict[str, tuple[str, FieldInfo]]:
        """Every field of every section: name -> (its section's attribute, its FieldInfo). A flat name
        (field or variable) must mean one field, or flat keywords and variables would be ambiguous."""
        fields: dict[str, tuple[str, FieldInfo]] = {}
        keys: dict[str, str] = {}
        for section, model in cls.sections().items():
            for name, field in model.model_fields.items():
                if name in fields:
                    raise TypeError(f"settings field {name!r} is in settings.{fields[name][0]} and settings.{section}: "
                                    f"a flat name must be one field's")
                for key in field_keys(name, field):
                    if keys.setdefault(key, name) != name:
                        raise TypeError(f"settings {keys[key]!r} and {name!r} (settings.{section}) are both set by "
                                        f"{key!r}: a flat name must be one field's")
                fields[name] = (section, field)
        return fields

    def flat_dump(self, **dump: Any) -> dict[str, Any]:
        """``{field: value}`` over all sections (``model_dump``'s keywords pass through): the flat
        view that run records and reports keep."""
        return {name: value for section in type(self).sections() for name, value in
                getattr(self, section).model_dump(**dump).items()}

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> "Settings":
        """As pydantic's (no validation), and a flat field name in ``update`` updates that field of its
        section. The copy's sections are its own: changing one never reaches the original."""
        flat = type(self).flat_fields()
        by_section: dict[str, dict[str, Any]] = {}
        rest: dict[str, Any] = {}
        for key, value in (update or {}).items():
            if key in flat:
                by_section.setdefault(flat[key][0], {})[key] = value
            else:
                rest[key] = value
        copy = super().model_copy(update=rest, deep=deep)
        for section in type(self).sections():
            copy.__dict__[section] = getattr(copy, section).model_copy(update=by_section.get(section))
        return copy

    def __getattr__(self, name: str) -> Any:
        section = type(self).flat_fields().get(name, (None,))[0]
        if section is not None:  # a reader from before sections: say where the field went
            raise AttributeError(f"'Settings' has no attribute {name!r}: it is settings.{section}.{name}")
        return super().__getattr__(name)  # type: ignore[misc]

    @property
    def context_primaries(self) -> int:
        """How many ranked hits a context shows in full, with their closure."""
        return min(self.retrieval.max_primary_results, self.context.context_full_primaries)

    @property
    def tenant_dir(self) -> Path:
        """The folder of this tenant's corpora: the data dir itself for the default tenant, so the
        indexes built before tenants existed stay where they are."""
        storage = self.storage
        return storage.data_dir if storage.tenant == DEFAULT_TENANT else storage.data_dir / "tenants" / storage.tenant

    @property
    def catalogs_path(self) -> Path:
        """Catalogs live with the index they describe unless placed elsewhere."""
        return self.storage.catalog_dir or self.storage.data_dir / "catalogs"

    @property
    def llm_configured(self) -> bool:
        return bool(self.llm.openai_api_key or self.llm.llm_base_url)
