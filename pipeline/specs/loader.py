"""Finding specs and resolving their ``$ref``s, confined to the spec's folder and to spec documents.

A spec is an entry file whose top level has ``openapi`` or ``swagger``. Other JSON/YAML files are
read only when a spec references them. Every file is hostile input (``files``, ``parse``,
``limits``). A ``$ref`` is followed only to a JSON/YAML file (by suffix) inside the entry's
folder tree, outside dot-files and dot-folders, that parses to a mapping; a ref that leaves the
folder (also through a symlink) or points at a URL is never read, and every other refusal is
counted as an unresolved ref of a named kind. The confinement root is the folder of the entry as
it was given or found; an entry that is a symlink must point inside that folder.
"""

from __future__ import annotations

import errno
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import unquote

from specrag.core.errors import CorpusError, SpecError
from specrag.core.ids import pointer_to_tokens
from specrag.specs.files import decode_text, read_regular_file
from specrag.specs.limits import BudgetExceeded, ParseBudget, SpecLimits
from specrag.specs.parse import parse_text

SPEC_SUFFIXES = {".json", ".yaml", ".yml"}
MAX_REF_CHARS = 4096  # PATH_MAX
_YAML_SPEC_KEY = re.compile(r"^[\"']?(openapi|swagger)[\"']?\s*:", re.MULTILINE)


def looks_like_spec(path: Path, text: str) -> bool:
    """Cheap sniff before a full parse: only files that mention openapi/swagger at all."""
    if path.suffix.lower() == ".json":
        return '"openapi"' in text or '"swagger"' in text
    return _YAML_SPEC_KEY.search(text) is not None


def spec_format(doc: dict) -> str:
    if "swagger" in doc:
        return "swagger-2.0"
    version = str(doc.get("openapi", ""))
    return "openapi-3.1" if version.startswith("3.1") else "openapi-3.0"


def check_spec(doc: Any) -> None:
    """Raise SpecError unless ``doc`` is a usable OpenAPI/Swagger document.

    Swagger 2.0 and OpenAPI 3.0 need ``paths``; OpenAPI 3.1 needs one of ``paths``,
    ``webhooks`` or ``components``."""
    if not isinstance(doc, dict):
        raise SpecError(f"top level is {type(doc).__name__}, not a mapping")
    if "openapi" not in doc and "swagger" not in doc:
        raise SpecError("no 'openapi' or 'swagger' key at the top level")
    if "paths" in doc and not isinstance(doc["paths"], dict):
        raise SpecError("'paths' is not a mapping")
    if spec_format(doc) == "openapi-3.1":
        if "webhooks" in doc and not isinstance(doc["webhooks"], dict):
            raise SpecError("'webhooks' is not a mapping")
        if not any(key in doc for key in ("paths", "webhooks", "components")):
            raise SpecError("no 'paths', 'webhooks' or 'components' object")
    elif "paths" not in doc:
        raise SpecError("no 'paths' object")


def discover_spec_files(paths: list[Path]) -> tuple[list[Path], list[Path]]:
    """-> (explicit files, candidate files found in folders), each sorted.

    Explicit files are always treated as specs (and reported if unusable); files found in
    folders only when they mention openapi/swagger (see ``looks_like_spec``).
    """
    explicit: list[Path] = []
    found: list[str] = []  # strings until the end: a Path per file, made and compared, was most of a 4x fleet's 0.4 s
    for path in paths:
        _require_exists(path)
        if not path.is_dir():  # a FIFO or device given by name is reported, not walked
            explicit.append(path)
            continue
        for root, files in _walk(path):
            found.extend(os.path.join(root, f) for f in files if _candidate(f))
    given = set(explicit)
    # by ``parts``: the order of PosixPath's own comparison, with tuples of str compared in C
    return sorted(given), sorted({Path(f) for f in found} - given, key=lambda p: p.parts)


def any_spec_file(paths: list[Path]) -> bool:
    """Whether ``discover_spec_files(paths)`` finds a file (and the same CorpusError for a missing
    path), stopping at the first one: a fleet need not be walked and sorted to know it is not empty."""
    for path in paths:
        _require_exists(path)
    for path in paths:
        if not path.is_dir():
            return True
        if any(_candidate(f) for _, files in _walk(path) for f in files):
            return True
    return False


def _require_exists(path: Path) -> None:
    if not path.exists():
        raise CorpusError(f"no such file or folder: {path}")


def _walk(folder: Path) -> Iterator[tuple[str, list[str]]]:
    """(folder, its file names) of ``folder`` and every folder below it not hidden, in name order."""
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        yield root, files


def _candidate(name: str) -> bool:
    return os.path.splitext(name)[1].lower() in SPEC_SUFFIXES and not name.startswith(".")


@dataclass(frozen=True)
class Resolved:
    file: Path
    tokens: tuple[str, ...]
    value: Any


EXTERNAL_KINDS = ("url", "escapes_root")


@dataclass(frozen=True)
class Unresolved:
    """A ref not followed. External kinds: ``url``, ``escapes_root``. Internal: ``missing_file``,
    ``missing_target``, ``bad_ref``, ``cycle``; refused files: ``hidden_file`` (a dot-file or a
    file in a dot-folder), ``not_spec_file`` (not .json/.yaml/.yml), ``not_a_document`` (does
    not parse to a mapping), ``unreadable`` (not a regular file, too big, undecodable)."""

    kind: str
    ref: str

    @property
    def external(self) -> bool:
        return self.kind in EXTERNAL_KINDS


