"""floe.yaml's error type: one `ConfigError` per problem (YAML path, message, line), all of them raised
together as one `InvalidConfig`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class ConfigError(Exception):
    """One problem in the configuration: the YAML path of the offending value and what is wrong."""

    def __init__(self, path: str, message: str, line: int | None = None, column: int | None = None) -> None:
        super().__init__(path, message)
        self.path = path
        self.message = message
        self.line = line
        self.column = column

    def __str__(self) -> str:
        where = self.path or "(top level)"
        if self.line is not None:
            where += f" (line {self.line})"
        return f"{where}: {self.message}"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ConfigError) and (self.path, self.message, self.line) == (
            other.path,
            other.message,
            other.line,
        )

    def __hash__(self) -> int:
        return hash((self.path, self.message, self.line))

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"path": self.path, "message": self.message}
        if self.line is not None:
            body["line"] = self.line
        return body


class InvalidConfig(ValueError):
    """The configuration cannot be applied: every problem found, in document order."""

    def __init__(self, errors: Sequence[ConfigError]) -> None:
        self.errors = tuple(errors)
        super().__init__(self.summary())

    def summary(self) -> str:
        count = len(self.errors)
        lines = [f"Invalid pipeline configuration ({count} error{'s' if count != 1 else ''}):"]
        lines += [f"  {error}" for error in self.errors]
        return "\n".join(lines)


__all__ = ["ConfigError", "InvalidConfig"]
