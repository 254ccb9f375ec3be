"""Corpora for ``specrag bench``: a private copy to edit, a sample of N specs, a fleet made k times
larger by renamed copies (file_id is the entry file's stem, so each copy gets a new stem), and
the one-spec edit that the re-index measure times."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import yaml
from specrag.specs.ingest import ingest_paths
from specrag.specs.limits import SpecLimits
from specrag.specs.loader import SpecSource

EDIT_MARK = " (edited by specrag bench)"


@dataclass(frozen=True)
class SpecFiles:
    """One spec: its entry file, the other files it reads (relative to the entry's folder), and
    the folder its layout is kept relative to."""

    base: Path
    entry: Path
    files: tuple[str, ...]


def copy_corpus(paths: list[Path], dest: Path) -> list[Path]:
    """Copy every input (file or folder, mtimes kept) under ``dest``; the copies' paths."""
    out = []
    for i, path in enumerate(paths):
        target = dest / f"{i}-{path.name}"
        if path.is_dir():
            shutil.copytree(path, target)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
        out.append(target)
    return out


def spec_files(paths: list[Path]) -> list[SpecFiles]:
    """Every spec of ``paths`` (one ingest, not timed), sorted by file_id."""
    specs = []
    roots = [p.resolve() for p in paths]
    for api in ingest_paths(paths, progress=False).apis:
        entry = Path(api.api.source).resolve()
        base = next((r.parent for r in roots if entry == r or r in entry.parents), entry.parent)
        specs.append(SpecFiles(base, entry, tuple(api.api.files)))
    return specs


def write_fleet(specs: list[SpecFiles], dest: Path, copies: int = 1) -> list[Path]:
    """``specs`` laid out under ``dest`` (relative paths kept); copy c > 0 renames each entry
    ``<stem>__x<c>``. Returns the corpus folders."""
    folders = []
    for c in range(copies):
        root = dest / f"copy{c}"
        for spec in specs:
            rel = spec.entry.relative_to(spec.base)
            name = rel.name if c == 0 else f"{spec.entry.stem}__x{c}{spec.entry.suffix}"
            _copy(spec.entry, root / rel.parent / name)
            for extra in spec.files:
                _copy(spec.entry.parent / extra, root / rel.parent / extra)
        folders.append(root)
    return folders


def sample(specs: list[SpecFiles], n: int) -> list[SpecFiles]:
    """``n`` specs spread evenly over the file_id order (deterministic)."""
    if n >= len(specs):
        return list(specs)
    return [specs[(i * len(specs)) // n] for i in range(n)]


def edit_one_spec(paths: list[Path], file_ids: set[str]) -> Path:
    """Change the median-size spec among ``file_ids``: its description and first operation's
    summary (so a catalog entry and a chunk change, as in a real edit). The file edited."""
    candidates = (p for root in paths for p in ([root] if root.is_file() else root.rglob("*")))
    files = [p for p in candidates
             if p.is_file() and p.stem in file_ids and p.suffix.lower() in (".json", ".yaml", ".yml")]
    if not files:
        raise ValueError("no indexed spec file found to edit")
    path = sorted(files, key=lambda p: (p.stat().st_size, str(p)))[len(files) // 2]
    doc = SpecSource(path, SpecLimits.from_settings()).doc
    info = doc.setdefault("info", {})
    info["description"] = f"{info.get('description') or ''}{EDIT_MARK}"
    for item in (doc.get("paths") or {}).values():
        ops = [op for op in (item or {}).values() if isinstance(op, dict)] if isinstance(item, dict) else []
        if ops:
            ops[0]["summary"] = f"{ops[0].get('summary') or ''}{EDIT_MARK}"
            break
    if path.suffix.lower() == ".json":
        path.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    else:
        path.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


def disk_mb(folder: Path) -> dict[str, float]:
    """MB on disk per top-level entry of ``folder``, plus 'total'."""
    sizes = {p.name: _size(p) / 1e6 for p in sorted(folder.iterdir())} if folder.is_dir() else {}
    return {k: round(v, 1) for k, v in sizes.items()} | {"total": round(sum(sizes.values()), 1)}


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_blocks * 512
    return sum(p.stat().st_blocks * 512 for p in path.rglob("*") if p.is_file())


def _copy(src: Path, dst: Path) -> None:
    if dst.exists() or not src.is_file():
        return
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(src, dst)
