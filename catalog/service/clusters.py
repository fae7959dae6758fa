"""Kafka source clusters: registering one creates its namespace (named after it) in its warehouse."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from catalog.auth import Principal, require_admin, sees_cluster
from catalog.errors import BadRequest, NotFound
from catalog.store.audit_context import name_target
from catalog.store.interfaces import ClusterStore
from catalog.store.records import WarehouseRecord
from catalog.store.security import ClusterRecord

CLUSTER_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
MAX_CLUSTER_NAME = 128

WarehouseLookup = Callable[[str], Awaitable[WarehouseRecord]]


def check_cluster_name(name: str) -> None:
    if not name or not set(name) <= CLUSTER_NAME_CHARS or len(name) > MAX_CLUSTER_NAME:
        raise BadRequest(f"Invalid cluster name {name!r}: use letters, digits, '_' and '-'")


class ClusterService:
    def __init__(self, store: ClusterStore, warehouse: WarehouseLookup, default_warehouse: str) -> None:
        self.store = store
        self.warehouse = warehouse
        self.default_warehouse = default_warehouse

    async def create(
        self, principal: Principal, name: str, warehouse: str | None, properties: dict[str, str]
    ) -> ClusterRecord:
        """Register a cluster in `warehouse` (None: the default warehouse)."""
        require_admin(principal)
        check_cluster_name(name)
        record = await self.warehouse(warehouse or self.default_warehouse)
        name_target(f"cluster={name} warehouse={record.name}")  # the audit entry names it (not the path)
        return await self.store.create_cluster(name, record.id, properties)

    async def list(self, principal: Principal) -> list[ClusterRecord]:
        """Every cluster for a global administrator; a cluster key's own cluster."""
        return [r for r in await self.store.list_clusters() if sees_cluster(principal, r.name)]

    async def get(self, principal: Principal, name: str) -> ClusterRecord:
        record = await self.store.get_cluster(name)
        if record is None or not sees_cluster(principal, name):
            raise NotFound(f"Cluster does not exist: {name}")
        return record

    async def delete(self, principal: Principal, name: str) -> None:
        """Delete a cluster with its keys and (empty) namespace; refused while it still has tables."""
        require_admin(principal)
        await self.store.delete_cluster(name)
