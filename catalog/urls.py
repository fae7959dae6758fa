"""URLs shown to people: never with the `user:password@` some were written with (pure, no imports)."""

from __future__ import annotations

import re
from typing import Any

# `scheme://user:password@` (up to the last `@` before the path: a password may hold `@`).
_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*://)[^/?#\s]*@")


def strip_userinfo(value: Any) -> Any:
    """`value` (a string, or mappings and lists of them such as a stored configuration) with the
    `user:password@` of every URL in it removed: what floe stored before it refused them is shown to
    no one."""
    if isinstance(value, str):
        return _USERINFO.sub(r"\1", value) if "@" in value else value
    if isinstance(value, dict):
        return {key: strip_userinfo(item) for key, item in value.items()}
    if isinstance(value, list):
        return [strip_userinfo(item) for item in value]
    return value


__all__ = ["strip_userinfo"]
