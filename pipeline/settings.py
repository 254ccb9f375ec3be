"""One typed settings object, read from the environment (and ``.env``) or built in code.

Passed into every component explicitly; nothing reads a hidden global. Env var names are the
field aliases below and are listed in the README.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict


def _env(*names: str) -> AliasChoices:
    return AliasChoices(*names)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_file=".env", extra="ignore", populate_by_name=True)

    # where things live
    data_dir: Path = Field(Path(".specrag"), validation_alias=_env("SPECRAG_DATA_DIR"),
                           description="index folder: Chroma, BM25, manifest")
    catalog_dir: Path | None = Field(None, validation_alias=_env("SPECRAG_CATALOG_DIR"),
                                     description="catalog.json and indexes/{file_id}.json; default <data_dir>/catalogs")
    chroma_host: str | None = Field(None, validation_alias=_env("SPECRAG_CHROMA_HOST"),
                                    description="use a Chroma server (HttpClient) instead of the embedded store")
    chroma_port: int = Field(8000, validation_alias=_env("SPECRAG_CHROMA_PORT"))
    collection: str = Field("specrag_chunks", validation_alias=_env("SPECRAG_COLLECTION"))

    # chunking
    chunk_max_tokens: int = Field(1500, validation_alias=_env("SPECRAG_CHUNK_MAX_TOKENS"),
                                  description="a chunk bigger than this is split into parts")

    # hostile input: every spec file is bounded (see pipeline/specs/limits.py)
    spec_max_bytes: int = Field(32 * 1024 * 1024, gt=0, validation_alias=_env("SPECRAG_SPEC_MAX_BYTES"),
                                description="largest spec file (entry or $ref target) read, in bytes")
    spec_timeout_s: float = Field(60.0, gt=0, validation_alias=_env("SPECRAG_SPEC_TIMEOUT_S"),
                                  description="a spec still being read after this is skipped; its worker is replaced")
    spec_max_nodes: int = Field(2_000_000, gt=0, validation_alias=_env("SPECRAG_SPEC_MAX_NODES"),
                                description="values per spec (all its files), a YAML alias counted at every use")
    spec_max_depth: int = Field(100, gt=1, le=400, validation_alias=_env("SPECRAG_SPEC_MAX_DEPTH"),
                                description="nesting depth of a spec document")
    spec_max_aliases: int = Field(10_000, ge=0, validation_alias=_env("SPECRAG_SPEC_MAX_ALIASES"),
                                  description="YAML alias uses per spec")

    # embeddings
    embed_model: str = Field("sentence-transformers/all-MiniLM-L6-v2", validation_alias=_env("SPECRAG_EMBED_MODEL"),
                             description="fastembed model name, 'openai:<model>', or 'none' for lexical only")
    embed_model_path: Path | None = Field(None, validation_alias=_env("SPECRAG_EMBED_MODEL_PATH"),
                                          description="local ONNX folder of the model (offline machines)")
    embed_threads: int | None = Field(None, validation_alias=_env("SPECRAG_EMBED_THREADS"))

    # retrieval (names from the seed)
    max_primary_results: int = Field(5, validation_alias=_env("RETRIEVAL_MAX_PRIMARY_RESULTS"))
    max_total_chunks: int = Field(15, validation_alias=_env("RETRIEVAL_MAX_TOTAL_CHUNKS"))
    max_depth: int = Field(3, validation_alias=_env("RETRIEVAL_MAX_DEPTH"))
    context_token_limit: int = Field(4000, validation_alias=_env("CONTEXT_TOKEN_LIMIT"))
    timeout_ms: int = Field(5000, validation_alias=_env("RETRIEVAL_TIMEOUT_MS"))
    enable_query_analysis: bool = Field(True, validation_alias=_env("ENABLE_QUERY_ANALYSIS"),
                                        description="infer endpoint/schema/error intent and filter by chunk type")
    prioritize_primary: bool = Field(True, validation_alias=_env("CONTEXT_PRIORITIZE_PRIMARY"),
                                     description="60/40 slot split primary/references")
    compact_references: bool = Field(True, validation_alias=_env("CONTEXT_COMPACT_REFERENCES"),
                                     description="referenced components as names and types (primaries stay full)")
    closure_first: bool = Field(True, validation_alias=_env("CONTEXT_CLOSURE_FIRST"),
                                description="the best hits enter with their whole closure, before more hits")
    log_retrieval_stats: bool = Field(False, validation_alias=_env("LOG_RETRIEVAL_STATS"))
    rrf_k: int = Field(60, validation_alias=_env("RETRIEVAL_RRF_K"))
    vector_weight: float = Field(0.6, validation_alias=_env("RETRIEVAL_VECTOR_WEIGHT"))
    bm25_weight: float = Field(0.4, validation_alias=_env("RETRIEVAL_BM25_WEIGHT"))
    max_selected_apis: int = Field(3, validation_alias=_env("SELECTION_MAX_APIS"))
    selection_weights: tuple[float, float, float] = Field(
        (0.0, 0.25, 1.0), validation_alias=_env("SELECTION_WEIGHTS"),
        description="offline stage 1: weights of catalog BM25, catalog vector and endpoint evidence (JSON list)")
    selection_rrf_k: int = Field(10, validation_alias=_env("SELECTION_RRF_K"),
                                 description="offline stage 1: reciprocal rank fusion constant")
    selection_evidence_depth: int = Field(50, validation_alias=_env("SELECTION_EVIDENCE_DEPTH"),
                                          description="offline stage 1: fleet-wide endpoint hits that vote for APIs")
    fleet_weight: float = Field(0.5, validation_alias=_env("RETRIEVAL_FLEET_WEIGHT"),
                                description="stage 3: weight of the whole-fleet search fused with the selected "
                                            "APIs' search (1.0); 0 makes stage 1 a hard filter")
    api_decay: float | None = Field(0.7, validation_alias=_env("RETRIEVAL_API_DECAY"),
                                    description="stage 3: each selected API is ranked on its own and the i-th "
                                                "weighs decay**i in the merge; unset to rank them as one scope")

    # LLM (stages 1 and 2, optional synthesis)
    openai_api_key: str | None = Field(None, validation_alias=_env("OPENAI_API_KEY"))
    llm_base_url: str | None = Field(None, validation_alias=_env("SPECRAG_LLM_BASE_URL", "OPENAI_BASE_URL"))
    llm_model: str = Field("gpt-4o-mini", validation_alias=_env("SPECRAG_LLM_MODEL"))
    llm_timeout_s: float = Field(20.0, validation_alias=_env("SPECRAG_LLM_TIMEOUT_S"))
    llm_max_attempts: int = Field(3, validation_alias=_env("SPECRAG_LLM_MAX_ATTEMPTS"))
    llm_deadline_s: float = Field(45.0, validation_alias=_env("SPECRAG_LLM_DEADLINE_S"))
    llm_cache_size: int = Field(1024, validation_alias=_env("SPECRAG_LLM_CACHE_SIZE"))
    llm_cache_ttl_s: float = Field(3600.0, validation_alias=_env("SPECRAG_LLM_CACHE_TTL_S"))
    synthesize: bool = Field(False, validation_alias=_env("SPECRAG_SYNTHESIZE"),
                             description="with an LLM, answer from the context with [Source N] citations")
    prompts_dir: Path = Field(Path(__file__).resolve().parent.parent / "prompts",
                              validation_alias=_env("SPECRAG_PROMPTS_DIR"))
    selection_prompt_token_budget: int = Field(6000, validation_alias=_env("SPECRAG_SELECTION_PROMPT_TOKENS"))
    expansion_prompt_token_budget: int = Field(6000, validation_alias=_env("SPECRAG_EXPANSION_PROMPT_TOKENS"))

    # serving (specrag serve / specrag mcp)
    serve_host: str = Field("127.0.0.1", validation_alias=_env("SPECRAG_HOST"),
                            description="address the HTTP service and the MCP streamable-http transport bind to")
    serve_port: int = Field(8080, ge=0, le=65535, validation_alias=_env("SPECRAG_PORT"))
    otel_exporter: str = Field("none", pattern="^(none|console|otlp)$", validation_alias=_env("SPECRAG_OTEL_EXPORTER"),
                               description="export each request's span tree: none, console, or otlp "
                                           "(OTEL_EXPORTER_OTLP_ENDPOINT; needs the otel extra)")

    @property
    def catalogs_path(self) -> Path:
        """Catalogs live with the index they describe unless placed elsewhere."""
        return self.catalog_dir or self.data_dir / "catalogs"

    @property
    def llm_configured(self) -> bool:
        return bool(self.openai_api_key or self.llm_base_url)
