"""Reading spec files: formats, discovery, and ``$ref`` resolution confined to the spec's folder.

A spec is an entry file whose top level has ``openapi`` or ``swagger``. Other JSON/YAML files are
read only when a spec references them. Relative refs are followed inside the entry file's folder
tree; a ref that leaves it, or points at a URL, is never followed (no network, no traversal).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import yaml

from pipeline.errors import CorpusError, SpecError
from pipeline.specs.ids import pointer_to_tokens

try:  # the C loader is ~10x faster on big YAML specs
    from yaml import CSafeLoader as _SafeLoader
except ImportError:  # pragma: no cover - depends on the libyaml build
    from yaml import SafeLoader as _SafeLoader  # type: ignore[assignment]

SPEC_SUFFIXES = {".json", ".yaml", ".yml"}
_YAML_SPEC_KEY = re.compile(rb"^[\"']?(openapi|swagger)[\"']?\s*:", re.MULTILINE)


def parse_bytes(raw: bytes, path: Path) -> Any:
    """Parse JSON or YAML (safe loading only); raise SpecError with a one-line reason."""
    if path.suffix.lower() == ".json":
        try:
            return json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise SpecError(f"invalid JSON: {_one_line(exc)}") from None
    try:
        return yaml.load(raw, Loader=_SafeLoader)
    except yaml.constructor.ConstructorError as exc:
        raise SpecError(f"unsafe or unknown YAML tag: {_one_line(exc.problem or exc)}") from None
    except yaml.YAMLError as exc:
        raise SpecError(f"invalid YAML: {_one_line(exc)}") from None
    except RecursionError:
        raise SpecError("invalid YAML: nested too deeply") from None


def _one_line(exc: object) -> str:
    return " ".join(str(exc).replace('in "<byte string>", ', "").split())[:200]


def looks_like_spec(path: Path, raw: bytes) -> bool:
    """Cheap sniff before a full parse: only files that mention openapi/swagger at all."""
    if path.suffix.lower() == ".json":
        return b'"openapi"' in raw or b'"swagger"' in raw
    return _YAML_SPEC_KEY.search(raw) is not None


def spec_format(doc: dict) -> str:
    if "swagger" in doc:
        return "swagger-2.0"
    version = str(doc.get("openapi", ""))
    return "openapi-3.1" if version.startswith("3.1") else "openapi-3.0"


def check_spec(doc: Any) -> None:
    """Raise SpecError unless ``doc`` is a usable OpenAPI/Swagger document."""
    if not isinstance(doc, dict):
        raise SpecError(f"top level is {type(doc).__name__}, not a mapping")
    if "openapi" not in doc and "swagger" not in doc:
        raise SpecError("no 'openapi' or 'swagger' key at the top level")
    if not isinstance(doc.get("paths"), dict):
        raise SpecError("no 'paths' object" if "paths" not in doc else "'paths' is not a mapping")


def discover_spec_files(paths: list[Path]) -> tuple[list[Path], list[Path]]:
    """-> (explicit files, candidate files found in folders), each sorted.

    Explicit files are always treated as specs (and reported if unusable); files found in
    folders only when they mention openapi/swagger (see ``looks_like_spec``).
    """
    explicit: list[Path] = []
    found: list[Path] = []
    for path in paths:
        if not path.exists():
            raise CorpusError(f"no such file or folder: {path}")
        if path.is_file():
            explicit.append(path)
            continue
        for root, dirs, files in os.walk(path):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            found.extend(Path(root) / f for f in sorted(files)
                         if Path(f).suffix.lower() in SPEC_SUFFIXES and not f.startswith("."))
    return sorted(set(explicit)), sorted(set(found) - set(explicit))


@dataclass(frozen=True)
class Resolved:
    file: Path
    tokens: tuple[str, ...]
    value: Any


@dataclass(frozen=True)
class Unresolved:
    kind: str  # url, escapes_root (external) / missing_file, missing_target, bad_ref (internal)
    ref: str

    @property
    def external(self) -> bool:
        return self.kind in ("url", "escapes_root")


class SpecSource:
    """An entry file plus every file of its folder tree that its refs reach (parsed once)."""

    def __init__(self, entry: Path, raw: bytes | None = None):
        self.entry = entry.resolve()
        self.root = self.entry.parent
        self._raw: dict[Path, bytes] = {}
        self._docs: dict[Path, Any] = {}
        if raw is not None:
            self._raw[self.entry] = raw
        self.doc = self.load(self.entry)

    def load(self, path: Path) -> Any:
        if path not in self._docs:
            raw = self._raw.get(path)
            if raw is None:
                raw = path.read_bytes()
                self._raw[path] = raw
            self._docs[path] = parse_bytes(raw, path)
        return self._docs[path]

    def relpath(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    @property
    def files(self) -> dict[Path, bytes]:
        """Every file read so far, entry included (for the content hash)."""
        return self._raw

    def resolve(self, ref: str, base: Path) -> Resolved | Unresolved:
        if not isinstance(ref, str) or not ref:
            return Unresolved("bad_ref", str(ref))
        if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", ref) or ref.startswith("//"):
            return Unresolved("url", ref)
        file_part, _, fragment = ref.partition("#")
        target = base
        if file_part:
            target = Path(os.path.normpath(base.parent / unquote(file_part)))
            if not target.is_relative_to(self.root):
                return Unresolved("escapes_root", ref)
            real = target.resolve()
            if not real.is_relative_to(self.root):  # a symlink out of the tree
                return Unresolved("escapes_root", ref)
            if not real.is_file():
                return Unresolved("missing_file", ref)
            target = real
        try:
            doc = self.load(target)
            tokens = tuple(pointer_to_tokens("#" + unquote(fragment)))
        except (SpecError, OSError, ValueError):
            return Unresolved("missing_target" if file_part else "bad_ref", ref)
        value = walk_pointer(doc, tokens)
        if value is _MISSING:
            return Unresolved("missing_target", ref)
        return Resolved(target, tokens, value)


_MISSING = object()


def walk_pointer(doc: Any, tokens: tuple[str, ...]) -> Any:
    node = doc
    for token in tokens:
        if isinstance(node, dict):
            if token in node:
                node = node[token]
            elif token.lstrip("-").isdigit() and int(token) in node:  # YAML int keys (200:)
                node = node[int(token)]
            else:
                return _MISSING
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return _MISSING
    return node
