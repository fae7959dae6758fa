"""A table cell's value as people read it on the console: bytes as text when they are UTF-8 (else
hex), times in ISO 8601 (UTC as `Z`), structs, lists and maps as JSON of such values; never a Python
repr (`b'k1'`, `datetime.datetime(…)`, `+00:00`)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID


def _iso(value: datetime) -> str:
    if value.tzinfo is not None and value.utcoffset() == timedelta(0):
        return value.astimezone(UTC).replace(tzinfo=None).isoformat() + "Z"
    return value.isoformat()


def _plain(value: Any) -> Any:
    """`value` as JSON data: containers kept, everything else as its cell text."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Mapping):
        return {str(_plain(k)): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        # pyarrow reads a map as a list of (key, value) pairs.
        if value and all(isinstance(i, tuple) and len(i) == 2 for i in value):
            return {str(_plain(k)): _plain(v) for k, v in value}
        return [_plain(i) for i in value]
    return scalar_text(value)


def scalar_text(value: Any) -> str:
    """One value that is not a container, as text."""
    if isinstance(value, bytes | bytearray | memoryview):
        raw = bytes(value)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return "0x" + raw.hex()
    if isinstance(value, datetime):
        return _iso(value)
    if isinstance(value, date | time):
        return value.isoformat()
    if isinstance(value, Decimal | UUID):
        return str(value)
    return str(value)


def cell_text(value: Any, max_chars: int = 300) -> str:
    """`value` as a cell shows it, cut to `max_chars` (with `…`)."""
    if value is None:
        text = ""
    elif isinstance(value, Mapping | list | tuple):
        text = json.dumps(_plain(value), ensure_ascii=False)
    else:
        text = scalar_text(value)
    return text if len(text) <= max_chars else text[:max_chars] + "…"
