"""The counts a dead-letter redrive commit carries (ingest/dlq_redrive.py): for its audit entry and the
console's dead-letters page.

A redrive's snapshots carry `floe.redrive.redriven` and `floe.redrive.still-failing` in their summaries;
the audit entry of the transaction repeats them (`redriven=N still-failing=M`), so the audit log shows
what each redrive moved without anyone reading the tables' snapshots, and the dead-letters page lists
the dead-letter table's redrive snapshots (`redrive_history`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pyiceberg.table.update import AddSnapshotUpdate, TableUpdate

REDRIVEN = "floe.redrive.redriven"
STILL_FAILING = "floe.redrive.still-failing"
# A replay's counts (ingest/replay.py): its audit entry carries them the same way.
REPLAYED, REPLAYED_ROWS, REPLAYED_DEAD = "floe.replay.records", "floe.replay.rows", "floe.replay.dead-letters"
# The dead-letters page shows at most this many redrives (newest first).
MAX_HISTORY = 10
_MAX_DIGITS = 12


def _count(raw: object) -> int | None:
    return int(raw) if isinstance(raw, str) and raw.isdigit() and len(raw) <= _MAX_DIGITS else None


@dataclass(frozen=True, slots=True)
class Redrive:
    """One redrive commit as the dead-letter table's snapshot records it."""

    snapshot_id: int
    timestamp_ms: int
    redriven: int
    still_failing: int | None


def redrive_history(metadata: Mapping[str, Any]) -> list[Redrive]:
    """The redrive snapshots of a (dead-letter) table's metadata JSON, newest first, at most MAX_HISTORY."""
    found: list[Redrive] = []
    for snapshot in metadata.get("snapshots") or []:
        summary = snapshot.get("summary") if isinstance(snapshot, Mapping) else None
        redriven = _count(summary.get(REDRIVEN)) if isinstance(summary, Mapping) else None
        if redriven is None or not isinstance(summary, Mapping):
            continue
        at, snapshot_id = snapshot.get("timestamp-ms"), snapshot.get("snapshot-id")
        if isinstance(at, int) and isinstance(snapshot_id, int):
            found.append(Redrive(snapshot_id, at, redriven, _count(summary.get(STILL_FAILING))))
    found.sort(key=lambda r: r.timestamp_ms, reverse=True)
    return found[:MAX_HISTORY]


def redrive_counts(updates: Iterable[TableUpdate]) -> str | None:
    """`redriven=N still-failing=M` from the first snapshot carrying redrive counts (a replay's:
    `replayed=N rows=R dead-letters=D`), else None."""
    for update in updates:
        if not isinstance(update, AddSnapshotUpdate) or update.snapshot.summary is None:
            continue
        summary = update.snapshot.summary
        replayed = [_count(summary[key]) for key in (REPLAYED, REPLAYED_ROWS, REPLAYED_DEAD)]
        if replayed[0] is not None:
            rows, dead = (str(n) if n is not None else "?" for n in replayed[1:])
            return f"replayed={replayed[0]} rows={rows} dead-letters={dead}"
        redriven, failing = summary[REDRIVEN], summary[STILL_FAILING]
        if isinstance(redriven, str) and redriven.isdigit() and len(redriven) <= 12:
            failing_text = (
                failing if isinstance(failing, str) and failing.isdigit() and len(failing) <= 12 else "?"
            )
            return f"redriven={int(redriven)} still-failing={failing_text}"
    return None
