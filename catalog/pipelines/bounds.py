"""Bounds on a configuration document a client sends, checked before anything walks it.

A YAML document of a few hundred bytes can name an anchor whose aliases repeat it at every level
(a "billion laughs"): composed, it stays small (aliases share their node), but every walk of it
(construction, validation, storing it as JSON) repeats each alias, exponentially. A deeply nested
flow list (`[[[[…`) exhausts Python's recursion. `BoundedLoader` composes with pyyaml's safe loader
and refuses, at the offending value's YAML path and line, a document that is too large, nests too
deep, uses too many aliases, or whose aliases would expand it past the limits. `check_document` does
the same for an already parsed document (JSON), without recursion.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from catalog.pipelines.errors import ConfigError, InvalidConfig


@dataclass(frozen=True, slots=True)
class DocumentLimits:
    """How large a configuration document may be; every alias counts as a copy of what it names."""

    max_bytes: int = 1024 * 1024
    max_depth: int = 64
    max_values: int = 200_000
    max_aliases: int = 10_000
    max_expanded_chars: int = 4 * 1024 * 1024


LIMITS = DocumentLimits()


@dataclass(frozen=True, slots=True)
class _Size:
    values: int
    chars: int
    height: int


def _key(parent: str, key: str) -> str:
    return f"{parent}.{key}" if parent else key


class BoundedLoader(yaml.SafeLoader):  # type: ignore[misc]  # pyyaml has no type hints
    """pyyaml's `SafeLoader` that measures every node as it is composed (values, scalar characters
    and nesting, with each alias counted as a copy of its anchor's node) and raises `InvalidConfig`
    past `limits`. Composition stops at the first node over a limit, so refusing costs no more than
    reading the document."""

    def __init__(self, text: str, limits: DocumentLimits = LIMITS) -> None:
        super().__init__(text)
        self.limits = limits
        self._depth = 0
        self._aliases = 0
        self._sizes: dict[int, _Size] = {}
        self._paths: list[str] = []

    def _refuse(self, path: str, message: str, mark: Any) -> InvalidConfig:
        line = mark.line + 1 if mark is not None else None
        column = mark.column + 1 if mark is not None else None
        return InvalidConfig([ConfigError(path, message, line, column)])

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        parent_path = self._paths[-1] if self._paths else ""
        if isinstance(index, int):
            path = f"{parent_path}[{index}]"
        elif isinstance(index, yaml.ScalarNode):
            path = _key(parent_path, str(index.value))
        else:  # the document, or a mapping's key
            path = parent_path
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark
            node = super().compose_node(parent, index)
            self._aliases += 1
            if self._aliases > self.limits.max_aliases:
                raise self._refuse(path, f"more than {self.limits.max_aliases} aliases", mark)
            if id(node) not in self._sizes:
                raise self._refuse(
                    path, "an alias inside the value its anchor names (a recursive alias)", mark
                )
            return node
        mark = self.peek_event().start_mark
        self._depth += 1
        if self._depth > self.limits.max_depth:
            raise self._refuse(path, f"nested deeper than {self.limits.max_depth} levels", mark)
        self._paths.append(path)
        try:
            node = super().compose_node(parent, index)
        finally:
            self._paths.pop()
            self._depth -= 1
        self._sizes[id(node)] = size = self._measure(node)
        if size.height > self.limits.max_depth:
            raise self._refuse(
                path, f"nested deeper than {self.limits.max_depth} levels once its aliases are expanded", mark
            )
        if size.values > self.limits.max_values:
            raise self._refuse(
                path,
                f"more than {self.limits.max_values} values once its aliases are expanded "
                "(each alias counts as a copy of its anchor's value)",
                mark,
            )
        if size.chars > self.limits.max_expanded_chars:
            raise self._refuse(
                path,
                f"more than {self.limits.max_expanded_chars} characters of text once its aliases "
                "are expanded (each alias counts as a copy of its anchor's value)",
                mark,
            )
        return node

    def _measure(self, node: yaml.Node) -> _Size:
        if isinstance(node, yaml.ScalarNode):
            return _Size(1, len(node.value), 1)
        if isinstance(node, yaml.MappingNode):
            children = [child for pair in node.value for child in pair]
        else:
            children = list(node.value)
        values = chars = height = 0
        for child in children:
            size = self._sizes[id(child)]
            values += size.values
            chars += size.chars
            height = max(height, size.height)
        return _Size(values + 1, chars, height + 1)


def check_size(text: str, limits: DocumentLimits = LIMITS) -> None:
    """Refuse text over `limits.max_bytes` (UTF-8) before any parsing."""
    if len(text) > limits.max_bytes or len(text.encode("utf-8", "surrogatepass")) > limits.max_bytes:
        raise InvalidConfig([ConfigError("", f"the document is larger than {limits.max_bytes} bytes")])


def compose(text: str, limits: DocumentLimits = LIMITS) -> tuple[yaml.Node | None, Any]:
    """The YAML document's node and its data (pyyaml's safe types), within `limits`; `yaml.YAMLError`
    for invalid YAML, `InvalidConfig` for a document over a limit."""
    check_size(text, limits)
    loader = BoundedLoader(text, limits)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    finally:
        loader.dispose()
    return node, data


def check_document(data: Any, limits: DocumentLimits = LIMITS) -> None:
    """Refuse parsed data (a JSON body) nested deeper than `limits.max_depth` or holding more than
    `limits.max_values` values (shared objects counted at every place they appear), walking it
    iteratively, before anything walks it recursively."""
    values = 0
    pending: list[tuple[Any, int, str]] = [(data, 1, "")]
    while pending:
        value, depth, path = pending.pop()
        values += 1
        if values > limits.max_values:
            raise InvalidConfig([ConfigError("", f"the document holds more than {limits.max_values} values")])
        if depth > limits.max_depth:
            raise InvalidConfig([ConfigError(path, f"nested deeper than {limits.max_depth} levels")])
        if isinstance(value, dict):
            values += len(value)  # the keys
            pending.extend((item, depth + 1, _key(path, str(key))) for key, item in value.items())
        elif isinstance(value, list | tuple):
            pending.extend((item, depth + 1, f"{path}[{i}]") for i, item in enumerate(value))


__all__ = ["LIMITS", "BoundedLoader", "DocumentLimits", "check_document", "check_size", "compose"]
