"""Naming parsed YAML values in floe.yaml's error messages."""

from __future__ import annotations

from typing import Any


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
