"""`WarehouseService.create_warehouse` (what `floe warehouses create` runs) records an audit entry."""

from __future__ import annotations

import asyncio
from pathlib import Path

from catalog.migrations import upgrade_database
from catalog.service.warehouses import CREATE_WAREHOUSE, WarehouseService
from catalog.store import create_store


def test_create_warehouse_is_audited(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'catalog.db'}"
    upgrade_database(url)

    async def run() -> None:
        store = create_store(url)
        try:
            service = WarehouseService(store)
            record = await service.create_warehouse(
                "lake", str(tmp_path / "lake"), {"s3.region": "eu-west-1"}, subject="cli:ops", source="cli"
            )
            assert record.location == (tmp_path / "lake").resolve().as_uri()
            assert (await store.get_warehouse("lake")) == record
            entries = await store.list_audit(limit=10)
            assert [(e.action, e.subject, e.target, e.outcome, e.source) for e in entries] == [
                (CREATE_WAREHOUSE, "cli:ops", "name=lake", "ok", "cli")
            ]
        finally:
            await store.close()

    asyncio.run(run())
