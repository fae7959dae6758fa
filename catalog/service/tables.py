"""Table operations: list, create (and stage-create), load, commit, multi-table transactions, drop and
purge, exists, rename, register, unregister, metrics reports and credentials."""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import anyio.to_thread

from catalog import commit as core
from catalog.auth import Action, Principal, Role, authorize
from catalog.errors import (
    AlreadyExists,
    BadRequest,
    CatalogError,
    CommitFailed,
    NoSuchNamespace,
    NoSuchTable,
)
from catalog.events import EventBus, TableChanged
from catalog.identifiers import Namespace, TableIdent
from catalog.kafka_offsets import (
    SnapshotAtPosition,
    SnapshotAtTime,
    snapshot_at,
    snapshot_at_time,
)
from catalog.locations import (
    confine,
    confine_properties,
    confine_table_location,
    confine_table_metadata,
    default_table_location,
    is_within,
    namespace_location,
    namespace_root,
    normalize_location,
    path_of,
    path_properties,
    tenant_root,
)
from catalog.metadata_files import encode_metadata_file
from catalog.security.vending import CredentialVendor, can_vend, check_scope, wants_vended_credentials
from catalog.service.commit_loop import CommitLoop
from catalog.service.listing_cache import Listing, Listings
from catalog.service.load_cache import LoadCache
from catalog.service.metadata_models import MetadataModels
from catalog.service.quotas import Limits, check_move, cluster_quota
from catalog.service.shared_reads import SharedReads
from catalog.service.table_commits import TableCommits, managed_location
from catalog.service.table_heads import TableHeads
from catalog.service.table_model import (
    LoadedTable,
    TableChange,
    TableCreation,
    TableRegistration,
    etag_matches,
    table_etag,
    table_location,
)
from catalog.service.tabulars import Tabulars
from catalog.service.tenant_storage import TenantStorage
from catalog.service.warehouses import Warehouses
from catalog.settings import Settings
from catalog.storage import StorageCredential, StorageEndpoint, client_properties, endpoint_for
from catalog.store import CatalogStore, DroppedTabular, PendingCommit, WarehouseRecord

log = logging.getLogger(__name__)

# The current (kind, metadata location) of a table by (warehouse id, namespace key, name).
TableLocations = SharedReads[tuple[str, str, str], tuple[str, str | None] | None]


async def run_blocking(func: Any, *args: Any) -> Any:
    """Run blocking work that is not storage I/O (STS calls) in a worker thread."""
    return await anyio.to_thread.run_sync(func, *args)


