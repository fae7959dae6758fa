"""AWS Glue Data Catalog publishing: every table of an S3 warehouse gets a Glue table pointing at its
current metadata file, so Athena, EMR, Redshift Spectrum and any Glue-catalog engine (pyiceberg's and
Iceberg Java's `GlueCatalog`) find floe's tables without talking to floe.

A Glue table looks exactly like the ones those `GlueCatalog`s write: database = the namespace (nested
levels joined with `_`), table = the table name (both lower-cased, as Glue stores them),
`TableType=EXTERNAL_TABLE`, `Parameters` with `table_type=ICEBERG`, `metadata_location`,
`previous_metadata_location` and the table's properties, and a `StorageDescriptor` with the table
location and its columns in Glue's type syntax. floe adds `floe.warehouse` (the warehouse id): floe only
updates or deletes Glue tables carrying its own warehouse's mark (or, with no mark, an Iceberg table
pointing at a metadata file of the same table's history, which floe then takes over).

Publishing never touches a commit's path: the service calls `GluePublisher.notify` (a dict insert), and a
background task per process publishes. Notifications coalesce per table, and a publish always writes the
table's *current* state read from the store at publish time (absent: the Glue table is deleted), so it
never moves Glue backwards, whatever the order in which workers or servers publish. Glue's table
`VersionId` makes a concurrent publisher's stale write fail and re-read instead of overwrite. Failures
are retried with exponential backoff, for as long as it takes (an unreachable Glue only delays).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_thread
import boto3
from botocore.config import Config
from botocore.exceptions import ClientError
from prometheus_client import Counter, Gauge
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    StringType,
    StructType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

from catalog import commit as core
from catalog.identifiers import Namespace
from catalog.settings import Settings
from catalog.store import SqlCatalogStore, WarehouseRecord

log = logging.getLogger(__name__)

GLUE_PUBLISHED = Counter(
    "floe_glue_published_total", "Glue tables created, updated or deleted to match floe's catalog"
)
GLUE_FAILURES = Counter("floe_glue_failures_total", "Glue publish attempts that failed")
GLUE_QUEUE = Gauge(
    "floe_glue_queue_length",
    "Tables waiting to be published to Glue (or being published)",
    multiprocess_mode="livesum",
)

# The parameter names pyiceberg's and Iceberg Java's GlueCatalog write and read.
TABLE_TYPE = "table_type"
METADATA_LOCATION = "metadata_location"
PREVIOUS_METADATA_LOCATION = "previous_metadata_location"
ICEBERG_FIELD_ID = "iceberg.field.id"
ICEBERG_FIELD_OPTIONAL = "iceberg.field.optional"
ICEBERG_FIELD_CURRENT = "iceberg.field.current"
# floe's ownership mark on the Glue tables it publishes.
FLOE_WAREHOUSE = "floe.warehouse"

S3_SCHEMES = ("s3://", "s3a://", "s3n://")
# Glue's limits (CreateTable API reference): longer values make the whole call fail.
_MAX_PARAMETER_KEY = 255
_MAX_PARAMETER_VALUE = 512_000
_MAX_COMMENT = 255
_MAX_DESCRIPTION = 2048
# Error codes retrying cannot fix: the input itself is rejected.
_PERMANENT_ERRORS = frozenset({"InvalidInputException", "ValidationException"})
# A publish re-reads and tries again when a concurrent publisher changed the Glue table under it.
_RACE_ATTEMPTS = 5

_GLUE_PRIMITIVES: dict[type[IcebergType], str] = {
    BooleanType: "boolean",
    IntegerType: "int",
    LongType: "bigint",
    FloatType: "float",
    DoubleType: "double",
    DateType: "date",
    TimeType: "string",
    StringType: "string",
    UUIDType: "string",
    TimestampType: "timestamp",
    TimestamptzType: "timestamp",
    # Glue (Hive) types have no nanosecond timestamp: engines read the precise type from the metadata.
    TimestampNanoType: "timestamp",
    TimestamptzNanoType: "timestamp",
    FixedType: "binary",
    BinaryType: "binary",
}


@dataclass(frozen=True, slots=True)
class GlueTarget:
    """The Glue Data Catalog to publish to: region (None: the AWS chain's), account id (None: the
    caller's account) and endpoint (None: AWS's regional endpoint)."""

    region: str | None = None
    catalog_id: str | None = None
    endpoint: str | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> GlueTarget | None:
        """The target `FLOE_GLUE_*` configure; None (publishing off) when none of them is set."""
        if not (settings.glue_region or settings.glue_catalog_id or settings.glue_endpoint):
            return None
        return cls(settings.glue_region, settings.glue_catalog_id, settings.glue_endpoint)


GlueTargetProvider = Callable[[], Awaitable[GlueTarget | None]]


def settings_target_provider(settings: Settings) -> GlueTargetProvider:
    """A provider answering the environment's target (fixed for the process's life)."""
    target = GlueTarget.from_settings(settings)

    async def provide() -> GlueTarget | None:
        return target

    return provide


class ConfiguredGlueTarget:
    """FLOE_GLUE_* when set, else the `glue:` section of the applied floe.yaml, read again at most every
    `cache_seconds` (so a `floe apply` that adds it turns publishing on in every catalog process)."""

    def __init__(self, settings: Settings, store: SqlCatalogStore, cache_seconds: float = 10.0) -> None:
        self.fixed = GlueTarget.from_settings(settings)
        self.store = store
        self.cache_seconds = cache_seconds
        self._cached: tuple[float, GlueTarget | None] | None = None

    def invalidate(self) -> None:
        self._cached = None

    async def __call__(self) -> GlueTarget | None:
        if self.fixed is not None:
            return self.fixed
        now = time.monotonic()
        if self._cached is not None and now - self._cached[0] < self.cache_seconds:
            return self._cached[1]
        revision = await self.store.latest_pipeline_revision()
        glue = revision.config.get("glue") if revision is not None else None
        target = (
            GlueTarget(glue.get("region"), glue.get("catalog_id"), glue.get("endpoint"))
            if isinstance(glue, dict)
            else None
        )
        self._cached = (now, target)
        return target


def publishes_to_glue(warehouse_location: str) -> bool:
    """Only tables in S3 can be read through Glue by AWS engines."""
    return warehouse_location.startswith(S3_SCHEMES)


def glue_database_name(namespace: Namespace) -> str:
    return "_".join(namespace.levels).lower()


def glue_table_name(name: str) -> str:
    return name.lower()


def glue_type(iceberg_type: IcebergType) -> str:
    """The Hive type string Glue shows for an Iceberg type (as pyiceberg and Iceberg Java write it)."""
    if isinstance(iceberg_type, StructType):
        return "struct<" + ",".join(f"{f.name}:{glue_type(f.field_type)}" for f in iceberg_type.fields) + ">"
    if isinstance(iceberg_type, ListType):
        return f"array<{glue_type(iceberg_type.element_type)}>"
    if isinstance(iceberg_type, MapType):
        return f"map<{glue_type(iceberg_type.key_type)},{glue_type(iceberg_type.value_type)}>"
    if isinstance(iceberg_type, DecimalType):
        return f"decimal({iceberg_type.precision},{iceberg_type.scale})"
    return _GLUE_PRIMITIVES.get(type(iceberg_type), str(iceberg_type))


def glue_columns(metadata: TableMetadata) -> list[dict[str, Any]]:
    """The current schema's columns, then columns only older schemas have (`iceberg.field.current`
    false), each name once."""
    columns: dict[str, dict[str, Any]] = {}
    current = metadata.schema_by_id(metadata.current_schema_id)
    schemas = ([current] if current is not None else []) + [
        s for s in metadata.schemas if s.schema_id != metadata.current_schema_id
    ]
    for schema in schemas:
        is_current = schema.schema_id == metadata.current_schema_id
        for field in schema.columns:
            if field.name in columns:
                continue
            column: dict[str, Any] = {
                "Name": field.name,
                "Type": glue_type(field.field_type),
                "Parameters": {
                    ICEBERG_FIELD_ID: str(field.field_id),
                    ICEBERG_FIELD_OPTIONAL: str(field.optional).lower(),
                    ICEBERG_FIELD_CURRENT: str(is_current).lower(),
                },
            }
            if field.doc:
                column["Comment"] = field.doc[:_MAX_COMMENT]
            columns[field.name] = column
    return list(columns.values())


def previous_metadata_location(metadata: TableMetadata) -> str | None:
    """The metadata file this version replaced: the last entry of the metadata log."""
    return metadata.metadata_log[-1].metadata_file if metadata.metadata_log else None


def glue_table_input(
    name: str,
    metadata_location: str,
    metadata: TableMetadata,
    warehouse_id: str,
    existing_parameters: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The `TableInput` of CreateTable/UpdateTable for one table version.

    Parameters: the Glue table's existing ones (kept, as the GlueCatalogs do), the Iceberg table
    properties, then the pointer parameters and floe's mark, which nothing may override."""
    parameters = dict(existing_parameters or {})
    for key, value in metadata.properties.items():
        if len(key) <= _MAX_PARAMETER_KEY and len(str(value).encode()) <= _MAX_PARAMETER_VALUE:
            parameters[key] = str(value)
    parameters.pop(PREVIOUS_METADATA_LOCATION, None)
    parameters[TABLE_TYPE] = "ICEBERG"
    parameters[METADATA_LOCATION] = metadata_location
    previous = previous_metadata_location(metadata)
    if previous:
        parameters[PREVIOUS_METADATA_LOCATION] = previous
    parameters[FLOE_WAREHOUSE] = warehouse_id
    table_input: dict[str, Any] = {
        "Name": name,
        "TableType": "EXTERNAL_TABLE",
        "Parameters": parameters,
        "StorageDescriptor": {"Columns": glue_columns(metadata), "Location": metadata.location},
    }
    # Spark's `COMMENT` and Iceberg Java's GlueCatalog use the `comment` property.
    description = metadata.properties.get("comment")
    if description:
        table_input["Description"] = description[:_MAX_DESCRIPTION]
    return table_input


