"""Prompts as files: one ``PromptTemplate`` per LLM stage, loaded from a folder swapped as a whole.

Each file's ``{variables}`` must be exactly the ones its stage passes to ``format()``; a missing
file or a mismatch is a ``PromptError`` at load time, not a half-filled prompt at query time.
Every prompt carries a name and a content hash, recorded in the stats of each query it served.
"""

from __future__ import annotations

import hashlib
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path

from llama_index.core.prompts import PromptTemplate
from pydantic import BaseModel, ConfigDict, Field
from specrag.core.errors import PromptError
from specrag.core.settings import DEFAULT_PROMPTS_PACKAGE

# prompt name -> the variables its stage passes (the stages build exactly these keys)
PROMPT_VARS: dict[str, frozenset[str]] = {
    "select_apis": frozenset({"query", "catalog", "max_apis"}),
    "expand_query": frozenset({"query", "api_indexes", "max_terms"}),
    "synthesize": frozenset({"query", "context"}),
    "decompose": frozenset({"query", "max_parts"}),
}

# Fed back after output that failed validation. Kept in code: it is part of the retry
# protocol (llm.py), not of a stage's wording, and it does not change between prompt sets.
REASK_PROMPT = PromptTemplate(
    "Your previous answer could not be used: {error}\n"
    "Answer again with only the JSON object, in exactly the format asked for above."
)


class PromptInfo(BaseModel):
    """Which prompt ran: shown in stats and eval reports as ``name@hash``."""

    name: str = Field(description="prompt name, the file stem: select_apis, expand_query, synthesize")
    hash: str = Field(description="sha256 of the template text, first 12 hex chars")
    path: str = Field("", description="file it was loaded from; empty when set in code")

    @property
    def label(self) -> str:
        return f"{self.name}@{self.hash}"


def prompt_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def check_template(name: str, template: PromptTemplate, source: str = "") -> PromptInfo:
    """Validate ``template`` for prompt ``name`` and describe it; raises ``PromptError``."""
    if name not in PROMPT_VARS:
        raise PromptError(f"unknown prompt {name!r}; known prompts: {', '.join(sorted(PROMPT_VARS))}")
    expected, found = PROMPT_VARS[name], set(template.template_vars)
    if found != expected:
        where = source or f"prompt {name!r}"
        problems = []
        if found - expected:
            problems.append(f"uses {_braced(found - expected)} which its stage does not pass")
        if expected - found:
            problems.append(f"lacks {_braced(expected - found)}")
        raise PromptError(
            f"{where} {' and '.join(problems)}; it must use exactly {_braced(expected)} "
            "(write other braces as JSON, e.g. {\"key\": ...}, never as a bare {name})"
        )
    return PromptInfo(name=name, hash=prompt_hash(template.get_template()), path=source)


def _braced(names: set[str] | frozenset[str]) -> str:
    return ", ".join("{" + n + "}" for n in sorted(names))


class PromptSet(BaseModel):
    """The stage prompts, loaded together so a ``--prompts DIR`` swaps the whole set. Every file
    keeps its stable text first and the question last, so prompt caching (a local server's prefix
    cache, a provider's prompt caching) reuses the shared prefix across questions."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    select_apis: PromptTemplate
    expand_query: PromptTemplate
    synthesize: PromptTemplate
    decompose: PromptTemplate
    infos: dict[str, PromptInfo] = Field(default_factory=dict, description="prompt name -> PromptInfo")

    @classmethod
    def load(cls, prompts_dir: Path | None = None) -> "PromptSet":
        """Read ``{name}.txt`` for every prompt in ``prompts_dir``, or the defaults shipped in the
        package when it is None; raises ``PromptError``."""
        if prompts_dir is None:
            return cls._read(files(DEFAULT_PROMPTS_PACKAGE), DEFAULT_PROMPTS_PACKAGE)
        prompts_dir = Path(prompts_dir)
        if not prompts_dir.is_dir():
            raise PromptError(f"prompts folder {prompts_dir} does not exist; pass --prompts DIR with "
                              f"{', '.join(n + '.txt' for n in PROMPT_VARS)}")
        return cls._read(prompts_dir, str(prompts_dir))

    @classmethod
    def _read(cls, folder: Traversable, where: str) -> "PromptSet":
        templates, infos = {}, {}
        for name in PROMPT_VARS:
            path = folder / f"{name}.txt"
            if not path.is_file():
                raise PromptError(f"prompts folder {where} lacks {path.name}; a prompts folder must "
                                  f"hold {', '.join(n + '.txt' for n in PROMPT_VARS)}")
            templates[name] = PromptTemplate(path.read_text(encoding="utf-8"))
            infos[name] = check_template(name, templates[name], f"{where}/{path.name}")
        return cls(**templates, infos=infos)

    def info(self, name: str) -> PromptInfo:
        if name not in self.infos:
            raise PromptError(f"unknown prompt {name!r}; known prompts: {', '.join(sorted(self.infos))}")
        return self.infos[name]

    def template(self, name: str) -> PromptTemplate:
        self.info(name)
        return getattr(self, name)