class TableService:
    """Tables of the Iceberg REST API; `storage_endpoint` is the S3 endpoint this request's engine is
    told (`client`, or the catalog's own for engines on its network: `X-Floe-Storage-Endpoint`).

    Built once per endpoint at startup (`CatalogComponents`) with what it uses: besides the view
    service's collaborators, the bus told of committed changes, the committed metadata models, the
    credential vendor, and loadTable's caches (rendered loads, and the shared version-check reads)."""

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
        events: EventBus,
        metadata_models: MetadataModels,
        table_heads: TableHeads,
        vendor: CredentialVendor,
        load_cache: LoadCache,
        table_locations: TableLocations,
        storage_endpoint: StorageEndpoint = "client",
    ) -> None:
        self.store = store
        self.settings = settings
        self.limits = Limits.of(settings)
        self.warehouses = warehouses
        self.tabulars = tabulars
        self.listings = listings
        self.storage = storage
        self.events = events
        self.vendor = vendor
        self.load_cache = load_cache
        self.table_locations = table_locations
        self.storage_endpoint = storage_endpoint
        self.table_commits = TableCommits(
            store=store,
            settings=settings,
            warehouses=warehouses,
            storage=storage,
            commits=commits,
            metadata_models=metadata_models,
            table_heads=table_heads,
            events=events,
            table_config=self.table_config,
        )

    # -- reads ------------------------------------------------------------------------------------

    async def list_tables(
        self,
        principal: Principal,
        prefix: str,
        namespace: Namespace,
        page_token: str | None,
        page_size: int | None,
    ) -> Listing:
        warehouse = await self.warehouses.get(prefix)
        authorize(principal, Action.READ, prefix, namespace.key)
        return await self.listings.page(warehouse, namespace, "table", page_token, page_size)

    def table_config(self, warehouse: WarehouseRecord) -> dict[str, str]:
        return client_properties(warehouse.properties, self.storage_endpoint)

    async def vend(
        self, principal: Principal, warehouse: WarehouseRecord, location: str, *, strict: bool = False
    ) -> StorageCredential | None:
        """Temporary credentials for the table at `location`: read-only for readers, read-write for
        writers and admins; None for a warehouse that does not vend (local, or no `sts.role-arn`).

        A location outside the caller's scope (the warehouse, or its cluster's folder in it) gets none,
        or `Forbidden` when `strict` (an explicit credentials request)."""
        if not can_vend(warehouse.properties, warehouse.location):
            return None
        try:
            location = check_scope(location, tenant_root(warehouse.location, principal.cluster))
        except CatalogError as exc:
            if strict:
                raise
            log.warning("no credentials vended to %s: %s", principal.subject, exc.message)
            return None
        read_only = principal.role is Role.READER
        vendor = self.vendor
        vended = vendor.cached(warehouse.properties, location, read_only=read_only)
        if vended is None:  # STS AssumeRole: blocking
            assume = functools.partial(vendor.vend, warehouse.properties, location, read_only=read_only)
            vended = await run_blocking(assume)
        config = dict(vended.config)
        endpoint = endpoint_for(warehouse.properties, self.storage_endpoint)
        if endpoint:  # the cached credential names the catalog's own endpoint
            config["s3.endpoint"] = endpoint
        return StorageCredential(vended.prefix, config)

    async def load(
        self,
        principal: Principal,
        prefix: str,
        ident: TableIdent,
        snapshots: str = "all",
        if_none_match: str | None = None,
        access_delegation: str | None = None,
    ) -> LoadedTable | None:
        """The table's current metadata, or None when `If-None-Match` names the current version;
        with vended credentials when `access_delegation` asks for them and the warehouse vends."""
        if snapshots not in ("all", "refs"):
            raise BadRequest(f"Invalid snapshots mode: {snapshots!r} (expected 'all' or 'refs')")
        warehouse = await self.warehouses.get(prefix)
        try:
            # Namespaces a cluster key may not see answer as absent ones do (below).
            authorize(principal, Action.READ, prefix, ident.namespace.key)
        except NoSuchNamespace:
            raise NoSuchTable(
                f"Table does not exist: {ident} (namespace {ident.namespace} does not exist)"
            ) from None
        key = (warehouse.id, ident.namespace.key, ident.name, snapshots, self.storage_endpoint)
        cache = self.load_cache
        if if_none_match or cache.has(key):
            # The version check: an indexed read of the current metadata location that started after
            # this request arrived (shared with the loads of the table arriving meanwhile).
            found = await self.table_locations.read((warehouse.id, ident.namespace.key, ident.name))
            if found is not None and found[0] == "table":
                cached = cache.get(key, found[1], warehouse.properties)
                etag = cached.etag if cached is not None and cached.etag else table_etag(found[1], snapshots)
                if etag_matches(if_none_match, etag):
                    return None
                if cached is not None:
                    return await self._with_vended(principal, warehouse, cached, access_delegation)
        try:
            record = await self.tabulars.get(warehouse, ident, "table")
        except NoSuchNamespace:
            # As the Java reference answers: Java clients load metadata tables (`db.t.snapshots`) by
            # retrying a NoSuchTableException for `db.t.snapshots` as table `db.t`.
            raise NoSuchTable(
                f"Table does not exist: {ident} (namespace {ident.namespace} does not exist)"
            ) from None
        metadata_json = record.metadata_json
        if snapshots == "refs":
            metadata_json = json.dumps(core.referenced_snapshots_only(json.loads(metadata_json)))
        loaded = LoadedTable(
            record.metadata_location,
            metadata_json,
            self.table_config(warehouse),
            table_etag(record.metadata_location, snapshots),
        ).rendered()
        cache.put(key, loaded, warehouse.properties)
        return await self._with_vended(principal, warehouse, loaded, access_delegation)

    async def _with_vended(
        self,
        principal: Principal,
        warehouse: WarehouseRecord,
        loaded: LoadedTable,
        access_delegation: str | None,
    ) -> LoadedTable:
        """`loaded` with this caller's own vended credentials when it asks for them (never cached)."""
        if not wants_vended_credentials(access_delegation):
            return loaded
        credential = await self.vend(principal, warehouse, table_location(loaded.metadata_json))
        return loaded.with_credentials(credential)

    async def kafka_offsets(
        self, principal: Principal, prefix: str, ident: TableIdent
    ) -> dict[str, dict[int, tuple[int, datetime]]]:
        """The next Kafka offset (and when it was committed) per topic and partition of a table."""
        warehouse = await self.warehouses.get(prefix)
        authorize(principal, Action.READ, prefix, ident.namespace.key)
        record = await self.tabulars.get(warehouse, ident, "table")
        topics: dict[str, dict[int, tuple[int, datetime]]] = {}
        for topic, partition, offset, updated_at in await self.store.list_kafka_offsets(record.id):
            topics.setdefault(topic, {})[partition] = (offset, updated_at)
        return topics

    async def snapshot_at(
        self,
        principal: Principal,
        prefix: str,
        ident: TableIdent,
        partition: int,
        offset: int,
        topic: str | None = None,
    ) -> SnapshotAtPosition:
        """The first snapshot of the table that holds Kafka record (partition, offset)."""
        from pyiceberg.table.snapshots import Snapshot

        warehouse = await self.warehouses.get(prefix)
        authorize(principal, Action.READ, prefix, ident.namespace.key)
        record = await self.tabulars.get(warehouse, ident, "table")
        raw = json.loads(record.metadata_json).get("snapshots") or []
        return snapshot_at([Snapshot.model_validate(s) for s in raw], partition, offset, topic)

    async def snapshot_at_time(
        self,
        principal: Principal,
        prefix: str,
        ident: TableIdent,
        timestamp_ms: int,
        topic: str | None = None,
    ) -> SnapshotAtTime:
        """The snapshot of the table as of Kafka record time `timestamp_ms` (epoch ms)."""
        from pyiceberg.table.snapshots import Snapshot

        warehouse = await self.warehouses.get(prefix)
        authorize(principal, Action.READ, prefix, ident.namespace.key)
        record = await self.tabulars.get(warehouse, ident, "table")
        raw = json.loads(record.metadata_json).get("snapshots") or []
        return snapshot_at_time([Snapshot.model_validate(s) for s in raw], timestamp_ms, topic)

    async def exists(self, principal: Principal, prefix: str, ident: TableIdent) -> None:
        warehouse = await self.warehouses.get(prefix)
        authorize(principal, Action.READ, prefix, ident.namespace.key)
        await self.tabulars.get(warehouse, ident, "table")

    async def credentials(
        self, principal: Principal, prefix: str, ident: TableIdent
    ) -> list[StorageCredential]:
        """Fresh storage credentials for the table (none for a warehouse that does not vend)."""
        warehouse = await self.warehouses.get(prefix)
        authorize(principal, Action.READ, prefix, ident.namespace.key)
        record = await self.tabulars.get(warehouse, ident, "table")
        location = table_location(record.metadata_json)
        credential = await self.vend(principal, warehouse, location, strict=True)
        return [credential] if credential is not None else []

    # -- create and register ----------------------------------------------------------------------

    async def create(
        self,
        principal: Principal,
        prefix: str,
        namespace: Namespace,
        request: TableCreation,
        access_delegation: str | None = None,
    ) -> LoadedTable:
        warehouse = await self.warehouses.get(prefix)
        authorize(principal, Action.CREATE, prefix, namespace.key)
        name = request.name
        if not name:
            raise BadRequest("Invalid create table request: 'name' is required")
        if not isinstance(request.schema, Mapping):
            raise BadRequest("Invalid create table request: 'schema' is required")
        properties = dict(request.properties)
        if not all(isinstance(v, str) for v in properties.values()):
            raise BadRequest("Invalid create table request: 'properties' must be an object of strings")
        self.limits.check_name(name, "table name")
        self.limits.check_schema_json(request.schema)
        self.limits.check_properties(properties, "table properties")
        ns = await self.tabulars.namespace(warehouse, namespace)
        ident = TableIdent(namespace, name)
        folder = namespace_location(warehouse.location, namespace.levels, ns.properties)
        location = request.location or default_table_location(folder, name)
        # Every place the table's files go stays inside the caller's folder (checked before any I/O).
        root = tenant_root(warehouse.location, principal.cluster)
        location = confine_table_location(location, root, folder)
        self._note_placement(principal, warehouse, namespace, location)
        properties = confine_properties(properties, root)
        await self.tabulars.ensure_name_free(ns.id, ident, "table")
        metadata = core.create_table_metadata(
            schema=dict(request.schema),
            location=location,
            partition_spec=dict(request.partition_spec) if request.partition_spec is not None else None,
            write_order=dict(request.write_order) if request.write_order is not None else None,
            properties=properties,
        )
        metadata_json = metadata.model_dump_json()
        credential = None
        if wants_vended_credentials(access_delegation):
            # Vended before anything is written: an STS failure leaves no table behind.
            credential = await self.vend(principal, warehouse, metadata.location)
        storage = self.storage.confined(warehouse, root)
        if request.stage_create:
            await self.storage.run(warehouse, principal, storage.prepare_table_location, metadata.location)
            return LoadedTable(None, metadata_json, self.table_config(warehouse)).with_credentials(credential)
        metadata_location = core.new_metadata_location(metadata, None)
        content = encode_metadata_file(metadata_location, metadata_json)
        await self.storage.run(warehouse, principal, storage.write, metadata_location, content)
        managed = managed_location(warehouse, ns, ident, metadata.location)
        try:
            await self.store.swap(
                [
                    PendingCommit(
                        None,
                        0,
                        metadata_location,
                        metadata_json,
                        ns.id,
                        name,
                        "table",
                        managed_location=managed,
                        quota=cluster_quota(self.settings, warehouse, namespace, "table"),
                    )
                ]
            )
        except AlreadyExists:
            await self.storage.run(warehouse, principal, storage.delete, metadata_location)
            raise
        await self.events.publish(TableChanged(warehouse, namespace, name))
        loaded = LoadedTable(metadata_location, metadata_json, self.table_config(warehouse))
        return loaded.with_credentials(credential)

    async def register(
        self, principal: Principal, prefix: str, namespace: Namespace, request: TableRegistration
    ) -> LoadedTable:
        warehouse = await self.warehouses.get(prefix)
        authorize(principal, Action.CREATE, prefix, namespace.key)
        name, location, overwrite = request.name, request.metadata_location, request.overwrite
        if not name or not location:
            raise BadRequest("Invalid register request: 'name' and 'metadata-location' are required")
        self.limits.check_name(name, "table name")
        # Only metadata inside the caller's own folder, describing a table inside it: registering is
        # otherwise a way to read (and hand out) any file the server can reach.
        root = tenant_root(warehouse.location, principal.cluster)
        location = confine(location, root, "metadata-location")
        ns = await self.tabulars.namespace(warehouse, namespace)
        storage = self.storage.confined(warehouse, root)
        limit = self.settings.max_metadata_file_bytes
        raw = await self.storage.run(warehouse, principal, storage.read_metadata_file, location, limit)
        metadata = confine_table_metadata(core.parse_table_metadata(raw), None, root)
        self.limits.check_table_metadata(metadata)
        self._note_placement(principal, warehouse, namespace, metadata.location)
        metadata_json = metadata.model_dump_json()
        ident = TableIdent(namespace, name)
        existing = await self.store.get_tabular(warehouse.id, namespace.key, name)
        if existing is not None:
            if existing.kind != "table":
                raise AlreadyExists(f"View with same name already exists: {ident}")
            if not overwrite:
                raise AlreadyExists(f"Table already exists: {ident}")
            swap = PendingCommit(existing.id, existing.version, location, metadata_json)
            if not await self.store.swap([swap]):
                raise CommitFailed(f"Table {ident} changed while it was being registered")
        else:
            quota = cluster_quota(self.settings, warehouse, namespace, "table")
            await self.store.swap(
                [PendingCommit(None, 0, location, metadata_json, ns.id, name, "table", quota=quota)]
            )
        await self.events.publish(TableChanged(warehouse, namespace, name))
        return LoadedTable(location, metadata_json, self.table_config(warehouse))

    def _note_placement(
        self, principal: Principal, warehouse: WarehouseRecord, namespace: Namespace, location: str
    ) -> None:
        """Log a global administrator's use of its exception: a table outside its cluster's folder
        (the request itself is in the audit log)."""
        home = namespace_root(warehouse.location, namespace.levels[0])
        if not is_within(normalize_location(location), home):
            log.warning("%s placed table %s at %s, outside %s", principal.subject, namespace, location, home)

    # -- commits ----------------------------------------------------------------------------------

    async def commit(self, principal: Principal, prefix: str, change: TableChange) -> LoadedTable:
        return (await self.commit_all(principal, prefix, [change]))[0]

    async def commit_all(
        self, principal: Principal, prefix: str, changes: list[TableChange]
    ) -> list[LoadedTable]:
        """Commit changes to one or more tables atomically: all land or none does (`TableCommits`)."""
        return await self.table_commits.commit_all(principal, prefix, changes)

    # -- drop, rename, unregister -----------------------------------------------------------------

    async def drop(self, principal: Principal, prefix: str, ident: TableIdent, purge: bool) -> LoadedTable:
        """Remove the table from the catalog; with `purge`, delete every file it owns as well.

        Returns the table as it was when removed (the `unregisterTable` result)."""
        warehouse = await self.warehouses.get(prefix)
        authorize(principal, Action.DROP, prefix, ident.namespace.key)
        record = await self.tabulars.get(warehouse, ident, "table")
        dropped = await self.store.drop_tabular(record.id)
        if dropped is None:
            raise NoSuchTable(f"Table does not exist: {ident}")
        await self.events.publish(TableChanged(warehouse, ident.namespace, ident.name))
        if purge:
            # The table is gone: nothing about its files may turn that into an error now.
            try:
                await self._purge(warehouse, principal, ident, dropped)
            except Exception:
                log.exception("purge of %s failed after it was dropped; its files are left", ident)
        return LoadedTable(dropped.metadata_location, dropped.metadata_json, {})

    async def _purge(
        self,
        warehouse: WarehouseRecord,
        principal: Principal,
        ident: TableIdent,
        dropped: DroppedTabular,
    ) -> None:
        """Delete a dropped table's files: only under the table's own locations (its location, data
        and metadata paths), and only those inside its cluster's folder (for a table of a global
        administrator's namespace, that namespace's folder).

        The files its metadata lists go first; then, for a table in a catalog-assigned folder, every
        file left in that folder (written by commits that lost a race, or never committed), unless
        another table or view still mentions the folder (a location chosen inside it, a registered
        copy of the metadata), which keeps the folder to the listed files."""
        metadata = core.parse_table_metadata(dropped.metadata_json)
        metadata_location = dropped.metadata_location
        root = namespace_root(warehouse.location, ident.namespace.levels[0])
        owned = []
        for what, path in [("location", metadata.location), *path_properties(metadata.properties)]:
            try:
                owned.append(confine(path, root, what))
            except CatalogError as exc:
                log.warning("purge of %s skips %s: %s", ident, path, exc.message)
        storage = self.storage.confined(warehouse, root)
        deleted = await self.storage.run(
            warehouse, principal, storage.purge_table, metadata, metadata_location, owned
        )
        folder = dropped.managed_location
        if folder is not None:
            try:
                folder = confine(folder, root, "location")
            except CatalogError as exc:
                log.warning("purge of %s keeps its folder %s: %s", ident, folder, exc.message)
                folder = None
        if folder is not None:
            if await self.store.mentions_path(path_of(folder)):
                log.warning("purge of %s deletes only its listed files: another table uses %s", ident, folder)
            else:
                deleted += await self.storage.run(warehouse, principal, storage.purge_folder, folder)
        log.info("purged %s: %d files deleted", ident, deleted)

    async def unregister(self, principal: Principal, prefix: str, ident: TableIdent) -> LoadedTable:
        """Remove the table from the catalog and keep every file (so it can be registered again)."""
        return await self.drop(principal, prefix, ident, purge=False)

    async def rename(
        self, principal: Principal, prefix: str, source: TableIdent, destination: TableIdent
    ) -> None:
        warehouse = await self.warehouses.get(prefix)
        authorize(principal, Action.DROP, prefix, source.namespace.key)
        authorize(principal, Action.CREATE, prefix, destination.namespace.key)
        self.limits.check_name(destination.name, "table name")
        await check_move(self.store, self.settings, warehouse, source, destination, "table")
        await self.tabulars.rename(warehouse, source, destination, "table")
        for ident in (source, destination):
            await self.events.publish(TableChanged(warehouse, ident.namespace, ident.name))

    # -- metrics ----------------------------------------------------------------------------------

    async def report_metrics(self, principal: Principal, prefix: str, ident: TableIdent, body: Any) -> None:
        """Keep a scan or commit report with its table.

        A report for a table that has no row (one inside an uncommitted create transaction, which only
        the client knows of) is accepted and not kept, as the reference server accepts every report;
        the namespace must still exist and be the caller's to read (a key outside its cluster gets 404).
        """
        warehouse = await self.warehouses.get(prefix)
        authorize(principal, Action.READ, prefix, ident.namespace.key)
        if not isinstance(body, dict) or body.get("report-type") not in ("scan-report", "commit-report"):
            raise BadRequest("Invalid metrics report: 'report-type' must be 'scan-report' or 'commit-report'")
        record = await self.store.get_tabular(warehouse.id, ident.namespace.key, ident.name)
        if record is None or record.kind != "table":
            await self.tabulars.namespace(warehouse, ident.namespace)
            log.debug("metrics report for %s, which has no committed table, not kept", ident)
            return
        await self.store.add_metrics_report(record.id, body["report-type"], body)
