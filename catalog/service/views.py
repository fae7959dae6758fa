"""View operations: list, create, load, replace (commit), drop, exists, rename, register."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from catalog import view_commit as core
from catalog.auth import Action, Principal, authorize
from catalog.errors import AlreadyExists, BadRequest, NoSuchNamespace, NoSuchView
from catalog.identifiers import Namespace, TableIdent
from catalog.locations import (
    confine,
    confine_metadata,
    confine_properties,
    confine_stored,
    default_table_location,
    namespace_location,
    tenant_root,
)
from catalog.requirements import parse_view_requirements
from catalog.service.commit_loop import CommitAttempt, CommitLoop, CommitTarget
from catalog.service.listing_cache import Listing, Listings
from catalog.service.quotas import Limits, check_move, cluster_quota
from catalog.service.table_model import LoadedTable
from catalog.service.tabulars import Tabulars
from catalog.service.tenant_storage import TenantStorage, tenant_of
from catalog.service.warehouses import Warehouses
from catalog.settings import Settings
from catalog.storage import StorageEndpoint, client_properties
from catalog.store import CatalogStore, PendingCommit, WarehouseRecord


@dataclass(frozen=True, slots=True)
class ViewCreation:
    """A createView request; the schema and view version stay the spec's JSON for the pure core."""

    name: str
    schema: Mapping[str, Any]
    view_version: Mapping[str, Any]
    properties: Mapping[str, str] = field(default_factory=dict)
    location: str | None = None


@dataclass(frozen=True, slots=True)
class ViewChange:
    """A replaceView request: requirements and updates as the spec's JSON (the pure core checks them)."""

    updates: Sequence[Any]
    requirements: Sequence[Any] | None = None


@dataclass(frozen=True, slots=True)
class ViewRegistration:
    """A registerView request: an existing view metadata file to take into the catalog."""

    name: str
    metadata_location: str


