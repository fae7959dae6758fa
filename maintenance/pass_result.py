"""What one table's maintenance pass did: its actions and the table's counts before and after, as
floe records it (`POST /management/v1/maintenance/passes`) and as `floe maintain` prints it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from catalog.client import MaintenanceAction, PassRecord, TableCounts
from maintenance.table_state import TableStats

if TYPE_CHECKING:
    from maintenance.worker import MaintainedTable


@dataclass
class ActionOutcome:
    name: str
    duration_seconds: float
    result: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    def to_action(self) -> MaintenanceAction:
        return MaintenanceAction(self.name, round(self.duration_seconds, 3), dict(self.result), self.error)


# The actions as a pass's summary line says them.
ACTION_WORDS = {
    "rewrite_data_files": "compacted data files",
    "rewrite_position_delete_files": "compacted delete files",
    "rewrite_manifests": "rewrote manifests",
    "expire_snapshots": "expired old snapshots",
    "remove_orphan_files": "removed orphan files",
}


@dataclass
class PassResult:
    """One table's pass, as recorded."""

    table: MaintainedTable
    started_at: datetime
    duration_seconds: float = 0.0
    actions: list[ActionOutcome] = field(default_factory=list)
    before: TableStats | None = None
    after: TableStats | None = None
    error: str | None = None

    @property
    def failed(self) -> bool:
        return self.error is not None or any(a.error is not None for a in self.actions)

    def to_record(self) -> PassRecord:
        """The pass as floe records it (`POST /management/v1/maintenance/passes`)."""
        return PassRecord(
            warehouse=self.table.warehouse,
            namespace=list(self.table.namespace),
            table=self.table.name,
            started_at=self.started_at,
            duration_seconds=round(self.duration_seconds, 3),
            actions=[a.to_action() for a in self.actions],
            before=_counts(self.before),
            after=_counts(self.after),
            error=self.error,
        )

    def summary(self) -> str:
        """The pass in a line people read (`floe maintain`, `floe up`): what it did, in words, and the
        table's data files and snapshots before and after."""
        ran = (
            ", ".join(
                ACTION_WORDS.get(a.name, a.name) + (" (failed)" if a.error else "") for a in self.actions
            )
            or "nothing to do"
        )
        if any("quick_check" in a.result for a in self.actions):
            ran = f"nothing to do (table metadata); {ran}"
        change = ""
        if self.before is not None and self.after is not None:
            change = (
                f"; data files {self.before.data_files} before, {self.after.data_files} after; "
                f"snapshots {self.before.snapshots} before, {self.after.snapshots} after"
            )
        error = f"; error: {self.error}" if self.error else ""
        return f"{self.table}: {ran} in {self.duration_seconds:.1f} s{change}{error}"


def _counts(stats: TableStats | None) -> TableCounts | None:
    return None if stats is None else TableCounts(**stats.to_json())


__all__ = ["ACTION_WORDS", "ActionOutcome", "PassResult"]
