"""Jinja filters of the console's templates: ages, times, sizes and counts as people read them."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from markupsafe import Markup


def age(seconds: float | None) -> str:
    """`42 s`, `7 min`, `3 h`, `2 d` (None: `never`)."""
    if seconds is None:
        return "never"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 36 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def age_of_ms(timestamp_ms: int | None) -> str:
    return age(None if timestamp_ms is None else max(0.0, time.time() - timestamp_ms / 1000))


def ago(value: datetime | None) -> str:
    """How long ago `value` was, as the overview's last commit says it (`7 min ago`)."""
    if value is None:
        return "never"
    return f"{age(max(0.0, time.time() - value.timestamp()))} ago"


def iso(value: datetime | None) -> str:
    """A `<time datetime>` attribute: ISO 8601 in UTC."""
    return "" if value is None else value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def utc_ms(timestamp_ms: int | None) -> str:
    """A time in milliseconds since 1970 as a UTC date; a number no date has (a client wrote it into
    a snapshot) as itself, so it cannot break the page that shows it."""
    if timestamp_ms is None:
        return ""
    try:
        return datetime.fromtimestamp(timestamp_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (ValueError, OverflowError, OSError):
        return f"{timestamp_ms} ms (not a date)"


def utc(value: datetime | None) -> str:
    if value is None:
        return ""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def size(value: int | None) -> str:
    """Bytes in binary units: `512 B`, `1.5 KiB`, `3.2 MiB`."""
    if value is None:
        return "—"
    amount = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if amount < 1024 or unit == "TiB":
            return f"{amount:.0f} {unit}" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1024
    return f"{value} B"


def count(value: int | None) -> str:
    return "—" if value is None else f"{value:,}"


def offsets(value: dict[Any, Any]) -> str:
    """Partition → offset, compact: `0:120 1:98`."""
    return " ".join(f"{p}:{o}" for p, o in sorted(value.items(), key=lambda item: int(item[0])))


def as_json(value: Any) -> Markup:
    """For a `<script type="application/json">` block (whose text is not HTML-decoded): `<`, `>` and `&`
    escaped as JSON, so no value can end the element."""
    text = json.dumps(value).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return Markup(text)


FILTERS: dict[str, Callable[..., Any]] = {
    "age": age,
    "age_of_ms": age_of_ms,
    "ago": ago,
    "iso": iso,
    "utc_ms": utc_ms,
    "utc": utc,
    "size": size,
    "count": count,
    "offsets": offsets,
    "as_json": as_json,
}
