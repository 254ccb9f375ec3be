"""The package's source modules, for tests that read the tree as text (imports, caches, errors)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# source folder -> the import name it is installed as (pyproject.toml's package-dir)
PACKAGES = {"pipeline": "specrag", "evals": "specrag.evals"}


def module_files() -> dict[str, Path]:
    """Dotted module name -> its source file, for every module of pipeline/ and evals/."""
    modules = {}
    for folder, package in PACKAGES.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = [package, *path.relative_to(ROOT / folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules
