"""The Glue publisher: a background task per catalog process keeps Glue in step with floe's tables.

It listens for `TableChanged` events (a dict insert on the commit's path) and publishes each changed
table's *current* state read from the store at publish time; see `catalog.service.glue` for the rules.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import anyio
import anyio.to_thread
import boto3
from botocore.config import Config
from botocore.exceptions import ClientError
from prometheus_client import Counter, Gauge
from pyiceberg.table.metadata import TableMetadata

from catalog import commit as core
from catalog.events import EventBus, PipelineApplied, TableChanged
from catalog.identifiers import Namespace
from catalog.service.glue.mapping import (
    FLOE_WAREHOUSE,
    METADATA_LOCATION,
    TABLE_TYPE,
    glue_database_name,
    glue_table_input,
    glue_table_name,
    publishes_to_glue,
)
from catalog.service.glue.target import ConfiguredGlueTarget, GlueTarget, GlueTargetProvider, describe_target
from catalog.store import WarehouseRecord
from catalog.store.interfaces import NamespaceStore, TabularStore, WarehouseStore

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


# Error codes retrying cannot fix: the input itself is rejected.
_PERMANENT_ERRORS = frozenset({"InvalidInputException", "ValidationException"})
# A publish re-reads and tries again when a concurrent publisher changed the Glue table under it.
_RACE_ATTEMPTS = 5


class PublishedStore(WarehouseStore, NamespaceStore, TabularStore, Protocol):
    """What publishing reads: the warehouses, their namespaces and tables."""


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
        store: PublishedStore,
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

    def subscribe(self, events: EventBus) -> None:
        """Listen for changed tables, and for a floe.yaml whose `glue:` section changed."""
        events.subscribe(TableChanged, self._on_table_changed)
        events.subscribe(PipelineApplied, self._on_pipeline_applied)

    def _on_table_changed(self, event: TableChanged) -> None:
        self.notify(event.warehouse, event.namespace, event.name)

    async def _on_pipeline_applied(self, event: PipelineApplied) -> None:
        provider = self.target_provider
        if isinstance(provider, ConfiguredGlueTarget) and "glue" in event.changed_sections:
            # floe.yaml's `glue:` changed: publish every table to the new target now.
            provider.invalidate()
            await self.sweep()

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
