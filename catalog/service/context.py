"""What every catalog operation shares: the store, settings, warehouses and their storage."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import anyio.to_thread

from catalog.auth import Principal
from catalog.errors import (
    NoSuchNamespace,
    NoSuchWarehouse,
)
from catalog.events import EventBus
from catalog.identifiers import Namespace
from catalog.security.vending import CredentialVendor
from catalog.service.audit import AuditWriter
from catalog.service.commit_loop import CommitLocks, CommitLoop
from catalog.service.listing_cache import Listing, ListingCache
from catalog.service.load_cache import LoadCache
from catalog.service.metadata_models import MetadataModels
from catalog.service.shared_reads import SharedReads
from catalog.service.tabulars import Tabulars
from catalog.settings import Settings
from catalog.storage import Storage, StorageRunner
from catalog.store import CatalogStore, TabularKind, WarehouseRecord

WAREHOUSE_CACHE_SECONDS = 2.0


async def run_blocking(func: Any, *args: Any) -> Any:
    """Run blocking work that is not storage I/O (STS calls) in a worker thread."""
    return await anyio.to_thread.run_sync(func, *args)


def tenant_of(warehouse: WarehouseRecord, principal: Principal) -> str:
    """Whose share of the storage pool a call uses: the caller's cluster, else the caller."""
    return f"{warehouse.id}/{principal.cluster}" if principal.cluster else f"key/{principal.subject}"


@dataclass
class CatalogContext:
    store: CatalogStore
    settings: Settings
    # One per process: it caches vended storage credentials and STS clients.
    vendor: CredentialVendor = field(default_factory=CredentialVendor)
    # Told of committed changes; side effects (Glue publishing) subscribe at startup.
    events: EventBus = field(default_factory=EventBus)
    # Rendered loadTable responses per table version (checked against the database on every load).
    load_cache: LoadCache = field(default_factory=LoadCache)
    # The current (kind, metadata location) of tables, one database read shared by concurrent loads.
    table_locations: SharedReads[tuple[str, str, str], tuple[str, str | None] | None] = field(init=False)
    # Rendered listTables/listViews pages per namespace listing version (checked on every listing).
    listing_cache: ListingCache = field(default_factory=ListingCache)
    # The (id, listing version) of namespaces, one database read shared by concurrent listings.
    listing_versions: SharedReads[tuple[str, str], tuple[str, int] | None] = field(init=False)
    storage_runner: StorageRunner = field(init=False)
    # The metadata models of this process's commits: the next commit to a table starts from them.
    metadata_models: MetadataModels = field(default_factory=MetadataModels)
    # The HTTP layer's audit entries, written in groups under load.
    audit: AuditWriter = field(init=False)
    # Namespaces, tables and views looked up and named by the spec's rules.
    tabulars: Tabulars = field(init=False)
    # One commit at a time per table or view in this process, and the commit loop that holds them.
    locks: CommitLocks = field(default_factory=CommitLocks)
    commits: CommitLoop = field(init=False)
    _warehouse_reads: SharedReads[str, WarehouseRecord | None] = field(init=False)
    _warehouses: dict[str, tuple[float, WarehouseRecord]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.table_locations = SharedReads(lambda key: self.store.get_tabular_location(*key))
        self.listing_versions = SharedReads(lambda key: self.store.get_listing_version(*key))
        self._warehouse_reads = SharedReads(self.store.get_warehouse)
        self.tabulars = Tabulars(self.store)
        self.audit = AuditWriter(self.store, self.settings.audit_repeat_window_seconds)
        self.storage_runner = StorageRunner(
            self.settings.storage_threads,
            self.settings.storage_threads_per_tenant,
            self.settings.storage_timeout_seconds,
        )
        self.commits = CommitLoop(
            self.store,
            self.locks,
            self.storage_runner,
            self.settings.commit_retries,
            self.settings.max_metadata_file_bytes,
        )

    async def check_database(self) -> None:
        """Raise unless the database answers (readiness probes)."""
        await self.store.ping()

    async def warehouse(self, name: str) -> WarehouseRecord:
        """The warehouse a `prefix` names, cached briefly: it is read on every request."""
        now = time.monotonic()
        cached = self._warehouses.get(name)
        if cached is not None and now - cached[0] < WAREHOUSE_CACHE_SECONDS:
            return cached[1]
        # Shared: when the cached record expires, every request in flight would read it at once.
        record = await self._warehouse_reads.read(name)
        if record is None:
            raise NoSuchWarehouse(f"Warehouse does not exist: {name}")
        self._warehouses[name] = (now, record)
        return record

    async def listing(
        self,
        warehouse: WarehouseRecord,
        namespace: Namespace,
        kind: TabularKind,
        page_token: str | None,
        page_size: int | None,
    ) -> Listing:
        """A page of the names of `namespace`'s tables or views (the caller has authorized the read):
        the cached page when the namespace's listing version says it is current, else listed and
        cached. The version is read before the names, so a cached page is never older than its
        version."""
        found = await self.listing_versions.read((warehouse.id, namespace.key))
        if found is None:
            raise NoSuchNamespace(f"Namespace does not exist: {namespace}")
        namespace_id, listing_version = found
        key = (warehouse.id, namespace.key, kind, page_token or "", page_size or 0)
        cached = self.listing_cache.get(key, namespace_id, listing_version)
        if cached is not None:
            return cached
        names, next_token = await self.store.list_tabulars(namespace_id, kind, page_token, page_size)
        listing = Listing.render(namespace, names, next_token)
        self.listing_cache.put(key, namespace_id, listing_version, listing)
        return listing

    def storage(self, warehouse: WarehouseRecord, root: str) -> Storage:
        """File access to `warehouse`, confined to canonical `root`."""
        return Storage(warehouse.location, warehouse.properties, root)

    async def run_storage(
        self, warehouse: WarehouseRecord, principal: Principal, func: Any, *args: Any
    ) -> Any:
        """Run a blocking storage call in the caller's share of the bounded storage pool."""
        return await self.storage_runner.run(tenant_of(warehouse, principal), func, *args)
