"""A fragment rendered as YAML, the text an LLM reads: libyaml's C emitter, fed faster.

PyYAML's ``CSafeDumper`` emits in C, but builds the node tree it emits in Python, one generic
dispatch per value, and asks a Python resolver twice per scalar which tag its plain form would
read as. Both dominated rendering a corpus. ``_FastDumper`` builds the same node tree (the
same tags, styles and flow styles, and never one node twice, since ``&id001`` anchors are not
wanted) with one type check per value for the types a parsed spec holds, and resolves with the
same implicit-resolver table minus the per-call list building; any other type goes the generic
way. So the text is byte for byte what ``yaml.dump`` with these settings writes
(``tests/specs/test_yaml_dump.py`` compares the two).
"""

from __future__ import annotations

from typing import Any

import yaml
from specrag.core import caches
from yaml.nodes import MappingNode, ScalarNode, SequenceNode

try:
    from yaml import CSafeDumper as _BaseDumper
except ImportError:  # pragma: no cover
    from yaml import SafeDumper as _BaseDumper  # type: ignore[assignment]

STR_TAG = "tag:yaml.org,2002:str"
MAP_TAG = "tag:yaml.org,2002:map"
SEQ_TAG = "tag:yaml.org,2002:seq"


class _Dumper(_BaseDumper):  # type: ignore[misc,valid-type]
    """The reference settings: the generic PyYAML path, kept to check the fast one against."""

    def ignore_aliases(self, data: Any) -> bool:  # shared YAML anchors render inline, not as &id001
        return True


def _represent_unknown(dumper: yaml.SafeDumper, data: Any) -> yaml.Node:
    return dumper.represent_str(str(data))


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
    if "\n" in data:  # literal blocks: no doubled blank lines, fewer tokens
        return dumper.represent_scalar(STR_TAG, _literal(data), style="|")
    return dumper.represent_str(data)


def _literal(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.split("\n"))


_Dumper.add_representer(None, _represent_unknown)  # type: ignore[arg-type]
_Dumper.add_representer(str, _represent_str)


# The tag a plain scalar would read as, per value: a spec repeats its keys and short values
# (``type``, ``string``, ``in``) thousands of times, and the emitter asks twice per scalar.
_plain_tags: dict[str, str] = caches.register({}, name=f"{__name__}._plain_tags")
_MAX_KEPT_SCALAR, _MAX_KEPT_TAGS = 64, 100_000


class _FastDumper(_Dumper):
    def represent(self, data: Any) -> None:
        self.serialize(self._node(data))

    def _node(self, data: Any) -> yaml.Node:
        kind = type(data)
        if kind is str:
            return ScalarNode(STR_TAG, _literal(data), style="|") if "\n" in data else ScalarNode(STR_TAG, data)
        if kind is dict:
            node = self._node
            return MappingNode(MAP_TAG, [(node(k), node(v)) for k, v in data.items()], flow_style=False)
        if kind is list:
            return SequenceNode(SEQ_TAG, [self._node(item) for item in data], flow_style=False)
        return self.represent_data(data)

    def resolve(self, kind: type, value: Any, implicit: tuple[bool, bool]) -> str:
        if kind is not ScalarNode or self.yaml_path_resolvers:
            return super().resolve(kind, value, implicit)
        if not implicit[0]:
            return self.DEFAULT_SCALAR_TAG
        tag = _plain_tags.get(value)
        if tag is None:
            tag = self._plain_tag(value)
            if len(value) <= _MAX_KEPT_SCALAR:
                if len(_plain_tags) >= _MAX_KEPT_TAGS:
                    _plain_tags.clear()
                _plain_tags[value] = tag
        return tag

    def _plain_tag(self, value: str) -> str:
        table = self.yaml_implicit_resolvers
        for tag, regexp in (*table.get(value[:1], ()), *table.get(None, ())):
            if regexp.match(value):
                return tag
        return self.DEFAULT_SCALAR_TAG


def to_yaml(value: Any) -> str:
    return _dump(value, _FastDumper)


def to_yaml_reference(value: Any) -> str:
    """``to_yaml`` the generic PyYAML way (slower), for tests to compare with."""
    return _dump(value, _Dumper)


def _dump(value: Any, dumper: type) -> str:
    return yaml.dump(value, Dumper=dumper, sort_keys=False, allow_unicode=True,
                     default_flow_style=False, width=4096).rstrip()
