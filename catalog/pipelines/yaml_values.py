"""Reading floe.yaml text: the data, where every value sits (its line and column), duplicate keys (which
plain YAML loading silently resolves to the last one), and how error messages name a parsed value."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import yaml

from catalog.pipelines.bounds import compose
from catalog.pipelines.errors import ConfigError, InvalidConfig

Marks = dict[str, tuple[int, int]]


def key_path(path: str, key: str) -> str:
    """The YAML path of `key` inside the mapping at `path`: `tables[0]` + `schema` → `tables[0].schema`."""
    return f"{path}.{key}" if path else key


def describe_value(value: Any) -> str:
    """A YAML value as an error message names it: `a string ('x')`, `a list`, `nothing (null)`."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, int | float):
        return f"a number ({value})"
    if isinstance(value, str):
        return f"a string ({value!r})"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return f"a {type(value).__name__} ({value})"


def read_yaml(text: str) -> tuple[Any, Marks, list[ConfigError]]:
    """The YAML's data, the (line, column) of every path in it, and its duplicate keys. The document is
    bounded (`bounds.LIMITS`: bytes, nesting, aliases and what they expand to) before anything walks
    it: `InvalidConfig` past a limit."""
    try:
        node, data = compose(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        line = mark.line + 1 if mark is not None else None
        column = mark.column + 1 if mark is not None else None
        where = f" at line {line}, column {column}" if line is not None else ""
        raise InvalidConfig([ConfigError("", f"YAML syntax error{where}: {problem}", line, column)]) from None
    except yaml.YAMLError as exc:
        raise InvalidConfig([ConfigError("", f"YAML error: {exc}")]) from None
    marks: Marks = {}
    duplicates: list[ConfigError] = []
    if node is not None:
        _index(node, "", marks, duplicates)
    return data, marks, duplicates


def _index(node: yaml.Node, path: str, marks: Marks, duplicates: list[ConfigError]) -> None:
    marks.setdefault(path, (node.start_mark.line + 1, node.start_mark.column + 1))
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            key = str(key_node.value)
            child = key_path(path, key)
            if key in seen:
                line = key_node.start_mark.line + 1
                duplicates.append(
                    ConfigError(child, f"duplicate key {key!r}", line, key_node.start_mark.column + 1)
                )
            seen.add(key)
            marks[child] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            _index(value_node, child, marks, duplicates)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _index(item, f"{path}[{index}]", marks, duplicates)


_LAST_STEP = re.compile(r"(\.[^.\[\]]+|\[\d+\])$")


def parent_path(path: str) -> str:
    """The path one step up: `tables[0].schema` → `tables[0]`, `tables[0]` → `tables`."""
    shorter = _LAST_STEP.sub("", path)
    return shorter if shorter != path else ""


def with_line(error: ConfigError, marks: Mapping[str, tuple[int, int]]) -> ConfigError:
    """`error` with the line of its path (or of the nearest enclosing value that has one)."""
    path = error.path
    while True:
        if path in marks:
            line, column = marks[path]
            return ConfigError(error.path, error.message, line, column)
        if not path:
            return error
        path = parent_path(path)


__all__ = ["describe_value", "key_path", "parent_path", "read_yaml", "with_line"]
