"""The catalog's composition root: every collaborator and service of a `floe serve` process, built once
at startup from the store and the settings.

Nothing here decides anything (the rules live in the domain modules and the services); each service
is handed the collaborators it uses, by name, and never this object. The HTTP layer takes the built
services from here (`catalog/api/dependencies.py`, the hot routes), so a request constructs nothing.
"""

from __future__ import annotations

from catalog.events import EventBus
from catalog.security.vending import CredentialVendor
from catalog.service.audit import AuditService, AuditWriter
from catalog.service.clusters import ClusterService
from catalog.service.commit_loop import CommitLocks, CommitLoop
from catalog.service.leases import LeaseService
from catalog.service.listing_cache import Listings
from catalog.service.load_cache import LoadCache
from catalog.service.maintenance import MaintenanceService
from catalog.service.metadata_models import MetadataModels
from catalog.service.namespaces import NamespaceService
from catalog.service.pipelines import PipelineService
from catalog.service.shared_reads import SharedReads
from catalog.service.table_heads import TableHeads
from catalog.service.tables import TableLocations, TableService
from catalog.service.tabulars import Tabulars
from catalog.service.tenant_storage import TenantStorage
from catalog.service.views import ViewService
from catalog.service.warehouses import Warehouses
from catalog.service.watermarks import WatermarkService
from catalog.settings import Settings
from catalog.storage import STORAGE_ENDPOINTS, StorageEndpoint, StorageRunner
from catalog.store import CatalogStore


class CatalogComponents:
    """What one process shares: the store and settings, the per-process caches and pools, and the
    services built on them (tables and views once per storage endpoint an engine may ask for)."""

    def __init__(self, store: CatalogStore, settings: Settings) -> None:
        self.store = store
        self.settings = settings
        # One per process: it caches vended storage credentials and STS clients.
        self.vendor = CredentialVendor()
        # Told of committed changes; side effects (Glue publishing, commit events) subscribe at startup.
        self.events = EventBus()
        # Rendered loadTable responses per table version (checked against the database on every load),
        # and that check: one read of a table's current metadata location shared by concurrent loads.
        self.load_cache = LoadCache()
        self.table_locations: TableLocations = SharedReads(lambda key: store.get_tabular_location(*key))
        # Rendered listTables/listViews pages per namespace listing version.
        self.listings = Listings(store)
        self.warehouses = Warehouses(store)
        self.tabulars = Tabulars(store)
        self.storage = TenantStorage(
            StorageRunner(
                settings.storage_threads,
                settings.storage_threads_per_tenant,
                settings.storage_timeout_seconds,
            )
        )
        # The metadata models of this process's commits: the next commit to a table starts from them.
        self.metadata_models = MetadataModels(settings.metadata_cache_mb * 1024 * 1024)
        # The rows its commits left: the next commit to a table skips reading the row.
        self.table_heads = TableHeads()
        # The HTTP layer's audit entries, written in groups under load.
        self.audit = AuditWriter(store, settings.audit_repeat_window_seconds)
        # One commit at a time per table or view in this process, in the loop tables and views share.
        self.commits = CommitLoop(
            store,
            CommitLocks(),
            self.storage.runner,
            settings.commit_retries,
            settings.max_metadata_file_bytes,
        )

        self.tables: dict[StorageEndpoint, TableService] = {
            endpoint: self._table_service(endpoint) for endpoint in STORAGE_ENDPOINTS
        }
        self.views: dict[StorageEndpoint, ViewService] = {
            endpoint: ViewService(
                store=store,
                settings=settings,
                warehouses=self.warehouses,
                tabulars=self.tabulars,
                listings=self.listings,
                storage=self.storage,
                commits=self.commits,
                storage_endpoint=endpoint,
            )
            for endpoint in STORAGE_ENDPOINTS
        }
        self.namespaces = NamespaceService(store, settings, self.tabulars, self.warehouses)
        self.watermarks = WatermarkService(store, settings, self.tabulars, self.warehouses)
        self.pipelines = PipelineService(
            store, settings, self.events, self.tables["client"], self.metadata_models
        )
        self.clusters = ClusterService(store, self.warehouses.get, settings.warehouse_name)
        self.maintenance = MaintenanceService(store, self.warehouses.get)
        self.leases = LeaseService(store)
        self.audit_log = AuditService(store)

    def _table_service(self, endpoint: StorageEndpoint) -> TableService:
        return TableService(
            store=self.store,
            settings=self.settings,
            warehouses=self.warehouses,
            tabulars=self.tabulars,
            listings=self.listings,
            storage=self.storage,
            commits=self.commits,
            events=self.events,
            metadata_models=self.metadata_models,
            table_heads=self.table_heads,
            vendor=self.vendor,
            load_cache=self.load_cache,
            table_locations=self.table_locations,
            storage_endpoint=endpoint,
        )