def confine_entry(entry: Path) -> tuple[Path, Path]:
    """-> (root, real entry): the folder of ``entry`` as given and the file it names, which must
    lie inside that folder (a symlinked entry may not move the confinement elsewhere)."""
    root = Path(os.path.realpath(entry.parent))
    real = Path(os.path.realpath(entry))
    if not os.path.lexists(real):  # a broken link says so, wherever it pointed
        raise SpecError(f"unreadable: {os.strerror(errno.ENOENT)}")
    if not real.is_relative_to(root):
        raise SpecError(f"symlink to a file outside its folder ({real}); give that file itself")
    return root, real


class SpecSource:
    """An entry file plus every spec document of its folder tree that its refs reach (parsed once).

    ``root`` is the folder of ``entry`` as given (symlinks in it resolved); a symlinked entry
    must point inside it, and refs resolve from the entry's real location.
    """

    def __init__(self, entry: Path, limits: SpecLimits, raw: bytes | None = None, text: str | None = None):
        self.root, self.entry = confine_entry(entry)
        self.limits = limits
        self.budget = ParseBudget(limits)
        self._raw: dict[Path, bytes] = {}
        self._docs: dict[Path, Any] = {}
        self._refused: dict[Path, str] = {}
        self._resolved: dict[tuple[str, Path], Resolved | Unresolved] = {}
        self.doc = self._parse(self.entry, raw, text)

    def _parse(self, path: Path, raw: bytes | None = None, text: str | None = None) -> Any:
        raw = read_regular_file(path, self.limits.max_bytes) if raw is None else raw
        doc = parse_text(decode_text(raw) if text is None else text, path.suffix.lower() == ".json", self.budget)
        self._raw[path] = raw
        self._docs[path] = doc
        return doc

    def _document(self, path: Path) -> Any:
        """A referenced file's parsed mapping; SpecError (kept, so it is read once) if refused."""
        if path in self._docs:
            return self._docs[path]
        if path not in self._refused:
            try:
                doc = self._parse(path)
            except BudgetExceeded:
                raise  # the spec as a whole is over a limit: stop reading it
            except SpecError:
                self._refused[path] = "unreadable"
                raise
            if isinstance(doc, dict):
                return doc
            del self._docs[path], self._raw[path]
            self._refused[path] = "not_a_document"
        raise SpecError(self._refused[path])

    def relpath(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    @property
    def files(self) -> dict[Path, bytes]:
        """Every file read so far, entry included (for the content hash)."""
        return self._raw

    def resolve(self, ref: str, base: Path) -> Resolved | Unresolved:
        """Where ``ref`` (written in file ``base``) points. A spec repeats its refs (every operation
        refs ``#/definitions/Error``): each (ref, base) is resolved once and its outcome kept, as the
        files it reads are read once and never change (a BudgetExceeded propagates, never kept)."""
        if not isinstance(ref, str):
            return Unresolved("bad_ref", str(ref)[:200])
        key = (ref, base)
        if key not in self._resolved:
            self._resolved[key] = self._resolve(ref, base)
        return self._resolved[key]

    def _resolve(self, ref: str, base: Path) -> Resolved | Unresolved:
        if not ref or len(ref) > MAX_REF_CHARS:
            return Unresolved("bad_ref", str(ref)[:200])  # a 1 MB path would cost 10^5 lstat calls
        if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", ref) or ref.startswith("//"):
            return Unresolved("url", ref)
        file_part, _, fragment = ref.partition("#")
        target = base
        if file_part:
            relative = unquote(file_part)
            if "\x00" in relative:
                return Unresolved("bad_ref", ref)
            target = Path(os.path.normpath(base.parent / relative))
            if not target.is_relative_to(self.root):
                return Unresolved("escapes_root", ref)
            try:
                real = Path(os.path.realpath(target))
                if not real.is_relative_to(self.root):  # a symlink out of the tree
                    return Unresolved("escapes_root", ref)
                if refusal := self._refuse_file(target, real):
                    return Unresolved(refusal, ref)
            except OSError:  # a name too long, a loop of links
                return Unresolved("missing_file", ref)
            target = real
        try:
            doc = self._document(target) if file_part else self._docs[target]
        except BudgetExceeded:
            raise
        except SpecError:
            return Unresolved(self._refused.get(target, "unreadable"), ref)
        try:
            tokens = tuple(pointer_to_tokens("#" + unquote(fragment)))
        except ValueError:
            return Unresolved("bad_ref", ref)
        value = walk_pointer(doc, tokens)
        if value is _MISSING:
            return Unresolved("missing_target", ref)
        return Resolved(target, tokens, value)

    def _refuse_file(self, target: Path, real: Path) -> str | None:
        """Why a referenced file may not be read (None: it may)."""
        for path in (target, real):
            if any(part.startswith(".") for part in path.relative_to(self.root).parts):
                return "hidden_file"
            if path.suffix.lower() not in SPEC_SUFFIXES:
                return "not_spec_file"
        if not real.exists():
            return "missing_file"
        return None


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
