"""SQL adapter of the catalog store: PostgreSQL (asyncpg) in production, SQLite (aiosqlite) embedded.

Every method is one short transaction. A commit never holds a transaction while metadata files are
written: the service reads the base, writes the new file, then calls `swap` (compare-and-swap on the
row's `version`), so a lost race is detected here and retried by the service.
"""

from __future__ import annotations

import asyncio
import base64
import inspect
import json
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy import Select, and_, bindparam, delete, event, func, insert, or_, select, text, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

from catalog.errors import AlreadyExists, BadRequest, NamespaceNotEmpty, NoSuchNamespace
from catalog.store.maintenance import MaintenanceStoreMixin
from catalog.store.pipelines import PipelineStoreMixin
from catalog.store.records import NamespaceRecord, PendingCommit, TabularKind, TabularRecord, WarehouseRecord
from catalog.store.schema import (
    idempotency_keys,
    kafka_offsets,
    namespaces,
    table_metrics,
    tabulars,
    warehouses,
)
from catalog.store.security import SecurityStoreMixin

SEPARATOR = "\x1f"


class _LostRace(Exception):
    """Another writer moved a table between the caller's read and this swap."""


def encode_page_token(last: str) -> str:
    return base64.urlsafe_b64encode(last.encode()).decode()


def decode_page_token(token: str | None) -> str | None:
    if not token:
        return None
    try:
        # validate=True: a token with foreign characters is an error, not silently the first page.
        return base64.b64decode(token.encode(), altchars=b"-_", validate=True).decode()
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest(f"Invalid pageToken: {token!r}") from exc


def _page(rows: list[str], page_size: int | None) -> tuple[list[str], str | None]:
    if page_size is not None and len(rows) > page_size:
        rows = rows[:page_size]
        return rows, encode_page_token(rows[-1])
    return rows, None


async def _keep_session(_: asyncpg.Connection) -> None:
    """No reset between uses: the fast reads are single statements that leave no session state."""


class _PostgresReadPool:
    """PostgreSQL only: the read hot path (loadTable, listTables) on a plain asyncpg pool.

    SQLAlchemy's async execution layer cost ~0.3 ms of CPU per statement here (greenlet switches, pool
    and execution events, result wrapping): six times the query itself on asyncpg. These reads are
    single autocommit statements, so they run on the driver directly; the statements stay SQLAlchemy
    Core objects, compiled once for asyncpg's dialect.
    """

    def __init__(self, engine: AsyncEngine, size: int) -> None:
        _, options = engine.dialect.create_connect_args(engine.url)
        accepted = inspect.signature(asyncpg.connect).parameters
        self._connect_options = {k: v for k, v in options.items() if k in accepted}
        self._dialect = engine.dialect
        self._size = size
        self._pool: asyncpg.Pool | None = None
        self._opening = asyncio.Lock()
        # id -> (statement, SQL, parameter names in order); holding the statement keeps its id unique.
        self._compiled: dict[int, tuple[Select[Any], str, tuple[str, ...]]] = {}

    async def _open(self) -> asyncpg.Pool:
        async with self._opening:
            if self._pool is None:
                self._pool = await asyncpg.create_pool(
                    min_size=1, max_size=self._size, reset=_keep_session, **self._connect_options
                )
            return self._pool

    async def fetch(self, statement: Select[Any], params: dict[str, Any]) -> list[Any]:
        """Rows of a prebuilt (module or class level) statement."""
        compiled = self._compiled.get(id(statement))
        if compiled is None:
            sql = statement.compile(dialect=self._dialect)
            compiled = (statement, str(sql), tuple(sql.positiontup or ()))
            self._compiled[id(statement)] = compiled
        pool = self._pool or await self._open()
        rows: list[Any] = await pool.fetch(compiled[1], *(params[name] for name in compiled[2]))
        return rows

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
            self._pool = None


