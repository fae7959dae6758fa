"""Warehouses: where tables' files live. Created by operators (`floe warehouses create`); the server's
default warehouse is synced from the environment at startup."""

from __future__ import annotations

import time
from typing import Protocol

from catalog.errors import NoSuchWarehouse
from catalog.service.shared_reads import SharedReads
from catalog.settings import normalize_warehouse_location
from catalog.store.interfaces import AuditStore, WarehouseStore
from catalog.store.records import WarehouseRecord
from catalog.store.security import AuditEntry

CREATE_WAREHOUSE = "createWarehouse"
# How long a request may be answered with the warehouse as read this long ago (its storage settings
# change rarely, by an operator; a changed location only affects new tables anyway).
WAREHOUSE_CACHE_SECONDS = 2.0


class Warehouses:
    """The warehouse a `prefix` names, cached briefly: every request reads it."""

    def __init__(self, store: WarehouseStore) -> None:
        # Shared: when the cached record expires, every request in flight would read it at once.
        self._reads: SharedReads[str, WarehouseRecord | None] = SharedReads(store.get_warehouse)
        self._cached: dict[str, tuple[float, WarehouseRecord]] = {}

    async def get(self, name: str) -> WarehouseRecord:
        """The warehouse `name`; `NoSuchWarehouse` when there is none."""
        now = time.monotonic()
        cached = self._cached.get(name)
        if cached is not None and now - cached[0] < WAREHOUSE_CACHE_SECONDS:
            return cached[1]
        record = await self._reads.read(name)
        if record is None:
            raise NoSuchWarehouse(f"Warehouse does not exist: {name}")
        self._cached[name] = (now, record)
        return record


class WarehouseAuditStore(WarehouseStore, AuditStore, Protocol):
    """Warehouses, and the audit log their changes are recorded in."""


class WarehouseService:
    def __init__(self, store: WarehouseAuditStore) -> None:
        self.store = store

    async def create_warehouse(
        self, name: str, location: str, properties: dict[str, str], *, subject: str, source: str = ""
    ) -> WarehouseRecord:
        """Create the warehouse, or update its storage settings (a new location only affects new
        tables), and record it in the audit log, as every mutation through the API is.

        `location`: file:///path, /path (made absolute) or s3://bucket/prefix. `subject` is who asked
        (the audit log's subject), `source` where from (a host, or the command line)."""
        status, outcome = 500, "failed"
        try:
            record = await self.store.upsert_warehouse(
                name, normalize_warehouse_location(location), properties
            )
            status, outcome = 200, "ok"
            return record
        finally:
            entry = AuditEntry(
                subject=subject[:255],
                cluster=None,
                action=CREATE_WAREHOUSE,
                target=f"name={name}".replace("\x00", "%00"),
                outcome=outcome,
                status_code=status,
                source=source,
            )
            await self.store.add_audit_entries([entry])
