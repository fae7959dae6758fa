"""The transactional outbox of commit events (`commit_events`): what a change of a table or view writes
in its own transaction, and what the publisher (catalog/service/commit_events.py) reads and deletes.

A row is inserted by the statement or transaction that changes the table, so it exists if and only if
the change committed; it is deleted only after the events broker acknowledged it. The table's names
are read in SQL from its row (a commit knows only the table's id), and the payload is a small JSON
object: the table's current snapshot and summary, schema, metadata location and Kafka offsets.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import time
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from sqlalchemy import BigInteger, String, Text, bindparam, cast, delete, func, insert, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from catalog.store.records import PendingCommit
from catalog.store.schema import commit_events, namespaces, tabulars, warehouses

CREATED = "created"
COMMITTED = "committed"
DROPPED = "dropped"
RENAMED = "renamed"

# Snapshot summary fields copied into an event (Iceberg's names).
_SUMMARY_FIELDS = (
    "added-records",
    "added-data-files",
    "added-files-size",
    "deleted-records",
    "deleted-data-files",
    "added-delete-files",
    "total-records",
    "total-data-files",
)

_COLUMNS = ("event_type", "tabular_id", "kind", "warehouse", "namespace", "name", "payload", "created_at_ms")
_NAMES_JOIN = tabulars.join(namespaces, tabulars.c.namespace_id == namespaces.c.id).join(
    warehouses, namespaces.c.warehouse_id == warehouses.c.id
)


@dataclass(frozen=True, slots=True)
class OutboxRow:
    """One stored event, as the publisher reads it."""

    id: int
    event_type: str
    tabular_id: str
    kind: str
    warehouse: str
    namespace: str
    name: str
    payload: dict[str, Any]
    created_at_ms: int


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def _snapshot(metadata: dict[str, Any]) -> dict[str, Any] | None:
    """The table's current snapshot: id, sequence number, operation, summary counts, and whether this
    commit added it (pyiceberg and Iceberg's Java library set `last-updated-ms` to the time of the
    snapshot a commit adds; a commit that only changes metadata sets it to the time of the commit)."""
    current = metadata.get("current-snapshot-id")
    if current is None or current == -1:
        return None
    for snapshot in reversed(metadata.get("snapshots") or []):
        if snapshot.get("snapshot-id") == current:
            summary = snapshot.get("summary") or {}
            counts = {field: int(summary[field]) for field in _SUMMARY_FIELDS if field in summary}
            return {
                "snapshot-id": current,
                "sequence-number": snapshot.get("sequence-number"),
                "timestamp-ms": snapshot.get("timestamp-ms"),
                "operation": summary.get("operation"),
                "added-by-this-commit": snapshot.get("timestamp-ms") == metadata.get("last-updated-ms"),
                "summary": counts,
            }
    return None


def payload(commit: PendingCommit, event_type: str) -> str:
    """The event's payload (JSON) from the commit's new metadata; parsed only when events are on."""
    data: dict[str, Any] = {"metadata-location": commit.metadata_location}
    try:
        metadata = json.loads(commit.metadata_json)
    except ValueError:
        metadata = {}
    if commit.kind == "view" or "current-version-id" in metadata:
        data["version-id"] = metadata.get("current-version-id")
    else:
        data["snapshot"] = _snapshot(metadata)
        data["schema-id"] = metadata.get("current-schema-id")
        data["format-version"] = metadata.get("format-version")
    if commit.kafka is not None and commit.kafka.end:
        data["kafka"] = {
            "topic": commit.kafka.topic,
            "next-offsets": {str(p): o for p, o in sorted(commit.kafka.end.items())},
        }
    return json.dumps(data, separators=(",", ":"))


def parameters(commit: PendingCommit, event_type: str, at_ms: int) -> dict[str, Any]:
    """`insert_statement`'s (and the PostgreSQL swap CTE's) parameters for the commit's event."""
    return {"e_type": event_type, "e_payload": payload(commit, event_type), "e_at": at_ms}


def _from_tabular(tabular_id: Any, *conditions: Any) -> Any:
    """SELECT of one outbox row's values: the table's names read from its row."""
    return (
        select(
            cast(bindparam("e_type"), String()),
            tabulars.c.id,
            tabulars.c.kind,
            warehouses.c.name,
            namespaces.c.key,
            tabulars.c.name,
            cast(bindparam("e_payload"), Text()),
            cast(bindparam("e_at"), BigInteger()),
        )
        .select_from(_NAMES_JOIN)
        .where(tabulars.c.id == tabular_id, *conditions)
    )


def event_cte(landed: Any) -> Any:
    """The PostgreSQL swap statement's CTE inserting the event of the table `p_id` when `landed`."""
    return (
        insert(commit_events)
        .from_select(list(_COLUMNS), _from_tabular(bindparam("p_id"), landed))
        .returning(commit_events.c.id)
        .cte("evented")
    )


INSERT_EVENT = insert(commit_events).from_select(list(_COLUMNS), _from_tabular(bindparam("e_tabular_id")))


