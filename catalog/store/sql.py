"""SQL adapter of the catalog store: PostgreSQL (asyncpg) in production, SQLite (aiosqlite) embedded.

`SqlCatalogStore` owns the engines; its methods come from one mixin per aggregate (`store/tabulars.py`,
`store/security.py`, `store/pipelines.py`, `store/maintenance.py`, `store/kafka_offsets.py`,
`store/idempotency.py`, `store/outbox.py`), and together they implement the `CatalogStore` protocols of
`store/interfaces.py`. Every method is one short transaction. On PostgreSQL, single statements of the hot
path (reads, a one-table pointer swap, COPY appends) bypass SQLAlchemy: `store/postgres_fast_path.py`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import Select, Table, Update, event, insert, text
from sqlalchemy.engine import Connection, ExceptionContext
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

from catalog.store.audit_context import record_change, settling
from catalog.store.commit_reads import CommitReadsStoreMixin
from catalog.store.database_faults import connection_lost
from catalog.store.idempotency import IdempotencyStoreMixin
from catalog.store.ingest_history import IngestHistoryStoreMixin
from catalog.store.interfaces import CatalogStore
from catalog.store.kafka_offsets import KafkaOffsetStoreMixin
from catalog.store.leases import LeaseStoreMixin
from catalog.store.maintenance import MaintenanceStoreMixin
from catalog.store.outbox import OutboxStoreMixin
from catalog.store.pipelines import PipelineStoreMixin
from catalog.store.postgres_fast_path import DEFAULT_STATEMENT_TIMEOUT_SECONDS, SingleStatementRunner
from catalog.store.security import SecurityStoreMixin
from catalog.store.tabulars import TabularStoreMixin
from catalog.store.watermarks import WatermarkStoreMixin

DEFAULT_CONNECT_TIMEOUT_SECONDS = 10.0


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


def _postgres_connect_options(statement_timeout: float, connect_timeout: float) -> dict[str, Any]:
    """asyncpg's options bounding every connection's wait: the connect, each statement on the client
    (an unresponsive server never answers a cancel) and on the server (`statement_timeout`, which also
    covers lock waits and ends a statement whose client is gone)."""
    return {
        "timeout": connect_timeout,
        "command_timeout": statement_timeout,
        "server_settings": {"statement_timeout": str(int(statement_timeout * 1000))},
    }


def _postgres_engine(url: str, pool_size: int, connect_options: dict[str, Any]) -> AsyncEngine:
    """The SQLAlchemy engine on PostgreSQL: dead pooled connections replaced, faults invalidating."""
    # A fixed pool: an overflow connection is closed as soon as it is returned, so under a
    # steady load above pool_size every few requests paid for a new PostgreSQL backend (a fork,
    # authentication, an SSL probe and re-preparing statements). Waiting for a pooled
    # connection is far cheaper: each statement holds it for well under a millisecond.
    engine = create_async_engine(
        url,
        pool_size=pool_size,
        max_overflow=0,
        pool_pre_ping=False,
        pool_timeout=connect_options["command_timeout"],
        connect_args=connect_options,
    )

    @event.listens_for(engine.sync_engine, "checkout")
    def _closed_by_server(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
        # A restart or a terminated backend closes the socket; asyncpg notices while the connection is
        # idle. Checking that costs no round trip, unlike a pre-ping: the pool opens a new one instead.
        if dbapi_connection.driver_connection.is_closed():
            raise DisconnectionError("the server closed the pooled connection")

    @event.listens_for(engine.sync_engine, "handle_error")
    def _fault_invalidates(context: ExceptionContext) -> None:
        # A lost connection, or a statement timed out here (its connection waits on a cancel an
        # unresponsive server never acknowledges): discard it (and the pool's other connections) rather
        # than roll back on it. A statement the server cancelled (statement_timeout) leaves it usable.
        fault = context.original_exception
        if not context.is_disconnect and (isinstance(fault, TimeoutError) or connection_lost(fault)):
            context.is_disconnect = True

    return engine


class SqlCatalogStore(
    TabularStoreMixin,
    CommitReadsStoreMixin,
    KafkaOffsetStoreMixin,
    SecurityStoreMixin,
    PipelineStoreMixin,
    MaintenanceStoreMixin,
    LeaseStoreMixin,
    IdempotencyStoreMixin,
    IngestHistoryStoreMixin,
    WatermarkStoreMixin,
    OutboxStoreMixin,
):
    """The catalog store on any SQLAlchemy async database (PostgreSQL or SQLite)."""

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 10,
        statement_timeout: float = DEFAULT_STATEMENT_TIMEOUT_SECONDS,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_SECONDS,
    ) -> None:
        self.url = url
        self.is_sqlite = _is_sqlite(url)
        self._single_statements: SingleStatementRunner | None = None
        if self.is_sqlite:
            self._read = _sqlite_engine(url, immediate=False)
            self._write = _sqlite_engine(url, immediate=True)
        else:
            connect_options = _postgres_connect_options(statement_timeout, connect_timeout)
            engine = _postgres_engine(url, pool_size, connect_options)
            # Every read is one statement: in autocommit it is one round trip, where a transaction
            # would add a BEGIN and a ROLLBACK (two more round trips on each loadTable).
            self._read = engine.execution_options(isolation_level="AUTOCOMMIT")
            self._write = engine
            self._single_statements = SingleStatementRunner(engine, pool_size, connect_options)

    async def close(self) -> None:
        if self._single_statements is not None:
            await self._single_statements.close()
        await self._read.dispose()
        if self._write is not self._read:
            await self._write.dispose()

    async def _fetch(self, statement: Select[Any], params: dict[str, Any]) -> Sequence[Any]:
        """Rows of a prebuilt read statement, indexable by position (the hot path's reads)."""
        if self._single_statements is not None:
            return await self._single_statements.fetch(statement, params)
        async with self._reading() as conn:
            rows: Sequence[Any] = (await conn.execute(statement, params)).all()
        return rows

    async def _execute(self, statement: Update, params: dict[str, Any]) -> int:
        """Run one prebuilt data-changing statement in a transaction of its own; the rows it changed."""
        if self._single_statements is not None:
            return await self._single_statements.execute(statement, params)
        async with self._writing() as conn:
            result = await conn.execute(statement, params)
        return int(getattr(result, "rowcount", 0))

    async def _append_rows(self, table: Table, rows: Sequence[Mapping[str, Any]]) -> None:
        """Insert `rows` (each with the same columns) in one statement: a log's appends."""
        if self._single_statements is not None:
            await self._single_statements.copy_rows(table, rows)
            return
        async with self._writing() as conn:
            await conn.execute(insert(table), list(rows))

    @asynccontextmanager
    async def _reading(self) -> AsyncIterator[AsyncConnection]:
        async with self._read.connect() as conn:
            yield conn

    @asynccontextmanager
    async def _writing(self, *, change: bool = False) -> AsyncIterator[AsyncConnection]:
        """A write transaction. One that applies a request's change commits its audit entry too: with
        `change` (it changes or raises) at its end, else where it calls `record_change`."""
        with settling():
            async with self._write.begin() as conn:
                yield conn
                if change:
                    await record_change(conn)

    async def ping(self) -> None:
        async with self._reading() as conn:
            await conn.execute(text("SELECT 1"))


def create_store(
    url: str,
    *,
    pool_size: int = 10,
    statement_timeout: float = DEFAULT_STATEMENT_TIMEOUT_SECONDS,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_SECONDS,
) -> CatalogStore:
    """The store for a SQLAlchemy URL (PostgreSQL or SQLite); on PostgreSQL, statements and connects
    are bounded by the timeouts (seconds)."""
    return SqlCatalogStore(
        url, pool_size=pool_size, statement_timeout=statement_timeout, connect_timeout=connect_timeout
    )
