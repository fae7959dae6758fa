"""Namespace operations: list, create, load, exists, drop, update properties.

Every loaded namespace carries a `location` property, the folder its tables go to by default: the one a
client set (confined to the caller's folder like every location), else its folder in the warehouse.
Engines rely on it: Trino stage-creates a table in a fresh folder below it, and without one it lets the
catalog pick and then refuses the folder it finds ("Cannot create a table on a non-empty location").
"""

from __future__ import annotations

from typing import Any

from catalog.auth import Action, Principal, authorize, authorize_namespace_creation, visible_namespaces
from catalog.errors import BadRequest, NoSuchNamespace
from catalog.identifiers import Namespace, TableIdent
from catalog.locations import NAMESPACE_LOCATION, confine_stored, namespace_location, tenant_root
from catalog.service.quotas import Limits, cluster_quota
from catalog.service.tabulars import Tabulars
from catalog.service.warehouses import Warehouses
from catalog.settings import Settings
from catalog.store import CatalogStore


def _string_map(value: Any, what: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise BadRequest(f"Invalid {what}: must be an object of strings")
    if not all(isinstance(v, str) for v in value.values()):
        raise BadRequest(f"Invalid {what}: values must be strings")
    return dict(value)


def _confine_location(properties: dict[str, str], root: str) -> dict[str, str]:
    """`properties` with a `location` property in the form floe stores, checked to lie inside `root`."""
    location = properties.get(NAMESPACE_LOCATION)
    if location is None:
        return properties
    return {**properties, NAMESPACE_LOCATION: confine_stored(location, root, "namespace location")}


class NamespaceService:
    """Namespaces of the Iceberg REST API, over the store, the spec's lookups and the cached warehouses;
    the settings give the limits and cluster quotas."""

    def __init__(
        self, store: CatalogStore, settings: Settings, tabulars: Tabulars, warehouses: Warehouses
    ) -> None:
        self.store = store
        self.settings = settings
        self.limits = Limits.of(settings)
        self.tabulars = tabulars
        self.warehouses = warehouses

    async def list_namespaces(
        self,
        principal: Principal,
        prefix: str,
        parent: Namespace | None,
        page_token: str | None,
        page_size: int | None,
    ) -> tuple[list[list[str]], str | None]:
        warehouse = await self.warehouses.get(prefix)
        authorize(principal, Action.READ, prefix, parent.key if parent else None)
        if parent is not None:
            await self.tabulars.namespace(warehouse, parent)
        keys, next_token = await self.store.list_namespaces(
            warehouse.id, parent.key if parent else "", page_token, page_size
        )
        # A cluster key lists only its own namespace (and what lies below it).
        keys = visible_namespaces(principal, keys)
        return [list(Namespace.from_key(k).levels) for k in keys], next_token

    async def cluster_tables(
        self, principal: Principal, prefix: str, cluster: str, offset: int, limit: int
    ) -> tuple[int, list[TableIdent]]:
        """How many tables the cluster `cluster` (its namespace and every one below it) holds, and `limit`
        of them from `offset` on, by namespace and name: the console's overview, a page at a time."""
        warehouse = await self.warehouses.get(prefix)
        authorize(principal, Action.READ, prefix, cluster)
        total = await self.store.count_in_cluster(warehouse.id, cluster, "table")
        rows = await self.store.list_cluster_tables(warehouse.id, cluster, offset, limit)
        return total, [TableIdent(Namespace.from_key(key), name) for key, name in rows]

    async def create(
        self, principal: Principal, prefix: str, namespace: Namespace, properties: Any
    ) -> dict[str, str]:
        warehouse = await self.warehouses.get(prefix)
        authorize_namespace_creation(principal, prefix, namespace.key)
        limits = self.limits
        limits.check_namespace(namespace)
        props = _string_map(properties, "namespace properties")
        limits.check_properties(props, "namespace properties")
        props = _confine_location(props, tenant_root(warehouse.location, principal.cluster))
        quota = cluster_quota(self.settings, warehouse, namespace, "namespace")
        await self.store.create_namespace(warehouse.id, namespace.key, props, quota)
        return props

    async def load(self, principal: Principal, prefix: str, namespace: Namespace) -> dict[str, str]:
        warehouse = await self.warehouses.get(prefix)
        authorize(principal, Action.READ, prefix, namespace.key)
        properties = (await self.tabulars.namespace(warehouse, namespace)).properties
        location = namespace_location(warehouse.location, namespace.levels, properties)
        return {**properties, NAMESPACE_LOCATION: location}

    async def drop(self, principal: Principal, prefix: str, namespace: Namespace) -> None:
        warehouse = await self.warehouses.get(prefix)
        authorize(principal, Action.DROP, prefix, namespace.key)
        if not await self.store.drop_namespace(warehouse.id, namespace.key):
            raise NoSuchNamespace(f"Namespace does not exist: {namespace}")

    async def update_properties(
        self, principal: Principal, prefix: str, namespace: Namespace, removals: Any, updates: Any
    ) -> tuple[list[str], list[str], list[str]]:
        warehouse = await self.warehouses.get(prefix)
        authorize(principal, Action.WRITE, prefix, namespace.key)
        upd = _confine_location(
            _string_map(updates, "updates"), tenant_root(warehouse.location, principal.cluster)
        )
        if removals is None:
            removals = []
        if not isinstance(removals, list) or not all(isinstance(k, str) for k in removals):
            raise BadRequest("Invalid removals: must be an array of strings")
        overlap = sorted(set(removals) & set(upd))
        if overlap:
            raise BadRequest(f"Cannot remove and update the same properties: {overlap}")
        if upd:  # what the namespace would hold (a concurrent update may add to it)
            current = (await self.tabulars.namespace(warehouse, namespace)).properties
            removed = set(removals)
            kept = {k: v for k, v in current.items() if k not in removed}
            self.limits.check_properties(kept | upd, "namespace properties")
        result = await self.store.update_namespace_properties(warehouse.id, namespace.key, removals, upd)
        if result is None:
            raise NoSuchNamespace(f"Namespace does not exist: {namespace}")
        return result