class ViewService:
    """Views of the Iceberg REST API; `storage_endpoint` as `TableService`'s. Built once per endpoint
    at startup (`CatalogComponents`) with what it uses: the store, the settings (limits, quotas), the
    cached warehouses and listings, the spec's lookups, confined storage and the commit loop."""

    def __init__(
        self,
        *,
        store: CatalogStore,
        settings: Settings,
        warehouses: Warehouses,
        tabulars: Tabulars,
        listings: Listings,
        storage: TenantStorage,
        commits: CommitLoop,
        storage_endpoint: StorageEndpoint = "client",
    ) -> None:
        self.store = store
        self.settings = settings
        self.limits = Limits.of(settings)
        self.warehouses = warehouses
        self.tabulars = tabulars
        self.listings = listings
        self.storage = storage
        self.commits = commits
        self.storage_endpoint = storage_endpoint

    async def list_views(
        self,
        principal: Principal,
        prefix: str,
        namespace: Namespace,
        page_token: str | None,
        page_size: int | None,
    ) -> Listing:
        warehouse = await self.warehouses.get(prefix)
        authorize(principal, Action.READ, prefix, namespace.key)
        return await self.listings.page(warehouse, namespace, "view", page_token, page_size)

    def _loaded(self, warehouse: WarehouseRecord, location: str | None, metadata_json: str) -> LoadedTable:
        return LoadedTable(
            location, metadata_json, client_properties(warehouse.properties, self.storage_endpoint)
        )

    async def load(self, principal: Principal, prefix: str, ident: TableIdent) -> LoadedTable:
        warehouse = await self.warehouses.get(prefix)
        authorize(principal, Action.READ, prefix, ident.namespace.key)
        try:
            record = await self.tabulars.get(warehouse, ident, "view")
        except NoSuchNamespace:
            # loadView's only 404 in the spec is NoSuchViewException, as the Java reference answers.
            raise NoSuchView(f"View does not exist: {ident}") from None
        return self._loaded(warehouse, record.metadata_location, record.metadata_json)

    async def exists(self, principal: Principal, prefix: str, ident: TableIdent) -> None:
        await self.load(principal, prefix, ident)

    async def create(
        self, principal: Principal, prefix: str, namespace: Namespace, request: ViewCreation
    ) -> LoadedTable:
        warehouse = await self.warehouses.get(prefix)
        authorize(principal, Action.CREATE, prefix, namespace.key)
        name = request.name
        if not name:
            raise BadRequest("Invalid create view request: 'name' is required")
        properties = dict(request.properties)
        if not all(isinstance(v, str) for v in properties.values()):
            raise BadRequest("Invalid create view request: 'properties' must be an object of strings")
        limits = self.limits
        limits.check_name(name, "view name")
        limits.check_schema_json(request.schema)
        limits.check_properties(properties, "view properties")
        ns = await self.tabulars.namespace(warehouse, namespace)
        ident = TableIdent(namespace, name)
        await self.tabulars.ensure_name_free(ns.id, ident, "view")
        root = tenant_root(warehouse.location, principal.cluster)
        location = request.location or default_table_location(
            namespace_location(warehouse.location, namespace.levels, ns.properties), name
        )
        metadata = core.create_view_metadata(
            location=confine_stored(location, root, "location"),
            schema=dict(request.schema),
            view_version=dict(request.view_version),
            properties=confine_properties(properties, root),
        )
        metadata_json = metadata.model_dump_json()
        metadata_location = core.new_view_metadata_location(metadata, None)
        storage = self.storage.confined(warehouse, root)
        await self.storage.run(warehouse, principal, storage.write, metadata_location, metadata_json.encode())
        quota = cluster_quota(self.settings, warehouse, namespace, "view")
        try:
            await self.store.swap(
                [PendingCommit(None, 0, metadata_location, metadata_json, ns.id, name, "view", quota=quota)]
            )
        except AlreadyExists:
            await self.storage.run(warehouse, principal, storage.delete, metadata_location)
            raise
        return self._loaded(warehouse, metadata_location, metadata_json)

    async def replace(
        self, principal: Principal, prefix: str, ident: TableIdent, change: ViewChange
    ) -> LoadedTable:
        """Commit `updates` to a view after checking its `requirements` (the shared commit loop)."""
        warehouse = await self.warehouses.get(prefix)
        authorize(principal, Action.WRITE, prefix, ident.namespace.key)
        limits = self.limits
        limits.check_updates_json(change.updates)
        requirements = parse_view_requirements(change.requirements)
        updates = core.parse_view_updates(list(change.updates))
        root = tenant_root(warehouse.location, principal.cluster)
        config = client_properties(warehouse.properties, self.storage_endpoint)
        target = CommitTarget(
            warehouse.id,
            [ident],
            "view",
            tenant_of(warehouse, principal),
            self.storage.confined(warehouse, root),
            config,
        )

        async def prepare() -> CommitAttempt:
            record = await self.tabulars.get(warehouse, ident, "view")
            base = core.parse_view_metadata(record.metadata_json)
            metadata = confine_metadata(core.commit_view(base, requirements, updates), root)
            limits.check_properties(metadata.properties, "view properties")
            metadata_json = metadata.model_dump_json()
            location = core.new_view_metadata_location(metadata, record.metadata_location)
            swap = PendingCommit(record.id, record.version, location, metadata_json)
            return CommitAttempt([swap], [LoadedTable(location, metadata_json, config)])

        return (await self.commits.run(target, prepare))[0]

    async def drop(self, principal: Principal, prefix: str, ident: TableIdent) -> None:
        warehouse = await self.warehouses.get(prefix)
        authorize(principal, Action.DROP, prefix, ident.namespace.key)
        record = await self.tabulars.get(warehouse, ident, "view")
        if not await self.store.drop_tabular(record.id):
            raise NoSuchView(f"View does not exist: {ident}")

    async def rename(
        self, principal: Principal, prefix: str, source: TableIdent, destination: TableIdent
    ) -> None:
        warehouse = await self.warehouses.get(prefix)
        authorize(principal, Action.DROP, prefix, source.namespace.key)
        authorize(principal, Action.CREATE, prefix, destination.namespace.key)
        self.limits.check_name(destination.name, "view name")
        await check_move(self.store, self.settings, warehouse, source, destination, "view")
        await self.tabulars.rename(warehouse, source, destination, "view")

    async def register(
        self, principal: Principal, prefix: str, namespace: Namespace, request: ViewRegistration
    ) -> LoadedTable:
        warehouse = await self.warehouses.get(prefix)
        authorize(principal, Action.CREATE, prefix, namespace.key)
        name, location = request.name, request.metadata_location
        if not name or not location:
            raise BadRequest("Invalid register view request: 'name' and 'metadata-location' are required")
        limits = self.limits
        limits.check_name(name, "view name")
        root = tenant_root(warehouse.location, principal.cluster)
        location = confine(location, root, "metadata-location")
        ns = await self.tabulars.namespace(warehouse, namespace)
        await self.tabulars.ensure_name_free(ns.id, TableIdent(namespace, name), "view")
        storage = self.storage.confined(warehouse, root)
        limit = self.settings.max_metadata_file_bytes
        raw = await self.storage.run(warehouse, principal, storage.read_metadata_file, location, limit)
        metadata = confine_metadata(core.parse_view_metadata(raw), root)
        for schema in metadata.schemas:
            limits.check_schema(schema, f"schema {schema.schema_id}")
        limits.check_properties(metadata.properties, "view properties")
        metadata_json = metadata.model_dump_json()
        quota = cluster_quota(self.settings, warehouse, namespace, "view")
        await self.store.swap(
            [PendingCommit(None, 0, location, metadata_json, ns.id, name, "view", quota=quota)]
        )
        return self._loaded(warehouse, location, metadata_json)
