"""A mutation request's audit entry, written in the transaction of the change it records.

`catalog.api.audit.audit_step` sets a `PendingAudit` for each mutation request; the store's
change-making transactions call `record_change(conn)` right after their change, so the entry and the
change commit together, or neither does (a failed insert rolls the change back: `AuditUnavailable`).
A request of several write transactions gets its entry with the first that commits a change. A table
commit writes the entry itself (`catalog.store.commit_records`) and marks it here (`mark_written`).

Only the task that set it may write it: tasks spawned during the request copy its context (lease
renewals, the audit writer's flushes, caches' refreshes) and must never carry a request's entry.
Writes that are no change of their own (idempotency keys, audit rows, failure counters, a key's
last use) never call `record_change`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from sqlalchemy.ext.asyncio import AsyncConnection

from catalog.errors import ServiceUnavailable

if TYPE_CHECKING:  # the store's mixins import this module: no cycle through `commit_records`
    from catalog.store.security import AuditEntry

UNAUDITED_MESSAGE = (
    "The request's audit entry could not be written, so its change was not applied; retry later"
)


class AuditUnavailable(ServiceUnavailable):
    """The audit entry of a change could not be written with it: the change was rolled back."""

    def __init__(self, message: str = UNAUDITED_MESSAGE) -> None:
        super().__init__(message)


class PendingAudit:
    """One mutation request's entry (built when written: the principal is known by then)."""

    __slots__ = ("_build", "_staged", "_task", "target", "written")

    def __init__(self, build: Callable[[], AuditEntry]) -> None:
        self._build = build
        self._task = asyncio.current_task()
        self._staged: AuditEntry | None = None
        # The entry a committed transaction stored (None: not yet).
        self.written: AuditEntry | None = None
        # What the change made, when its path does not name it (a new key's client id): `name_target`.
        self.target = ""

    def _owned(self) -> bool:
        return self._task is asyncio.current_task()

    def open(self) -> bool:
        """Whether this task's next change still has to write the entry."""
        return self.written is None and self._staged is None and self._owned()

    def entry(self) -> AuditEntry:
        built = self._build()
        if not self.target:
            return built
        return replace(built, target=" ".join(t for t in (built.target, self.target) if t))

    def mark_written(self, entry: AuditEntry) -> None:
        """`entry` committed with the request's change."""
        if self._owned():
            self.written, self._staged = entry, None


PENDING_AUDIT: ContextVar[PendingAudit | None] = ContextVar("floe_pending_audit", default=None)


def pending_audit() -> PendingAudit | None:
    """The current request's entry while its change has yet to write it (in the request's own task)."""
    pending = PENDING_AUDIT.get()
    return pending if pending is not None and pending.open() else None


def name_target(target: str) -> None:
    """Name what the current request's change makes (`client_id=… cluster=…`) in its audit entry, when
    its path does not (the change's transaction writes the entry after this)."""
    pending = pending_audit()
    if pending is not None:
        pending.target = target.replace(chr(0), "%00")


def audit_written() -> bool:
    """Whether the current request's entry was already stored with one of its changes."""
    pending = PENDING_AUDIT.get()
    return pending is not None and pending.written is not None


async def record_change(conn: AsyncConnection) -> None:
    """Insert the current request's audit entry in `conn`'s transaction, right after its change (once
    per request); raises `AuditUnavailable` when it cannot be, which rolls the change back."""
    pending = pending_audit()
    if pending is None:
        return
    from catalog.store.commit_records import CommitRecords, write

    entry = pending.entry()
    await write(conn, CommitRecords(entry, None), datetime.now(UTC))  # raises AuditUnavailable
    pending._staged = entry


@contextmanager
def settling() -> Iterator[None]:
    """Around a write transaction: an entry staged in it is written once it commits, dropped when not."""
    pending = PENDING_AUDIT.get()
    try:
        yield
    except BaseException:
        if pending is not None and pending._owned():
            pending._staged = None
        raise
    if pending is not None and pending._staged is not None:
        pending.mark_written(pending._staged)
