"""The audit log: entries are written by the HTTP layer (every mutation and token request) and by
operations outside it (`WarehouseService`); administrators read them back, newest first."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from catalog.auth import Principal, managed_cluster
from catalog.store.interfaces import AuditStore
from catalog.store.security import AuditEntry, AuditFilter


@dataclass(frozen=True, slots=True)
class AuditPage:
    """Entries newest first; `next_before` pages further back (None: this was the last page)."""

    entries: list[AuditEntry]
    next_before: int | None


# Entries one INSERT writes at most.
MAX_GROUP = 500


class AuditWriter:
    """Writes the HTTP layer's entries in groups, as a database commits a group of transactions.

    `record` returns once its entry is stored, so a client that has its answer finds its request in the
    log. Entries that arrive while a write runs wait for it, then go in the next write together: under
    load (engines ask for a token before most queries) one INSERT serves many requests, instead of one
    transaction each. One writer per process.
    """

    def __init__(self, store: AuditStore) -> None:
        self.store = store
        self._pending: list[tuple[AuditEntry, asyncio.Future[None]]] = []
        self._writing: asyncio.Task[None] | None = None

    async def record(self, entry: AuditEntry) -> None:
        """Store `entry`; raises what the write raised."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        self._pending.append((entry, done))
        writing = self._writing
        if writing is None or writing.done() or writing.get_loop() is not loop:
            self._writing = loop.create_task(self._write_pending())
        # Shielded: a caller that goes away does not stop the write its entry shares with others.
        await asyncio.shield(done)

    async def _write_pending(self) -> None:
        # Let the requests this loop iteration already holds add their entries first: one write more.
        await asyncio.sleep(0)
        while self._pending:
            group, self._pending = self._pending[:MAX_GROUP], self._pending[MAX_GROUP:]
            try:
                await self.store.add_audit_entries([entry for entry, _ in group])
            except Exception as exc:  # every caller of the group hears of it
                for _, done in group:
                    if not done.done():
                        done.set_exception(exc)
            else:
                for _, done in group:
                    if not done.done():
                        done.set_result(None)


class AuditService:
    def __init__(self, store: AuditStore) -> None:
        self.store = store

    async def list(
        self,
        principal: Principal,
        cluster: str | None,
        limit: int,
        before: int | None,
        filters: AuditFilter | None = None,
    ) -> AuditPage:
        """A page of the log: all of it (or one cluster's) for a global administrator, a cluster
        admin's own cluster's; `filters` narrow it further."""
        entries = await self.store.list_audit(
            cluster=managed_cluster(principal, cluster), limit=limit, before_id=before, filters=filters
        )
        return AuditPage(entries, entries[-1].id if len(entries) == limit else None)
