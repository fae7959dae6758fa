"""The warehouses' files as the services reach them: confined to a folder, in the caller's share of the
bounded storage pool (one tenant's slow bucket must not hold every thread)."""

from __future__ import annotations

from typing import Any

from catalog.auth import Principal
from catalog.storage import Storage, StorageRunner
from catalog.store import WarehouseRecord


def tenant_of(warehouse: WarehouseRecord, principal: Principal) -> str:
    """Whose share of the storage pool a call uses: the caller's cluster, else the caller."""
    return f"{warehouse.id}/{principal.cluster}" if principal.cluster else f"key/{principal.subject}"


class TenantStorage:
    """File access to warehouses, and the storage pool blocking file calls run in."""

    def __init__(self, runner: StorageRunner) -> None:
        self.runner = runner

    def confined(self, warehouse: WarehouseRecord, root: str) -> Storage:
        """File access to `warehouse`, confined to canonical `root`."""
        return Storage(warehouse.location, warehouse.properties, root)

    async def run(self, warehouse: WarehouseRecord, principal: Principal, func: Any, *args: Any) -> Any:
        """Run a blocking storage call in the caller's share of the bounded storage pool."""
        return await self.runner.run(tenant_of(warehouse, principal), func, *args)
