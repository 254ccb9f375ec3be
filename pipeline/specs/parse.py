"""Bounded parsing of JSON and YAML text (safe YAML tags only).

YAML is composed by PyYAML's Python composer over libyaml's C event parser, so every node is
counted as it is built: an alias adds the size of the subtree it repeats (what every later walk,
render and split will expand) and the depth it reaches, a recursive alias is refused, and so is
nesting deeper than the limit, before libyaml's recursive C composer could overflow its stack
(it segfaults at ~100k nested ``[``). On this corpus the Python composer is as fast as the C one
(the constructor dominates). JSON is counted after ``json.loads``.
"""

from __future__ import annotations

import json
import re
from typing import Any

import yaml
from specrag.core.errors import SpecError
from specrag.specs.limits import ParseBudget
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.events import AliasEvent, MappingStartEvent, ScalarEvent, SequenceStartEvent
from yaml.resolver import Resolver

try:  # the C event parser is ~10x faster on big YAML specs than the pure Python one
    from yaml._yaml import CParser as _Parser
except ImportError:  # pragma: no cover - depends on the libyaml build
    from yaml.parser import Parser
    from yaml.reader import Reader
    from yaml.scanner import Scanner

    class _Parser(Reader, Scanner, Parser):  # type: ignore[no-redef]
        def __init__(self, stream):
            Reader.__init__(self, stream)
            Scanner.__init__(self)
            Parser.__init__(self)

_NODE_EVENTS = (ScalarEvent, SequenceStartEvent, MappingStartEvent)
# JSON's \uD800-\uDFFF escapes can yield a lone surrogate, which no UTF-8 output (JSON, Chroma) accepts
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


class BoundedComposer(Composer):
    """Composer that charges every node, and every alias's repeated subtree, to a budget."""

    def __init__(self, budget: ParseBudget):
        Composer.__init__(self)
        self.budget = budget
        self.depth = 0
        self.deepest = 0
        self.anchored: dict[str, tuple[int, int]] = {}  # anchor -> (nodes, height) of its subtree

    def compose_node(self, parent, index):
        if self.check_event(AliasEvent):
            anchor = self.peek_event().anchor
            if anchor in self.anchors:
                if anchor not in self.anchored:
                    raise SpecError(f"recursive YAML alias *{anchor} (a value that contains itself)")
                nodes, height = self.anchored[anchor]
                self.budget.add_alias()
                self.budget.add_nodes(nodes)
                self.budget.check_depth(self.depth + height)
                self.deepest = max(self.deepest, self.depth + height)
            return Composer.compose_node(self, parent, index)
        anchor = self.peek_event().anchor if self.check_event(*_NODE_EVENTS) else None
        self.depth += 1
        self.budget.check_depth(self.depth)
        self.budget.add_nodes(1)
        start_nodes, outer_deepest = self.budget.nodes, self.deepest
        self.deepest = self.depth  # from here on: the deepest level inside this node
        node = Composer.compose_node(self, parent, index)
        if anchor is not None:
            self.anchored[anchor] = (self.budget.nodes - start_nodes + 1, self.deepest - self.depth + 1)
        self.deepest = max(self.deepest, outer_deepest)
        self.depth -= 1
        return node


class BoundedSafeLoader(_Parser, BoundedComposer, SafeConstructor, Resolver):  # type: ignore[misc,valid-type]
    def __init__(self, stream: str, budget: ParseBudget):
        _Parser.__init__(self, stream)
        BoundedComposer.__init__(self, budget)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)

    # the C parser brings its own (unbounded, recursive) composer: use the bounded one
    get_single_node = Composer.get_single_node
    compose_document = Composer.compose_document
    compose_node = BoundedComposer.compose_node


_LIBYAML_DEPTH = "exceeded maximum nesting depth"


def parse_text(text: str, is_json: bool, budget: ParseBudget) -> Any:
    """Parse JSON or YAML within ``budget``; SpecError with a one-line reason."""
    if not is_json:
        return _parse_yaml(text, budget)  # libyaml refuses surrogate escapes itself
    doc = _parse_json(text, budget)
    if _SURROGATE_ESCAPE.search(text):
        _refuse_lone_surrogates(doc)
    return doc


def _parse_yaml(text: str, budget: ParseBudget) -> Any:
    loader = BoundedSafeLoader(text, budget)
    try:
        return loader.get_single_data()
    except yaml.constructor.ConstructorError as exc:
        raise SpecError(f"unsafe or unknown YAML tag: {one_line(exc.problem or exc)}") from None
    except yaml.YAMLError as exc:
        if _LIBYAML_DEPTH in str(exc):  # newer libyaml (PyYAML 6.0.4 wheels) refuses deep flow nesting first
            raise SpecError(budget.too_deep()) from None
        raise SpecError(f"invalid YAML: {one_line(exc)}") from None
    except RecursionError:
        raise SpecError("invalid YAML: nested too deeply") from None
    finally:
        loader.dispose()


def _parse_json(text: str, budget: ParseBudget) -> Any:
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise SpecError(f"invalid JSON: {one_line(exc)}") from None
    except RecursionError:
        raise SpecError(budget.too_deep()) from None
    _charge(doc, budget)
    return doc


def _charge(doc: Any, budget: ParseBudget) -> None:
    """Count the values of a parsed JSON document (keys included, as YAML counts them) and its depth."""
    nodes = 1
    stack: list[tuple[Any, int]] = [(doc, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            nodes += 2 * len(node)
            children = node.values()
        elif isinstance(node, list):
            nodes += len(node)
            children = node
        else:
            continue
        budget.check_depth(depth + 1)
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    budget.add_nodes(nodes)


def _refuse_lone_surrogates(doc: Any) -> None:
    stack = [doc]
    while stack:
        node = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, value in items:
            for text in (key, value):
                if isinstance(text, str) and not text.isascii():
                    try:
                        text.encode("utf-8")
                    except UnicodeEncodeError:
                        raise SpecError("invalid text: a \\u escape makes a lone UTF-16 surrogate "
                                        f"in {text.encode('utf-8', 'backslashreplace').decode()[:60]!r}") from None
            if isinstance(value, (dict, list)):
                stack.append(value)


def one_line(exc: object) -> str:
    return " ".join(str(exc).replace('in "<byte string>", ', "").replace('in "<unicode string>", ', "").split())[:200]
