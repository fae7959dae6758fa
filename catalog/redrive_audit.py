"""The counts a dead-letter redrive commit carries (ingest/dlq_redrive.py), for its audit entry.

A redrive's snapshots carry `floe.redrive.redriven` and `floe.redrive.still-failing` in their summaries;
the audit entry of the transaction repeats them (`redriven=N still-failing=M`), so the audit log shows
what each redrive moved without anyone reading the tables' snapshots.
"""

from __future__ import annotations

from collections.abc import Iterable

from pyiceberg.table.update import AddSnapshotUpdate, TableUpdate

REDRIVEN = "floe.redrive.redriven"
STILL_FAILING = "floe.redrive.still-failing"


def redrive_counts(updates: Iterable[TableUpdate]) -> str | None:
    """`redriven=N still-failing=M` from the first snapshot carrying redrive counts, else None."""
    for update in updates:
        if not isinstance(update, AddSnapshotUpdate) or update.snapshot.summary is None:
            continue
        summary = update.snapshot.summary
        redriven, failing = summary[REDRIVEN], summary[STILL_FAILING]
        if isinstance(redriven, str) and redriven.isdigit() and len(redriven) <= 12:
            failing_text = (
                failing if isinstance(failing, str) and failing.isdigit() and len(failing) <= 12 else "?"
            )
            return f"redriven={int(redriven)} still-failing={failing_text}"
    return None