def _is_sqlite(url: str) -> bool:
    return url.startswith("sqlite")


def _sqlite_engine(url: str, *, immediate: bool) -> AsyncEngine:
    """SQLite engine; write transactions take the write lock up front (`BEGIN IMMEDIATE`) so concurrent
    writers wait on `busy_timeout` instead of failing on a read-to-write lock upgrade."""
    engine = create_async_engine(url, poolclass=NullPool if ":memory:" not in url else None)

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA busy_timeout=60000")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


class SqlCatalogStore(SecurityStoreMixin, PipelineStoreMixin, MaintenanceStoreMixin):
    """The catalog store on any SQLAlchemy async database (PostgreSQL or SQLite)."""

    def __init__(self, url: str, *, pool_size: int = 10) -> None:
        self.url = url
        self.is_sqlite = _is_sqlite(url)
        self._fast_reads: _PostgresReadPool | None = None
        if self.is_sqlite:
            self._read = _sqlite_engine(url, immediate=False)
            self._write = _sqlite_engine(url, immediate=True)
        else:
            # A fixed pool: an overflow connection is closed as soon as it is returned, so under a
            # steady load above pool_size every few requests paid for a new PostgreSQL backend (a fork,
            # authentication, an SSL probe and re-preparing statements). Waiting for a pooled
            # connection is far cheaper: each statement holds it for well under a millisecond.
            engine = create_async_engine(url, pool_size=pool_size, max_overflow=0, pool_pre_ping=False)
            # Every read is one statement: in autocommit it is one round trip, where a transaction
            # would add a BEGIN and a ROLLBACK (two more round trips on each loadTable).
            self._read = engine.execution_options(isolation_level="AUTOCOMMIT")
            self._write = engine
            self._fast_reads = _PostgresReadPool(engine, pool_size)

    async def close(self) -> None:
        if self._fast_reads is not None:
            await self._fast_reads.close()
        await self._read.dispose()
        if self._write is not self._read:
            await self._write.dispose()

    async def _fetch(self, statement: Select[Any], params: dict[str, Any]) -> Sequence[Any]:
        """Rows of a prebuilt read statement, indexable by position (the hot path's reads)."""
        if self._fast_reads is not None:
            return await self._fast_reads.fetch(statement, params)
        async with self._reading() as conn:
            rows: Sequence[Any] = (await conn.execute(statement, params)).all()
        return rows

    @asynccontextmanager
    async def _reading(self) -> AsyncIterator[AsyncConnection]:
        async with self._read.connect() as conn:
            yield conn

    @asynccontextmanager
    async def _writing(self) -> AsyncIterator[AsyncConnection]:
        async with self._write.begin() as conn:
            yield conn

    async def ping(self) -> None:
        async with self._reading() as conn:
            await conn.execute(text("SELECT 1"))

    # -- warehouses -------------------------------------------------------------------------------

    @staticmethod
    def _warehouse(row: Any) -> WarehouseRecord:
        return WarehouseRecord(row.id, row.name, row.location, json.loads(row.properties))

    async def get_warehouse(self, name: str) -> WarehouseRecord | None:
        async with self._reading() as conn:
            row = (await conn.execute(select(warehouses).where(warehouses.c.name == name))).first()
        return self._warehouse(row) if row else None

    async def list_warehouses(self) -> list[WarehouseRecord]:
        async with self._reading() as conn:
            rows = (await conn.execute(select(warehouses).order_by(warehouses.c.name))).all()
        return [self._warehouse(r) for r in rows]

    async def upsert_warehouse(self, name: str, location: str, properties: dict[str, str]) -> WarehouseRecord:
        """Create the warehouse, or update its storage settings (location changes only affect new tables)."""
        try:
            return await self._upsert_warehouse(name, location, properties)
        except IntegrityError:
            # Another process (a sibling worker starting at the same moment) inserted it first: update.
            return await self._upsert_warehouse(name, location, properties)

    async def _upsert_warehouse(
        self, name: str, location: str, properties: dict[str, str]
    ) -> WarehouseRecord:
        async with self._writing() as conn:
            row = (await conn.execute(select(warehouses).where(warehouses.c.name == name))).first()
            if row is None:
                wid = str(uuid.uuid4())
                await conn.execute(
                    insert(warehouses).values(
                        id=wid, name=name, location=location, properties=json.dumps(properties)
                    )
                )
            else:
                wid = row.id
                await conn.execute(
                    update(warehouses)
                    .where(warehouses.c.id == wid)
                    .values(location=location, properties=json.dumps(properties))
                )
        return WarehouseRecord(wid, name, location, properties)

    # -- namespaces -------------------------------------------------------------------------------

    @staticmethod
    def _namespace(row: Any) -> NamespaceRecord:
        return NamespaceRecord(row[0], row[1], row[2], json.loads(row[3]))

    _GET_NAMESPACE = select(
        namespaces.c.id, namespaces.c.warehouse_id, namespaces.c.key, namespaces.c.properties
    ).where(namespaces.c.warehouse_id == bindparam("p_warehouse_id"), namespaces.c.key == bindparam("p_key"))

    async def get_namespace(self, warehouse_id: str, key: str) -> NamespaceRecord | None:
        rows = await self._fetch(self._GET_NAMESPACE, {"p_warehouse_id": warehouse_id, "p_key": key})
        return self._namespace(rows[0]) if rows else None

    async def list_namespaces(
        self, warehouse_id: str, parent_key: str, page_token: str | None, page_size: int | None
    ) -> tuple[list[str], str | None]:
        after = decode_page_token(page_token)
        query = (
            select(namespaces.c.key)
            .where(namespaces.c.warehouse_id == warehouse_id, namespaces.c.parent_key == parent_key)
            .order_by(namespaces.c.key)
        )
        if after is not None:
            query = query.where(namespaces.c.key > after)
        if page_size is not None:
            query = query.limit(page_size + 1)
        async with self._reading() as conn:
            keys = list((await conn.execute(query)).scalars())
        return _page(keys, page_size)

    async def create_namespace(
        self, warehouse_id: str, key: str, properties: dict[str, str]
    ) -> NamespaceRecord:
        parent_key = key.rsplit(SEPARATOR, 1)[0] if SEPARATOR in key else ""
        nid = str(uuid.uuid4())
        try:
            async with self._writing() as conn:
                if parent_key:
                    parent = (
                        await conn.execute(
                            select(namespaces.c.id).where(
                                namespaces.c.warehouse_id == warehouse_id, namespaces.c.key == parent_key
                            )
                        )
                    ).first()
                    if parent is None:
                        shown = parent_key.replace(SEPARATOR, ".")
                        raise NoSuchNamespace(f"Namespace does not exist: {shown}")
                await conn.execute(
                    insert(namespaces).values(
                        id=nid,
                        warehouse_id=warehouse_id,
                        key=key,
                        parent_key=parent_key,
                        properties=json.dumps(properties),
                    )
                )
        except IntegrityError as exc:
            raise AlreadyExists(f"Namespace already exists: {key.replace(SEPARATOR, '.')}") from exc
        return NamespaceRecord(nid, warehouse_id, key, properties)

    async def drop_namespace(self, warehouse_id: str, key: str) -> bool:
        async with self._writing() as conn:
            row = (
                await conn.execute(
                    select(namespaces.c.id).where(
                        namespaces.c.warehouse_id == warehouse_id, namespaces.c.key == key
                    )
                )
            ).first()
            if row is None:
                return False
            child = (
                await conn.execute(
                    select(namespaces.c.id)
                    .where(namespaces.c.warehouse_id == warehouse_id, namespaces.c.parent_key == key)
                    .limit(1)
                )
            ).first()
            content = (
                await conn.execute(select(tabulars.c.id).where(tabulars.c.namespace_id == row.id).limit(1))
            ).first()
            if child is not None or content is not None:
                what = "namespaces" if child is not None else "tables or views"
                raise NamespaceNotEmpty(
                    f"Namespace {key.replace(SEPARATOR, '.')} is not empty: it contains {what}"
                )
            await conn.execute(delete(namespaces).where(namespaces.c.id == row.id))
        return True

    async def update_namespace_properties(
        self, warehouse_id: str, key: str, removals: Sequence[str], updates: dict[str, str]
    ) -> tuple[list[str], list[str], list[str]] | None:
        """Returns (updated, removed, missing), or None when the namespace does not exist."""
        async with self._writing() as conn:
            row = (
                await conn.execute(
                    select(namespaces.c.id, namespaces.c.properties).where(
                        namespaces.c.warehouse_id == warehouse_id, namespaces.c.key == key
                    )
                )
            ).first()
            if row is None:
                return None
            props: dict[str, str] = json.loads(row.properties)
            removed = [k for k in removals if k in props]
            missing = [k for k in removals if k not in props]
            for k in removed:
                del props[k]
            props.update(updates)
            await conn.execute(
                update(namespaces).where(namespaces.c.id == row.id).values(properties=json.dumps(props))
            )
        return list(updates), removed, missing

    # -- tables and views -------------------------------------------------------------------------

    _TABULAR_COLUMNS = (
        tabulars.c.id,
        tabulars.c.namespace_id,
        namespaces.c.key.label("namespace_key"),
        tabulars.c.name,
        tabulars.c.kind,
        tabulars.c.metadata_location,
        tabulars.c.metadata_json,
        tabulars.c.version,
    )

    @staticmethod
    def _tabular(row: Any) -> TabularRecord:
        """A record from a row of `_TABULAR_COLUMNS`, by position (SQLAlchemy rows and asyncpg records)."""
        return TabularRecord(row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7])

    # The statements of the read hot path (loadTable, listTables) are built once, with bound
    # parameters: building a select and computing its cache key on every call cost more CPU than
    # running it, and `_fetch` runs them on asyncpg directly on PostgreSQL.
    _BY_NAME = (
        namespaces.c.warehouse_id == bindparam("p_warehouse_id"),
        namespaces.c.key == bindparam("p_namespace_key"),
        tabulars.c.name == bindparam("p_name"),
    )
    _TABULARS_JOIN = tabulars.join(namespaces, tabulars.c.namespace_id == namespaces.c.id)
    _GET_TABULAR = select(*_TABULAR_COLUMNS).select_from(_TABULARS_JOIN).where(*_BY_NAME)
    _GET_TABULAR_LOCATION = (
        select(tabulars.c.kind, tabulars.c.metadata_location).select_from(_TABULARS_JOIN).where(*_BY_NAME)
    )
    _LIST_TABULAR_NAMES = (
        select(tabulars.c.name)
        .where(tabulars.c.namespace_id == bindparam("p_namespace_id"), tabulars.c.kind == bindparam("p_kind"))
        .order_by(tabulars.c.name)
    )
    _LIST_TABULAR_NAMES_AFTER = _LIST_TABULAR_NAMES.where(tabulars.c.name > bindparam("p_after"))
    # Page variants: LIMIT is a bound parameter too, so every page size shares one statement.
    _LIST_TABULAR_PAGE = _LIST_TABULAR_NAMES.limit(bindparam("p_limit"))
    _LIST_TABULAR_PAGE_AFTER = _LIST_TABULAR_NAMES_AFTER.limit(bindparam("p_limit"))

    async def get_tabular(self, warehouse_id: str, namespace_key: str, name: str) -> TabularRecord | None:
        """The table or view `name` in a namespace (the caller checks `kind`)."""
        params = {"p_warehouse_id": warehouse_id, "p_namespace_key": namespace_key, "p_name": name}
        rows = await self._fetch(self._GET_TABULAR, params)
        return self._tabular(rows[0]) if rows else None

    async def get_tabular_location(
        self, warehouse_id: str, namespace_key: str, name: str
    ) -> tuple[str, str | None] | None:
        """(kind, metadata location) only: answers `If-None-Match` without loading the metadata."""
        params = {"p_warehouse_id": warehouse_id, "p_namespace_key": namespace_key, "p_name": name}
        rows = await self._fetch(self._GET_TABULAR_LOCATION, params)
        return (rows[0][0], rows[0][1]) if rows else None

    async def list_tabulars(
        self, namespace_id: str, kind: TabularKind, page_token: str | None, page_size: int | None
    ) -> tuple[list[str], str | None]:
        after = decode_page_token(page_token)
        params: dict[str, Any] = {"p_namespace_id": namespace_id, "p_kind": kind, "p_after": after}
        if page_size is None:
            query = self._LIST_TABULAR_NAMES if after is None else self._LIST_TABULAR_NAMES_AFTER
        else:
            query = self._LIST_TABULAR_PAGE if after is None else self._LIST_TABULAR_PAGE_AFTER
            params["p_limit"] = page_size + 1
        names = [row[0] for row in await self._fetch(query, params)]
        return _page(names, page_size)

    async def swap(self, commits: Sequence[PendingCommit]) -> bool:
        """Apply all pointer swaps (and creates) in one transaction, or none of them.

        Returns False when another writer moved any of the tables first (the caller retries on the new
        base). Raises `AlreadyExists` when a create finds the name taken.
        """
        now = datetime.now(UTC)
        try:
            await self._swap_all(commits, now)
        except _LostRace:
            return False
        return True

    async def _swap_all(self, commits: Sequence[PendingCommit], now: datetime) -> None:
        async with self._writing() as conn:
            for commit in commits:
                if commit.tabular_id is None:
                    new_id = str(uuid.uuid4())
                    try:
                        async with conn.begin_nested():
                            await conn.execute(
                                insert(tabulars).values(
                                    id=new_id,
                                    namespace_id=commit.namespace_id,
                                    name=commit.name,
                                    kind=commit.kind,
                                    metadata_location=commit.metadata_location,
                                    metadata_json=commit.metadata_json,
                                    version=0,
                                    created_at=now,
                                    updated_at=now,
                                )
                            )
                    except IntegrityError as exc:
                        raise self._name_taken(commit.kind, commit.name) from exc
                    await self._save_kafka_offsets(conn, new_id, commit, now)
                    continue
                result = await conn.execute(
                    update(tabulars)
                    .where(
                        and_(
                            tabulars.c.id == commit.tabular_id, tabulars.c.version == commit.expected_version
                        )
                    )
                    .values(
                        metadata_location=commit.metadata_location,
                        metadata_json=commit.metadata_json,
                        version=commit.expected_version + 1,
                        updated_at=now,
                    )
                )
                if result.rowcount != 1:
                    raise _LostRace
                await self._save_kafka_offsets(conn, commit.tabular_id, commit, now)

    @staticmethod
    async def _save_kafka_offsets(
        conn: AsyncConnection, tabular_id: str, commit: PendingCommit, now: datetime
    ) -> None:
        # The table's row was just versioned in this transaction, so no other commit to this table can
        # interleave here: delete-then-insert is a safe, portable upsert.
        progress = commit.kafka
        if progress is None or not progress.end:
            return
        await conn.execute(
            delete(kafka_offsets).where(
                and_(
                    kafka_offsets.c.tabular_id == tabular_id,
                    kafka_offsets.c.topic == progress.topic,
                    kafka_offsets.c.partition.in_(list(progress.end)),
                )
            )
        )
        await conn.execute(
            insert(kafka_offsets),
            [
                {
                    "tabular_id": tabular_id,
                    "topic": progress.topic,
                    "partition": partition,
                    "next_offset": offset,
                    "updated_at": now,
                }
                for partition, offset in progress.end.items()
            ],
        )

    _KAFKA_OFFSETS = select(kafka_offsets.c.partition, kafka_offsets.c.next_offset).where(
        and_(
            kafka_offsets.c.tabular_id == bindparam("p_tabular"),
            kafka_offsets.c.topic == bindparam("p_topic"),
        )
    )

    async def get_kafka_offsets(self, tabular_id: str, topic: str) -> dict[int, int]:
        """The next offset per partition the table has committed for `topic`."""
        rows = await self._fetch(self._KAFKA_OFFSETS, {"p_tabular": tabular_id, "p_topic": topic})
        return {int(row[0]): int(row[1]) for row in rows}

    _KAFKA_TOPICS = select(
        kafka_offsets.c.topic,
        kafka_offsets.c.partition,
        kafka_offsets.c.next_offset,
        kafka_offsets.c.updated_at,
    ).where(kafka_offsets.c.tabular_id == bindparam("p_tabular"))

    async def list_kafka_offsets(self, tabular_id: str) -> list[tuple[str, int, int, datetime]]:
        """Every (topic, partition, next offset, updated at) the table has committed."""
        rows = await self._fetch(self._KAFKA_TOPICS, {"p_tabular": tabular_id})
        # SQLite hands back naive datetimes; every timestamp floe stores is UTC.
        return [
            (str(r[0]), int(r[1]), int(r[2]), r[3] if r[3].tzinfo else r[3].replace(tzinfo=UTC)) for r in rows
        ]

    @staticmethod
    def _name_taken(kind: str, name: str) -> AlreadyExists:
        label = "Table" if kind == "table" else "View"
        return AlreadyExists(f"{label} with same name already exists: {name}")

    async def name_exists(self, namespace_id: str, name: str) -> str | None:
        async with self._reading() as conn:
            row = (
                await conn.execute(
                    select(tabulars.c.kind).where(
                        tabulars.c.namespace_id == namespace_id, tabulars.c.name == name
                    )
                )
            ).first()
        return row.kind if row else None

    async def drop_tabular(self, tabular_id: str) -> tuple[str | None, str] | None:
        """Delete the row; returns its (metadata location, metadata JSON) as of the delete, so a commit
        that landed after the caller's read is not missed, or None when it was already gone."""
        async with self._writing() as conn:
            await conn.execute(delete(table_metrics).where(table_metrics.c.tabular_id == tabular_id))
            row = (
                await conn.execute(
                    delete(tabulars)
                    .where(tabulars.c.id == tabular_id)
                    .returning(tabulars.c.metadata_location, tabulars.c.metadata_json)
                )
            ).first()
        return (row.metadata_location, row.metadata_json) if row else None

    async def rename_tabular(self, tabular_id: str, namespace_id: str, name: str, kind: TabularKind) -> None:
        try:
            async with self._writing() as conn:
                await conn.execute(
                    update(tabulars)
                    .where(tabulars.c.id == tabular_id)
                    .values(namespace_id=namespace_id, name=name, updated_at=datetime.now(UTC))
                )
        except IntegrityError as exc:
            raise self._name_taken(kind, name) from exc

    async def add_metrics_report(self, tabular_id: str, report_type: str, report: dict[str, Any]) -> None:
        async with self._writing() as conn:
            await conn.execute(
                insert(table_metrics).values(
                    tabular_id=tabular_id, report_type=report_type, report=json.dumps(report)
                )
            )

    async def list_metrics_reports(self, tabular_id: str) -> list[dict[str, Any]]:
        async with self._reading() as conn:
            rows = (
                await conn.execute(
                    select(table_metrics.c.report)
                    .where(table_metrics.c.tabular_id == tabular_id)
                    .order_by(table_metrics.c.id)
                )
            ).scalars()
            return [json.loads(r) for r in rows]

    async def count_tabulars(self) -> int:
        async with self._reading() as conn:
            return int((await conn.execute(select(func.count()).select_from(tabulars))).scalar_one())

    # -- idempotency keys -------------------------------------------------------------------------

    async def claim_idempotency_key(
        self, key: str, fingerprint: str, owner: str, lease: timedelta
    ) -> tuple[str, Any] | None:
        """Claim `key` for a new request: None when claimed, else (state, row) of the earlier request.

        A pending key whose lease ran out (its owner crashed or hung) is taken over by one caller with
        the same fingerprint: the conditional update lets exactly one of several waiters win.
        """
        now = datetime.now(UTC)
        try:
            async with self._writing() as conn:
                await conn.execute(
                    insert(idempotency_keys).values(
                        key=key,
                        fingerprint=fingerprint,
                        state="pending",
                        owner=owner,
                        lease_until=now + lease,
                        created_at=now,
                    )
                )
            return None
        except IntegrityError:
            async with self._reading() as conn:
                row = (
                    await conn.execute(select(idempotency_keys).where(idempotency_keys.c.key == key))
                ).first()
        if row is None:  # released between our insert and read: try once more
            return ("pending", None)
        expired = row.lease_until is None or _aware(row.lease_until) < now
        if row.state != "pending" or row.fingerprint != fingerprint or not expired:
            return (row.state, row)
        async with self._writing() as conn:
            taken = await conn.execute(
                update(idempotency_keys)
                .where(
                    idempotency_keys.c.key == key,
                    idempotency_keys.c.state == "pending",
                    idempotency_keys.c.owner == row.owner,
                    or_(idempotency_keys.c.lease_until.is_(None), idempotency_keys.c.lease_until < now),
                )
                .values(owner=owner, lease_until=now + lease)
            )
        return None if taken.rowcount == 1 else ("pending", row)

    async def renew_idempotency_lease(self, key: str, owner: str, lease: timedelta) -> bool:
        """Extend the owner's lease on its pending key; False when the key is no longer the owner's."""
        async with self._writing() as conn:
            result = await conn.execute(
                update(idempotency_keys)
                .where(
                    idempotency_keys.c.key == key,
                    idempotency_keys.c.owner == owner,
                    idempotency_keys.c.state == "pending",
                )
                .values(lease_until=datetime.now(UTC) + lease)
            )
        return bool(result.rowcount == 1)

    async def finish_idempotency_key(
        self, key: str, owner: str, state: str, status_code: int, body: str | None, content_type: str
    ) -> None:
        """Store the final response (`done`), or only its status (`withheld`: the body held a secret)."""
        async with self._writing() as conn:
            await conn.execute(
                update(idempotency_keys)
                .where(idempotency_keys.c.key == key, idempotency_keys.c.owner == owner)
                .values(
                    state=state,
                    status_code=status_code,
                    response_body=body,
                    content_type=content_type,
                    lease_until=None,
                )
            )

    async def release_idempotency_key(self, key: str, owner: str) -> None:
        async with self._writing() as conn:
            await conn.execute(
                delete(idempotency_keys).where(
                    idempotency_keys.c.key == key,
                    idempotency_keys.c.owner == owner,
                    idempotency_keys.c.state == "pending",
                )
            )

    async def expire_idempotency_keys(self, older_than: timedelta) -> int:
        async with self._writing() as conn:
            result = await conn.execute(
                delete(idempotency_keys).where(idempotency_keys.c.created_at < datetime.now(UTC) - older_than)
            )
        return int(result.rowcount or 0)


def _aware(moment: datetime) -> datetime:
    """SQLite hands timestamps back without a zone; floe stores them in UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def create_store(url: str, *, pool_size: int = 10) -> SqlCatalogStore:
    return SqlCatalogStore(url, pool_size=pool_size)
