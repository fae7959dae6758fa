"""The audit log: entries are written by the HTTP layer (every mutation and token request) and by
operations outside it (`WarehouseService`); administrators read them back, newest first."""

from __future__ import annotations

from dataclasses import dataclass

from catalog.auth import Principal, managed_cluster
from catalog.store.interfaces import AuditStore
from catalog.store.security import AuditEntry, AuditFilter


@dataclass(frozen=True, slots=True)
class AuditPage:
    """Entries newest first; `next_before` pages further back (None: this was the last page)."""

    entries: list[AuditEntry]
    next_before: int | None


class AuditService:
    def __init__(self, store: AuditStore) -> None:
        self.store = store

    async def record(self, *entries: AuditEntry) -> None:
        await self.store.add_audit_entries(list(entries))

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