@dataclass(frozen=True, slots=True)
class GlueTableKey:
    """One floe table name to keep in Glue (whatever table holds the name at publish time)."""

    warehouse_id: str
    namespace_key: str
    name: str

    @property
    def namespace(self) -> Namespace:
        return Namespace.from_key(self.namespace_key)

    def __str__(self) -> str:
        return f"{self.namespace}.{self.name}"


class GlueConflict(Exception):
    """The Glue table at the name belongs to something else: floe leaves it alone."""


def _error_code(exc: BaseException) -> str:
    return str(exc.response.get("Error", {}).get("Code", "")) if isinstance(exc, ClientError) else ""


def _describe(exc: BaseException) -> str:
    """An error for the log: botocore's messages name the operation and the code, never credentials."""
    return f"{type(exc).__name__}: {exc}"


class GluePublisher:
    """Keeps Glue in step with floe's catalog for tables of S3 warehouses; one per catalog process."""

    def __init__(
        self,
        store: SqlCatalogStore,
        target_provider: GlueTargetProvider,
        *,
        retry_max_seconds: float = 30.0,
        retry_min_seconds: float = 0.5,
        concurrency: int = 4,
        drain_seconds: float = 5.0,
    ) -> None:
        self.store = store
        # Read on every publish: a caller may swap it (e.g. for a target from floe.yaml).
        self.target_provider = target_provider
        self.retry_max_seconds = retry_max_seconds
        self.retry_min_seconds = retry_min_seconds
        self.concurrency = concurrency
        self.drain_seconds = drain_seconds
        self._pending: dict[GlueTableKey, float] = {}  # key -> monotonic time it is due
        self._failures: dict[GlueTableKey, int] = {}
        self._running: set[GlueTableKey] = set()
        self._notified_while_running: set[GlueTableKey] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._wake = asyncio.Event()
        self._published = asyncio.Event()  # a publish attempt ended
        self._loop_task: asyncio.Task[None] | None = None
        self._sweep_task: asyncio.Task[None] | None = None
        # Glue calls get their own thread budget: they must never hold up commits' storage I/O.
        self._limiter = anyio.CapacityLimiter(concurrency)
        self._clients: dict[GlueTarget, Any] = {}

    # -- the commit side: cheap and synchronous ----------------------------------------------------

    def notify(self, warehouse: WarehouseRecord, namespace: Namespace, name: str) -> None:
        """The table `namespace.name` of `warehouse` changed (created, committed, dropped, renamed)."""
        if not publishes_to_glue(warehouse.location):
            return
        key = GlueTableKey(warehouse.id, namespace.key, name)
        if key in self._running:
            # Published again when the running publish ends: it may have read the store already.
            self._notified_while_running.add(key)
        elif key not in self._pending:
            self._pending[key] = time.monotonic()
        # A key in backoff keeps its due time: a commit must not make an unreachable Glue hammered.
        self._update_gauge()
        self._wake.set()

    @property
    def queue_length(self) -> int:
        return len(self._pending) + len(self._running)

    def _update_gauge(self) -> None:
        GLUE_QUEUE.set(self.queue_length)

    # -- lifecycle -----------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start publishing; tables of S3 warehouses are checked once (commits a stopped process had
        not published yet) when a target is configured."""
        if self._loop_task is not None:
            return
        self._loop_task = asyncio.create_task(self._run(), name="glue-publisher")
        try:
            target = await self.target_provider()
        except Exception as exc:
            log.warning("glue: no target yet: %s", _describe(exc))
            return
        if target is not None:
            log.info("glue: publishing tables of S3 warehouses to %s", describe_target(target))
            self._sweep_task = asyncio.create_task(self.sweep(), name="glue-sweep")

    async def stop(self) -> None:
        """Give queued publishes a moment to finish (a graceful shutdown loses nothing due now), then
        cancel the rest."""
        if self._loop_task is None:
            return
        if self._sweep_task is not None:
            self._sweep_task.cancel()
        deadline = time.monotonic() + self.drain_seconds
        while (left := deadline - time.monotonic()) > 0 and (
            self._running or any(due <= time.monotonic() for due in self._pending.values())
        ):
            self._published.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._published.wait(), min(left, 0.5))
        if self.queue_length:
            log.warning("glue: %d table(s) left unpublished at shutdown", self.queue_length)
        tasks = [self._loop_task, *self._tasks]
        if self._sweep_task is not None:
            tasks.append(self._sweep_task)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._loop_task = self._sweep_task = None
        self._tasks.clear()
        self._running.clear()
        self._update_gauge()

    async def sweep(self) -> None:
        """Queue every table of every S3 warehouse (publishing skips those already current)."""
        queued = 0
        try:
            for warehouse in await self.store.list_warehouses():
                if not publishes_to_glue(warehouse.location):
                    continue
                parents = [""]
                while parents:
                    parent = parents.pop()
                    keys, _ = await self.store.list_namespaces(warehouse.id, parent, None, None)
                    for key in keys:
                        parents.append(key)
                        ns = await self.store.get_namespace(warehouse.id, key)
                        if ns is None:
                            continue
                        names, _ = await self.store.list_tabulars(ns.id, "table", None, None)
                        for name in names:
                            self.notify(warehouse, Namespace.from_key(key), name)
                            queued += 1
        except Exception as exc:  # a sweep is best effort: commits still publish
            log.warning("glue: startup check of published tables failed: %s", _describe(exc))
            return
        log.info("glue: checking %d table(s) of S3 warehouses", queued)

    # -- the background side -------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            now = time.monotonic()
            free = self.concurrency - len(self._running)
            due = [key for key, at in self._pending.items() if at <= now][: max(free, 0)]
            for key in due:
                del self._pending[key]
                self._running.add(key)
                task = asyncio.create_task(self._publish(key), name=f"glue-publish {key}")
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            if due:
                continue
            timeout = None
            if self._pending and free > 0:
                timeout = max(0.0, min(self._pending.values()) - now)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)

    async def _publish(self, key: GlueTableKey) -> None:
        retry_at: float | None = None
        try:
            target = await self.target_provider()
            if target is not None and await self._reconcile(target, key):
                GLUE_PUBLISHED.inc()
            self._failures.pop(key, None)
        except asyncio.CancelledError:
            raise
        except (GlueConflict, ClientError) as exc:
            GLUE_FAILURES.inc()
            if isinstance(exc, GlueConflict) or _error_code(exc) in _PERMANENT_ERRORS:
                log.error("glue: not publishing %s: %s", key, _describe(exc))
                self._failures.pop(key, None)
            else:
                retry_at = self._schedule_retry(key, exc)
        except Exception as exc:  # Glue unreachable, no credentials, no region...: retried
            GLUE_FAILURES.inc()
            retry_at = self._schedule_retry(key, exc)
        finally:
            self._running.discard(key)
            if retry_at is not None:
                self._pending[key] = retry_at
            elif key in self._notified_while_running:
                self._pending[key] = time.monotonic()
            self._notified_while_running.discard(key)
            self._update_gauge()
            self._wake.set()
            self._published.set()

    def _schedule_retry(self, key: GlueTableKey, exc: BaseException) -> float:
        failures = self._failures.get(key, 0) + 1
        self._failures[key] = failures
        delay: float = min(self.retry_max_seconds, self.retry_min_seconds * 2.0 ** (failures - 1))
        delay *= random.uniform(0.8, 1.0)  # spread retries of many tables hit by the same outage
        log.warning(
            "glue: publishing %s failed (attempt %d), retrying in %.1fs: %s",
            key,
            failures,
            delay,
            _describe(exc),
        )
        return time.monotonic() + delay

    async def _call(self, func: Callable[..., Any], **kwargs: Any) -> Any:
        """One blocking boto3 call in a worker thread of the publisher's own budget."""
        return await anyio.to_thread.run_sync(functools.partial(func, **kwargs), limiter=self._limiter)

    async def _client(self, target: GlueTarget) -> Any:
        client = self._clients.get(target)
        if client is None:
            # Credentials: the standard AWS chain (environment, profile, web identity, instance role).
            session = boto3.session.Session(region_name=target.region)
            config = Config(
                retries={"max_attempts": 3, "mode": "standard"}, connect_timeout=5, read_timeout=30
            )
            create = functools.partial(session.client, "glue", endpoint_url=target.endpoint, config=config)
            client = await anyio.to_thread.run_sync(create, limiter=self._limiter)
            self._clients[target] = client
        return client

    async def _reconcile(self, target: GlueTarget, key: GlueTableKey) -> bool:
        """Make Glue's table at `key` match the store; True when Glue changed."""
        glue = await self._client(target)
        catalog = {"CatalogId": target.catalog_id} if target.catalog_id else {}
        database, table = glue_database_name(key.namespace), glue_table_name(key.name)
        for _ in range(_RACE_ATTEMPTS):
            # Glue first, the store second: a publisher holding a stale store read then also holds a
            # stale Glue VersionId, so its update fails instead of overwriting a newer one.
            existing: dict[str, Any] | None
            try:
                existing = (await self._call(glue.get_table, DatabaseName=database, Name=table, **catalog))[
                    "Table"
                ]
            except ClientError as exc:
                if _error_code(exc) != "EntityNotFoundException":
                    raise
                existing = None
            record = await self.store.get_tabular(key.warehouse_id, key.namespace_key, key.name)
            parameters: dict[str, str] = dict((existing or {}).get("Parameters") or {})
            ours = parameters.get(FLOE_WAREHOUSE) == key.warehouse_id
            if record is None or record.kind != "table" or not record.metadata_location:
                if existing is None or not ours:
                    return False
                try:
                    await self._call(glue.delete_table, DatabaseName=database, Name=table, **catalog)
                except ClientError as exc:
                    if _error_code(exc) != "EntityNotFoundException":
                        raise
                log.info("glue: deleted %s.%s", database, table)
                return True
            if (
                existing is not None
                and ours
                and parameters.get(METADATA_LOCATION) == record.metadata_location
            ):
                return False
            metadata = await anyio.to_thread.run_sync(
                core.parse_table_metadata, record.metadata_json, limiter=self._limiter
            )
            if existing is not None and not ours:
                self._check_takeover(database, table, parameters, record.metadata_location, metadata)
            table_input = glue_table_input(
                table, record.metadata_location, metadata, key.warehouse_id, parameters
            )
            try:
                if existing is None:
                    await self._create(glue, database, table_input, catalog)
                else:
                    version = {"VersionId": existing["VersionId"]} if existing.get("VersionId") else {}
                    await self._call(
                        glue.update_table,
                        DatabaseName=database,
                        TableInput=table_input,
                        SkipArchive=True,  # streaming commits would exhaust Glue's version archive
                        **version,
                        **catalog,
                    )
            except ClientError as exc:
                # Another publisher got there first (or dropped it): read both sides again.
                if _error_code(exc) in (
                    "ConcurrentModificationException",
                    "AlreadyExistsException",
                    "EntityNotFoundException",
                ):
                    continue
                raise
            log.info("glue: %s.%s -> %s", database, table, record.metadata_location)
            return True
        raise RuntimeError(f"Glue table {database}.{table} kept changing during {_RACE_ATTEMPTS} attempts")

    async def _create(
        self, glue: Any, database: str, table_input: dict[str, Any], catalog: dict[str, str]
    ) -> None:
        try:
            await self._call(glue.create_table, DatabaseName=database, TableInput=table_input, **catalog)
            return
        except ClientError as exc:
            if _error_code(exc) != "EntityNotFoundException":
                raise
        # The database is missing: create it (a concurrent publisher may as well), then the table.
        try:
            await self._call(
                glue.create_database,
                DatabaseInput={"Name": database, "Description": "Iceberg tables published by floe"},
                **catalog,
            )
            log.info("glue: created database %s", database)
        except ClientError as exc:
            if _error_code(exc) != "AlreadyExistsException":
                raise
        await self._call(glue.create_table, DatabaseName=database, TableInput=table_input, **catalog)

    @staticmethod
    def _check_takeover(
        database: str, table: str, parameters: dict[str, str], current: str, metadata: TableMetadata
    ) -> None:
        """Take over an unmarked Glue table only when it is this table: an Iceberg table pointing at
        one of its metadata files (e.g. a Glue table registered into floe)."""
        history = {current, *(entry.metadata_file for entry in metadata.metadata_log)}
        if parameters.get(FLOE_WAREHOUSE):
            raise GlueConflict(
                f"Glue table {database}.{table} is published by another floe warehouse "
                f"({parameters[FLOE_WAREHOUSE]})"
            )
        if (
            parameters.get(TABLE_TYPE, "").upper() != "ICEBERG"
            or parameters.get(METADATA_LOCATION) not in history
        ):
            raise GlueConflict(f"Glue table {database}.{table} exists and is not this floe table")


def describe_target(target: GlueTarget) -> str:
    """The target for logs (no credentials are part of it)."""
    return f"region={target.region or '(AWS chain)'} catalog={target.catalog_id or '(own account)'} " + (
        f"endpoint={target.endpoint}" if target.endpoint else "endpoint=(AWS)"
    )
