"""A table's replays (`floe replay`, ingest/replay.py) as its console page lists them, read from the
snapshot summaries a replay commit writes: `floe.replay.records`, `.rows`, `.dead-letters` and
`.range` (the replayed spans as JSON, `{"partition": [start, end]}`). Summaries are written by any
engine, so every value is checked and bounded before it is shown (and the templates escape it)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from catalog.redrive_audit import REPLAYED, REPLAYED_DEAD, REPLAYED_ROWS

RANGE = "floe.replay.range"
# The table page shows at most this many replays (newest first), each with at most this many spans.
MAX_REPLAYS = 10
MAX_SPANS = 20
_MAX_DIGITS = 12
_MAX_RANGE_CHARS = 20_000


@dataclass(frozen=True, slots=True)
class Span:
    partition: int
    start: int
    end: int  # exclusive


@dataclass(frozen=True, slots=True)
class Replay:
    """One replay commit as the table's snapshot records it."""

    snapshot_id: int
    timestamp_ms: int
    records: int
    rows: int | None
    dead_letters: int | None
    spans: list[Span]
    more_spans: int  # spans not listed (beyond MAX_SPANS)


def _count(raw: object) -> int | None:
    return int(raw) if isinstance(raw, str) and raw.isdigit() and len(raw) <= _MAX_DIGITS else None


def _offset(raw: object) -> int | None:
    return raw if isinstance(raw, int) and not isinstance(raw, bool) and 0 <= raw < 10**_MAX_DIGITS else None


def _spans(raw: object) -> tuple[list[Span], int]:
    """The replayed spans by partition; none for a value floe would not have written."""
    if not isinstance(raw, str) or len(raw) > _MAX_RANGE_CHARS:
        return [], 0
    try:
        parsed = json.loads(raw)
    except ValueError:
        return [], 0
    spans = []
    for partition, bounds in parsed.items() if isinstance(parsed, dict) else ():
        number = _count(partition)
        if number is None or not isinstance(bounds, list) or len(bounds) != 2:
            continue
        start, end = _offset(bounds[0]), _offset(bounds[1])
        if start is not None and end is not None:
            spans.append(Span(number, start, end))
    spans.sort(key=lambda s: s.partition)
    return spans[:MAX_SPANS], max(0, len(spans) - MAX_SPANS)


def replay_history(metadata: Mapping[str, Any]) -> list[Replay]:
    """The replay snapshots of a table's metadata JSON, newest first, at most MAX_REPLAYS."""
    found: list[tuple[int, Replay]] = []  # with the snapshot's place in the log: ties of time
    for place, snapshot in enumerate(metadata.get("snapshots") or []):
        summary = snapshot.get("summary") if isinstance(snapshot, Mapping) else None
        if not isinstance(summary, Mapping):
            continue
        records = _count(summary.get(REPLAYED))
        at, snapshot_id = snapshot.get("timestamp-ms"), snapshot.get("snapshot-id")
        if records is None or not isinstance(at, int) or not isinstance(snapshot_id, int):
            continue
        spans, more = _spans(summary.get(RANGE))
        rows, dead = _count(summary.get(REPLAYED_ROWS)), _count(summary.get(REPLAYED_DEAD))
        found.append((place, Replay(snapshot_id, at, records, rows, dead, spans, more)))
    found.sort(key=lambda item: (item[1].timestamp_ms, item[0]), reverse=True)
    return [replay for _, replay in found[:MAX_REPLAYS]]