async def write_event(
    conn: AsyncConnection, tabular_id: str, commit: PendingCommit, event_type: str, at_ms: int
) -> None:
    """Insert the event of the table `tabular_id` (in the change's transaction, after its write)."""
    await conn.execute(INSERT_EVENT, parameters(commit, event_type, at_ms) | {"e_tabular_id": tabular_id})


async def write_named_event(
    conn: AsyncConnection, tabular_id: str, event_type: str, data: dict[str, Any], at_ms: int
) -> None:
    """Insert an event whose data the caller gives (drops, renames), names read from the row."""
    params = {
        "e_type": event_type,
        "e_payload": json.dumps(data, separators=(",", ":")),
        "e_at": at_ms,
        "e_tabular_id": tabular_id,
    }
    await conn.execute(INSERT_EVENT, params)


# The key of PostgreSQL's session advisory lock held by the one publishing catalog process.
PUBLISHER_LOCK_KEY = 0x666C6F65_6576  # "floe" "ev"


class PublisherLock:
    """Which of the catalog processes in front of one database publishes: on PostgreSQL the one
    holding a session advisory lock on a connection of its own, on SQLite the one holding an exclusive
    `flock` of a file beside the database (`--workers N`); either is released when its process dies."""

    def __init__(self, engine: AsyncEngine | None, lock_file: Path | None = None) -> None:
        self._engine = engine
        self._conn: AsyncConnection | None = None
        self._lock_file = lock_file
        self._file: IO[bytes] | None = None

    async def acquire(self) -> bool:
        """Whether this process holds the lock now (tried again on every call until it does)."""
        if self._engine is None:
            return self._acquire_file()
        if self._conn is not None:
            try:
                await self._conn.execute(select(1))
                return True
            except Exception:  # the connection (and so the lock) was lost: try again
                await self.release()
        conn = await self._engine.connect()
        try:
            held = (await conn.execute(select(func.pg_try_advisory_lock(PUBLISHER_LOCK_KEY)))).scalar()
        except Exception:
            await conn.close()
            raise
        if not held:
            await conn.close()
            return False
        self._conn = conn
        return True

    def _acquire_file(self) -> bool:
        if self._lock_file is None or self._file is not None:
            return True  # an in-memory database: one process
        file = self._lock_file.open("ab")
        try:
            fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            file.close()
            return False
        self._file = file
        return True

    async def release(self) -> None:
        file, self._file = self._file, None
        if file is not None:
            file.close()  # closing the file releases its flock
        conn, self._conn = self._conn, None
        if conn is not None:
            # Closing a lost connection may fail: the lock went with it.
            with contextlib.suppress(Exception):
                await conn.close()


def _sqlite_lock_file(url: str) -> Path | None:
    """The publisher's lock file beside a SQLite database file (None for an in-memory one)."""
    database = make_url(url).database
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return Path(database).with_name(Path(database).name + ".events-lock")


class OutboxStoreMixin:
    """The publisher's reads and deletes of the outbox, on the engines of `SqlCatalogStore`."""

    is_sqlite: bool
    url: str
    _read: AsyncEngine
    # Whether changes write their events (set at startup when an events broker is configured).
    commit_events_enabled: bool = False

    def _reading(self) -> AbstractAsyncContextManager[AsyncConnection]:
        raise NotImplementedError

    def _writing(self, *, change: bool = False) -> AbstractAsyncContextManager[AsyncConnection]:
        raise NotImplementedError

    def publisher_lock(self) -> PublisherLock:
        if self.is_sqlite:
            return PublisherLock(None, _sqlite_lock_file(self.url))
        return PublisherLock(self._read)

    async def pending_events(self, limit: int) -> list[OutboxRow]:
        """The oldest `limit` events not yet acknowledged, in id order."""
        async with self._reading() as conn:
            rows = (await conn.execute(select(commit_events).order_by(commit_events.c.id).limit(limit))).all()
        return [
            OutboxRow(
                int(r.id),
                r.event_type,
                r.tabular_id,
                r.kind,
                r.warehouse,
                r.namespace,
                r.name,
                json.loads(r.payload),
                int(r.created_at_ms),
            )
            for r in rows
        ]

    async def delete_events(self, ids: Sequence[int]) -> None:
        """Forget events the broker acknowledged."""
        if not ids:
            return
        async with self._writing() as conn:
            if not self.is_sqlite:
                # Not waited for on disk: a delete lost to a crash only sends its events again (same
                # ids), and the commits' own flushes need not queue behind the publisher's.
                await conn.execute(text("SET LOCAL synchronous_commit = off"))
            await conn.execute(delete(commit_events).where(commit_events.c.id.in_(list(ids))))

    async def outbox_depth(self) -> tuple[int, int | None]:
        """(events waiting, the oldest one's creation time in epoch ms or None)."""
        async with self._reading() as conn:
            row = (await conn.execute(select(func.count(), func.min(commit_events.c.created_at_ms)))).one()
        return int(row[0]), None if row[1] is None else int(row[1])
