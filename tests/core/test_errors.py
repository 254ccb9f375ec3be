"""The exception tree in ``specrag.core.errors``'s docstring is the package's: every exception class of
pipeline/ and evals/ is drawn there, in its module, under its own base class, and each is a
``SpecragError`` unless it is listed as internal control flow."""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import re
from typing import NamedTuple

import specrag.core.errors
from source_tree import module_files
from specrag.core.errors import SpecragError

BUILTIN_EXCEPTIONS = {name for name, value in vars(builtins).items()
                      if inspect.isclass(value) and issubclass(value, BaseException)}
_ROW = re.compile(r"^    (?P<tree>[│├└─ ]*)(?P<name>[A-Z]\w*)\s+(?P<module>[a-z][\w.]*)(?:\s+\+(?P<extra>\w+))?(?:\s|$)")
_INTERNAL = "Internal control flow"


class Drawn(NamedTuple):
    module: str  # full module name
    parent: str | None  # the class drawn above it in the tree (None: the root, or an internal one)
    extra: str | None  # the built-in base drawn after the module
    internal: bool


def drawn_tree(doc: str) -> dict[str, Drawn]:
    """class name -> where the docstring draws it."""
    drawn, path, internal = {}, [], False
    for line in doc.splitlines():
        internal = internal or line.startswith(_INTERNAL)
        if not (row := _ROW.match(line)):
            continue
        depth = len(row["tree"]) // 4
        assert depth <= len(path), f"a class drawn below no parent: {line!r}"
        path[depth:] = [row["name"]]
        drawn[row["name"]] = Drawn(f"specrag.{row['module']}", path[depth - 1] if depth else None, row["extra"], internal)
    return drawn



def _base_name(node: ast.expr) -> str:
    return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""


def modules_with_exceptions(known: set[str]) -> set[str]:
    """Modules whose classes derive, by name, from an exception: a built-in one, one named
    *Error/*Exception, one in ``known`` or, transitively, one of these."""
    classes = []  # (module, class name, base names)
    for module, path in module_files().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                classes.append((module, node.name, {_base_name(b) for b in node.bases}))
    names = set(BUILTIN_EXCEPTIONS) | known
    while True:
        found = {(m, c) for m, c, bases in classes
                 if bases & names or any(b.endswith(("Error", "Exception")) for b in bases)}
        if {c for _, c in found} <= names:
            return {m for m, _ in found}
        names |= {c for _, c in found}


def exception_classes() -> list[type[BaseException]]:
    """Every exception class the package's modules define (those modules imported to see them)."""
    classes = []
    for name in sorted(modules_with_exceptions(set(drawn_tree(specrag.core.errors.__doc__)))):
        module = importlib.import_module(name)
        classes += [value for value in vars(module).values() if inspect.isclass(value)
                    and issubclass(value, BaseException) and value.__module__ == module.__name__]
    return classes


def test_the_parser_reads_a_tree():
    doc = ("    Root                 core.errors\n"
           "    ├── A                core.errors   +ValueError   what A means\n"
           "    │   └── B            x.y                         what B means\n"
           "    └── C                x\n"
           "Internal control flow, ...\n\n"
           "    D                    z             what D is\n"
           "                                      continued\n")
    assert drawn_tree(doc) == {"Root": Drawn("specrag.core.errors", None, None, False),
                               "A": Drawn("specrag.core.errors", "Root", "ValueError", False),
                               "B": Drawn("specrag.x.y", "A", None, False),
                               "C": Drawn("specrag.x", "Root", None, False),
                               "D": Drawn("specrag.z", None, None, True)}


def test_every_exception_class_is_drawn_under_its_base():
    drawn = drawn_tree(specrag.core.errors.__doc__)
    classes = exception_classes()
    assert len(classes) >= 31, "the walk must see the package's exception classes"
    wrong = []
    for cls in classes:
        where = drawn.get(cls.__name__)
        if where is None:
            wrong.append(f"{cls.__module__}.{cls.__name__} is not drawn in specrag.core.errors' docstring")
            continue
        if where.module != cls.__module__:
            wrong.append(f"{cls.__name__} is drawn in {where.module}, defined in {cls.__module__}")
        if where.internal:
            if issubclass(cls, SpecragError):
                wrong.append(f"{cls.__name__} is a SpecragError: draw it in the tree, not as internal")
            continue
        if not issubclass(cls, SpecragError):
            wrong.append(f"{cls.__name__} is not a SpecragError (make it one, or list it as internal with the reason)")
            continue
        ours = [b.__name__ for b in cls.__bases__ if issubclass(b, SpecragError)]
        others = [b.__name__ for b in cls.__bases__ if not issubclass(b, SpecragError) and b is not Exception]
        if cls is not SpecragError and ours != [where.parent]:
            wrong.append(f"{cls.__name__} is drawn under {where.parent}, its bases are {ours}")
        if others != ([where.extra] if where.extra else []):
            wrong.append(f"{cls.__name__} is drawn with +{where.extra}, its other bases are {others}")
    assert not wrong, "\n".join(wrong)


def test_every_drawn_class_exists():
    for name, where in drawn_tree(specrag.core.errors.__doc__).items():
        cls = getattr(importlib.import_module(where.module), name, None)
        assert inspect.isclass(cls) and issubclass(cls, BaseException), f"{where.module}.{name} is drawn but not defined"
        assert cls.__module__ == where.module, f"{name} is defined in {cls.__module__}, drawn in {where.module}"
