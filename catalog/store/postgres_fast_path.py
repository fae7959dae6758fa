"""The store's PostgreSQL fast path: single statements run on plain asyncpg connections.

Why it exists (speed, measured when it was written, cc08b0e and 30fd064): SQLAlchemy's async execution
layer cost ~0.3 ms of CPU per statement (greenlet switches, pool and execution events, result wrapping),
six times a one-row read on asyncpg itself; and `asyncpg.Pool`'s acquire and release cost ~40 us more
(90 against 49 us per one-row read). loadTable and listTables are one such read each, so they run here.

What runs here, and nothing else (`SqlCatalogStore._fetch`, `_execute`, `_append_rows`):
- the hot path's reads (loadTable's version check and table row, listings, namespace lookups);
- a commit's pointer swap of one table: one compare-and-swap `UPDATE` in autocommit, atomic by itself;
- appends of many rows in one binary COPY (the audit log's grouped entries).
Everything else (multi-statement transactions, migrations) goes through SQLAlchemy's engine. SQLite
has no fast path. The quick tier drives this class on a real PostgreSQL: tests/api/test_postgres_fast_path.py.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy import Select, Table, Update
from sqlalchemy.ext.asyncio import AsyncEngine

from catalog.store.database_faults import (
    DatabaseUnavailable,
    connection_lost,
    database_fault,
    refused_before_sending,
)

_R = TypeVar("_R")

DEFAULT_STATEMENT_TIMEOUT_SECONDS = 30.0


class SingleStatementRunner:
    """Runs single autocommit statements (reads, a one-UPDATE compare-and-swap, a COPY append) on plain
    asyncpg connections of its own, at most `size` of them. The statements stay SQLAlchemy Core
    objects, compiled once for asyncpg's dialect.

    The connections are kept in a plain list rather than an `asyncpg.Pool`: its acquire and release
    (timeouts, holders, the reset hook) cost ~40 us of CPU per statement, about as much as the statement
    itself (measured: 90 against 49 us per one-row read). Every statement here is one round trip that
    leaves no session state, so a connection needs no reset; one that fails or is interrupted mid-way is
    closed rather than reused, and at most `size` are open.

    Faults: one the server closed while idle (a restart, a terminated backend) is noticed by asyncpg and
    replaced before use, at no round trip; a read that finds its pooled connection gone anyway runs
    once more on a new one, as does a write that asyncpg refused before sending (a write that was sent
    is not repeated: it may have landed). A connection that cannot be opened raises `DatabaseUnavailable`
    (nothing ran). A statement is bounded on the server by `statement_timeout` and here by a watchdog that
    terminates its connection once it has run `command_timeout` (it then raises `TimeoutError`): asyncpg's
    own `command_timeout` arms a timer per statement, ~10 us of CPU, a fifth of a one-row read. The wait
    for a free connection is bounded alike.
    """

    def __init__(self, engine: AsyncEngine, size: int, connect_options: Mapping[str, Any]) -> None:
        _, options = engine.dialect.create_connect_args(engine.url)
        accepted = inspect.signature(asyncpg.connect).parameters
        options = {k: v for k, v in {**options, **connect_options}.items() if k in accepted}
        self._timeout: float = options.pop("command_timeout", None) or DEFAULT_STATEMENT_TIMEOUT_SECONDS
        self._connect_options = options
        # Connections running a statement -> when it times out; those the watchdog terminated.
        self._deadlines: dict[asyncpg.Connection, float] = {}
        self._expired: set[asyncpg.Connection] = set()
        self._watchdog: asyncio.Task[None] | None = None
        self._dialect = engine.dialect
        self._idle: list[asyncpg.Connection] = []
        self._open_count = asyncio.Semaphore(size)
        # Connections in use when `close` ran are closed when they come back, not kept.
        self._generation = 0
        # id -> (statement, SQL, parameter names in order, whether it only reads); holding the statement
        # keeps its id unique.
        self._compiled: dict[int, tuple[Select[Any] | Update, str, tuple[str, ...], bool]] = {}

    def _compile(
        self, statement: Select[Any] | Update
    ) -> tuple[Select[Any] | Update, str, tuple[str, ...], bool]:
        compiled = self._compiled.get(id(statement))
        if compiled is None:
            sql = statement.compile(dialect=self._dialect)
            # A SELECT may run twice; a statement that writes (a data-modifying WITH too) may not.
            reads = str(sql).lstrip().upper().startswith("SELECT")
            compiled = (statement, str(sql), tuple(sql.positiontup or ()), reads)
            self._compiled[id(statement)] = compiled
        return compiled

    async def _watch(self) -> None:
        """Terminate the connections whose statement outlived the timeout (an unresponsive server would
        hold them for as long as it lasts, and never answer a cancel)."""
        while True:
            await asyncio.sleep(min(1.0, self._timeout / 4))
            now = time.monotonic()
            for connection, deadline in list(self._deadlines.items()):
                if deadline <= now:
                    self._expired.add(connection)
                    connection.terminate()

    async def _use(
        self, connection: asyncpg.Connection, use: Callable[[asyncpg.Connection], Awaitable[_R]]
    ) -> _R:
        """`use(connection)` under the watchdog; a connection that failed is terminated."""
        self._deadlines[connection] = time.monotonic() + self._timeout
        try:
            return await use(connection)
        except BaseException as exc:
            # Cancelled or failed mid-statement: its state is unknown, so it is not used again.
            connection.terminate()
            if connection in self._expired:
                raise TimeoutError(f"no answer from the database within {self._timeout} s") from exc
            raise
        finally:
            del self._deadlines[connection]
            self._expired.discard(connection)

    async def _connect(self) -> asyncpg.Connection:
        try:
            return await asyncpg.connect(**self._connect_options)
        except Exception as exc:
            if database_fault(exc) or isinstance(exc, OSError):
                raise DatabaseUnavailable() from exc
            raise

    async def _run(self, use: Callable[[asyncpg.Connection], Awaitable[_R]], *, rerun: bool = False) -> _R:
        """`use(connection)` on an idle connection (or a new one, `size` at most); with `rerun` (reads),
        once more on a new connection when the pooled one turns out to be gone."""
        if self._watchdog is None:
            self._watchdog = asyncio.get_running_loop().create_task(self._watch())
        if self._open_count.locked():
            # All connections busy: wait, but no longer than a statement may take (an unresponsive
            # database would otherwise queue requests without bound).
            try:
                await asyncio.wait_for(self._open_count.acquire(), self._timeout)
            except TimeoutError:
                raise DatabaseUnavailable() from None
        else:
            await self._open_count.acquire()
        try:
            generation = self._generation
            connection = None
            while self._idle and connection is None:
                connection = self._idle.pop()
                if connection.is_closed():
                    connection = None
            pooled = connection is not None
            if connection is None:
                connection = await self._connect()
            try:
                result = await self._use(connection, use)
            except Exception as exc:
                again = refused_before_sending(exc) or (rerun and connection_lost(exc))
                if not (pooled and again):
                    raise
                connection = await self._connect()
                result = await self._use(connection, use)
            if generation == self._generation:
                self._idle.append(connection)
            else:
                await connection.close()
            return result
        finally:
            self._open_count.release()

    async def fetch(self, statement: Select[Any], params: dict[str, Any]) -> list[Any]:
        """Rows of a prebuilt (module or class level) statement."""
        _, sql, names, reads = self._compile(statement)
        arguments = [params[name] for name in names]
        rows: list[Any] = await self._run(lambda connection: connection.fetch(sql, *arguments), rerun=reads)
        return rows

    async def execute(self, statement: Select[Any] | Update, params: dict[str, Any]) -> int:
        """Run a prebuilt data-changing statement on its own (autocommit); the rows it changed."""
        _, sql, names, _ = self._compile(statement)
        arguments = [params[name] for name in names]
        status: str = await self._run(lambda connection: connection.execute(sql, *arguments))
        return int(status.rsplit(" ", 1)[-1])  # "UPDATE 1"

    async def copy_rows(self, table: Table, rows: Sequence[Mapping[str, Any]]) -> None:
        """Append `rows` (each with the same columns) in one COPY, as one statement."""
        columns = list(rows[0])
        records = [tuple(row[c] for c in columns) for row in rows]
        await self._run(
            lambda connection: connection.copy_records_to_table(table.name, columns=columns, records=records)
        )

    async def close(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        self._generation += 1
        idle, self._idle = self._idle, []
        for connection in idle:
            await connection.close()
