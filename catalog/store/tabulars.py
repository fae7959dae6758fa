"""The warehouses, namespaces, tables and views half of the SQL store (`SqlCatalogStore` inherits these
methods, like the security ones).

A commit never holds a transaction while metadata files are written: the service reads the base, writes
the new file, then calls `swap` (compare-and-swap on the row's `version`), so a lost race is detected
here and retried by the service.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Select, Update, bindparam, delete, func, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from catalog.errors import AlreadyExists, BadRequest, NamespaceNotEmpty, NoSuchNamespace
from catalog.store import commit_records, outbox
from catalog.store.audit_context import audit_written, pending_audit, record_change
from catalog.store.commit_records import CommitRecords
from catalog.store.kafka_offsets import save_all_kafka_offsets
from catalog.store.quotas import check_quota, count_statement, in_cluster, lock_clusters
from catalog.store.records import (
    ClusterQuota,
    DroppedTabular,
    NamespaceRecord,
    PendingCommit,
    TabularKind,
    TabularRecord,
    WarehouseRecord,
)
from catalog.store.schema import namespaces, table_metrics, tabular_record_columns, tabulars, warehouses

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


def _advances_offsets(commit: PendingCommit) -> bool:
    """Whether the commit records Kafka offsets too (`save_all_kafka_offsets` writes them)."""
    return commit.kafka is not None and bool(commit.kafka.end)


class TabularStoreMixin:
    """Warehouses, namespaces, tables and views on the engines of `SqlCatalogStore`."""

    is_sqlite: bool
    # Whether changes write commit events to the outbox (catalog/store/outbox.py).
    commit_events_enabled: bool = False

    def _reading(self) -> AbstractAsyncContextManager[AsyncConnection]:
        raise NotImplementedError

    def _writing(self, *, change: bool = False) -> AbstractAsyncContextManager[AsyncConnection]:
        raise NotImplementedError

    async def _fetch(self, statement: Select[Any], params: dict[str, Any]) -> Sequence[Any]:
        raise NotImplementedError

    async def _execute(self, statement: Update, params: dict[str, Any]) -> int:
        raise NotImplementedError

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

    _GET_LISTING_VERSION = select(namespaces.c.id, namespaces.c.listing_version).where(
        namespaces.c.warehouse_id == bindparam("p_warehouse_id"), namespaces.c.key == bindparam("p_key")
    )

    async def get_listing_version(self, warehouse_id: str, key: str) -> tuple[str, int] | None:
        """(namespace id, listing version) of a namespace, or None when it does not exist: the version
        check of a cached listing of its tables or views (one read of the unique index)."""
        rows = await self._fetch(self._GET_LISTING_VERSION, {"p_warehouse_id": warehouse_id, "p_key": key})
        return (rows[0][0], int(rows[0][1])) if rows else None

    @staticmethod
    async def _bump_listings(conn: AsyncConnection, namespace_ids: set[str]) -> None:
        """Count a change to the tables and views of each namespace, inside the change's transaction.

        One row at a time in id order, after every other write of the transaction: two transactions
        that change the same namespaces lock their rows in the same order and cannot deadlock."""
        for namespace_id in sorted(namespace_ids):
            await conn.execute(
                update(namespaces)
                .where(namespaces.c.id == namespace_id)
                .values(listing_version=namespaces.c.listing_version + 1)
            )

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
        self, warehouse_id: str, key: str, properties: dict[str, str], quota: ClusterQuota | None = None
    ) -> NamespaceRecord:
        """Create the namespace; with `quota`, only while its cluster holds fewer namespaces."""
        parent_key = key.rsplit(SEPARATOR, 1)[0] if SEPARATOR in key else ""
        nid = str(uuid.uuid4())
        try:
            async with self._writing() as conn:
                if quota is not None:
                    await lock_clusters(conn, [quota])
                    await check_quota(conn, quota, "namespace")
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
                await record_change(conn)
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
            await record_change(conn)
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
            await record_change(conn)
        return list(updates), removed, missing

    # -- tables and views -------------------------------------------------------------------------

    _TABULAR_COLUMNS = tabular_record_columns()

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
    _GET_TABULAR_HEAD = (
        select(*tabular_record_columns(metadata_json=False)).select_from(_TABULARS_JOIN).where(*_BY_NAME)
    )
    _GET_TABULAR_LOCATION = (
        select(tabulars.c.kind, tabulars.c.metadata_location).select_from(_TABULARS_JOIN).where(*_BY_NAME)
    )
    _LIST_TABULAR_NAMES = (
        select(tabulars.c.name)
        .where(tabulars.c.namespace_id == bindparam("p_namespace_id"), tabulars.c.kind == bindparam("p_kind"))
        .order_by(tabulars.c.name)
    )
    _MENTIONS_PATH = (
        select(tabulars.c.id)
        .where(
            tabulars.c.metadata_json.like(bindparam("p_pattern"), escape="!")
            | tabulars.c.metadata_location.like(bindparam("p_pattern"), escape="!")
        )
        .limit(bindparam("p_limit"))
    )
    # A commit's compare-and-swap of one table's pointer.
    _SWAP_POINTER = (
        update(tabulars)
        .where(tabulars.c.id == bindparam("p_id"), tabulars.c.version == bindparam("p_version"))
        .values(
            metadata_location=bindparam("p_location"),
            metadata_json=bindparam("p_json"),
            version=bindparam("p_next_version"),
            updated_at=bindparam("p_now"),
        )
    )
    _LIST_TABULAR_NAMES_AFTER = _LIST_TABULAR_NAMES.where(tabulars.c.name > bindparam("p_after"))
    # Page variants: LIMIT is a bound parameter too, so every page size shares one statement.
    _LIST_TABULAR_PAGE = _LIST_TABULAR_NAMES.limit(bindparam("p_limit"))
    _LIST_TABULAR_PAGE_AFTER = _LIST_TABULAR_NAMES_AFTER.limit(bindparam("p_limit"))

    async def get_tabular(
        self, warehouse_id: str, namespace_key: str, name: str, *, metadata_json: bool = True
    ) -> TabularRecord | None:
        """The table or view `name` in a namespace (the caller checks `kind`); without `metadata_json`,
        its record's `metadata_json` is empty (`tabular_record_columns`)."""
        params = {"p_warehouse_id": warehouse_id, "p_namespace_key": namespace_key, "p_name": name}
        rows = await self._fetch(self._GET_TABULAR if metadata_json else self._GET_TABULAR_HEAD, params)
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

    async def swap(self, commits: Sequence[PendingCommit], records: CommitRecords | None = None) -> bool:
        """Apply all pointer swaps (and creates) in one transaction, or none of them; `records` (the
        request's audit entry and idempotency outcome) are written in it when it lands. Without
        `records`, a mutation request's pending audit entry is (`catalog.store.audit_context`).

        Returns False when another writer moved any of the tables first (the caller retries on the new
        base). Raises `AlreadyExists` when a create finds the name taken, `RequestTakenOver` when a retry
        took the request's key over.
        """
        pending = pending_audit()
        if records is None and pending is not None:
            records = CommitRecords(pending.entry(), None)
        elif records is not None and records.audit is not None and audit_written():
            # An earlier change of this request (a pipeline apply's new cluster) stored its entry.
            records = CommitRecords(None, records.landing)
        swapped = await self._swap(commits, records)
        if swapped and pending is not None and records is not None and records.audit is not None:
            pending.mark_written(records.audit)
        return swapped

    async def _swap(self, commits: Sequence[PendingCommit], records: CommitRecords | None) -> bool:
        now = datetime.now(UTC)
        single = len(commits) == 1 and commits[0].tabular_id is not None and not _advances_offsets(commits[0])
        events = self.commit_events_enabled
        audited = records is not None and records.audit is not None
        if single and (audited or (events and records is None)) and not self.is_sqlite:
            # One statement still (PostgreSQL's data-modifying CTEs): the swap, its records and event.
            params = self._swap_parameters(commits[0], now) | commit_records.parameters(records, now)
            if events:
                params |= outbox.parameters(commits[0], outbox.COMMITTED, outbox.now_ms())
            rows = await self._fetch(commit_records.swap_statement(records, event=events), params)
            return commit_records.statement_swapped(rows[0], records)
        if single and records is None and not events:
            # One table's pointer alone (the common commit): a single statement is atomic by itself.
            swapped = await self._execute(self._SWAP_POINTER, self._swap_parameters(commits[0], now))
            return swapped == 1
        try:
            await self._swap_all(commits, now, records)
        except _LostRace:
            return False
        return True

    async def _swap_all(
        self, commits: Sequence[PendingCommit], now: datetime, records: CommitRecords | None = None
    ) -> None:
        created_in: set[str] = set()
        advanced: list[tuple[str, PendingCommit]] = []  # (table id, its commit): offsets saved at the end
        events = self.commit_events_enabled
        async with self._writing() as conn:
            await commit_records.own_key(conn, records)
            await lock_clusters(conn, [c.quota for c in commits if c.tabular_id is None and c.quota])
            for commit in commits:
                if commit.tabular_id is None:
                    if commit.quota is not None:
                        await check_quota(conn, commit.quota, commit.kind)
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
                                    managed_location=commit.managed_location,
                                    version=0,
                                    created_at=now,
                                    updated_at=now,
                                )
                            )
                    except IntegrityError as exc:
                        raise self._name_taken(commit.kind, commit.name) from exc
                    advanced.append((new_id, commit))
                    if events:
                        await outbox.write_event(conn, new_id, commit, outbox.CREATED, outbox.now_ms())
                    created_in.add(commit.namespace_id)
                    continue
                result = await conn.execute(self._SWAP_POINTER, self._swap_parameters(commit, now))
                if result.rowcount != 1:
                    raise _LostRace
                advanced.append((commit.tabular_id, commit))
                if events:
                    at_ms = outbox.now_ms()
                    await outbox.write_event(conn, commit.tabular_id, commit, outbox.COMMITTED, at_ms)
            await save_all_kafka_offsets(conn, advanced, now)
            await commit_records.write(conn, records, now)
            await self._bump_listings(conn, created_in)

    @staticmethod
    def _swap_parameters(commit: PendingCommit, now: datetime) -> dict[str, Any]:
        """`_SWAP_POINTER`'s parameters: the table's pointer moves on from the version the commit read."""
        return {
            "p_id": commit.tabular_id,
            "p_version": commit.expected_version,
            "p_next_version": commit.expected_version + 1,
            "p_location": commit.metadata_location,
            "p_json": commit.metadata_json,
            "p_now": now,
        }

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

    async def drop_tabular(self, tabular_id: str) -> DroppedTabular | None:
        """Delete the row; returns it as of the delete, so a commit that landed after the caller's read
        is not missed, or None when it was already gone."""
        async with self._writing() as conn:
            if self.commit_events_enabled:
                # Before the delete: the event's names are read from the row.
                await outbox.write_named_event(conn, tabular_id, outbox.DROPPED, {}, outbox.now_ms())
            await conn.execute(delete(table_metrics).where(table_metrics.c.tabular_id == tabular_id))
            row = (
                await conn.execute(
                    delete(tabulars)
                    .where(tabulars.c.id == tabular_id)
                    .returning(
                        tabulars.c.metadata_location,
                        tabulars.c.metadata_json,
                        tabulars.c.managed_location,
                        tabulars.c.namespace_id,
                    )
                )
            ).first()
            if row is not None:
                await self._bump_listings(conn, {row.namespace_id})
                await record_change(conn)
        if row is None:
            return None
        return DroppedTabular(row.metadata_location, row.metadata_json, row.managed_location)

    async def mentions_path(self, path: str) -> bool:
        """Whether any table or view (of any warehouse) mentions `path` in its metadata or metadata
        location: before a purge deletes a folder, whether another table keeps files in it."""
        escaped = path.replace("!", "!!").replace("%", "!%").replace("_", "!_")
        return bool(await self._fetch(self._MENTIONS_PATH, {"p_pattern": f"%{escaped}%", "p_limit": 1}))

    async def rename_tabular(self, tabular_id: str, namespace_id: str, name: str, kind: TabularKind) -> None:
        try:
            async with self._writing() as conn:
                # Locked: a concurrent rename must not move it between this read and the update
                # (the namespace it leaves would keep a stale listing).
                source = (
                    await conn.execute(
                        select(tabulars.c.namespace_id, tabulars.c.name)
                        .where(tabulars.c.id == tabular_id)
                        .with_for_update()
                    )
                ).first()
                await conn.execute(
                    update(tabulars)
                    .where(tabulars.c.id == tabular_id)
                    # The version moves too: a commit prepared on the row as it was (a remembered
                    # head, `TableHeads`) must not land on it under its new name.
                    .values(
                        namespace_id=namespace_id,
                        name=name,
                        version=tabulars.c.version + 1,
                        updated_at=datetime.now(UTC),
                    )
                )
                moved = {namespace_id} if source is None else {namespace_id, source.namespace_id}
                if self.commit_events_enabled and source is not None:
                    await self._rename_event(conn, tabular_id, source.namespace_id, source.name)
                await self._bump_listings(conn, moved)
                await record_change(conn)
        except IntegrityError as exc:
            raise self._name_taken(kind, name) from exc

    @staticmethod
    async def _rename_event(conn: AsyncConnection, tabular_id: str, namespace_id: str, name: str) -> None:
        old = select(namespaces.c.key).where(namespaces.c.id == namespace_id)
        old_key = (await conn.execute(old)).scalar()
        data = {"renamed-from": {"namespace": (old_key or "").split(SEPARATOR), "name": name}}
        await outbox.write_named_event(conn, tabular_id, outbox.RENAMED, data, outbox.now_ms())

    async def add_metrics_report(self, tabular_id: str, report_type: str, report: dict[str, Any]) -> None:
        async with self._writing(change=True) as conn:
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

    async def count_in_cluster(self, warehouse_id: str, root: str, kind: str) -> int:
        """How many namespaces (`kind` "namespace"), tables or views the cluster `root` holds."""
        async with self._reading() as conn:
            return int((await conn.execute(count_statement(warehouse_id, root, kind))).scalar_one())

    async def list_cluster_tables(
        self, warehouse_id: str, root: str, offset: int, limit: int
    ) -> list[tuple[str, str]]:
        """(namespace key, name) of the cluster's tables in that order, `limit` from `offset` on."""
        query = (
            select(namespaces.c.key, tabulars.c.name)
            .select_from(self._TABULARS_JOIN)
            .where(in_cluster(warehouse_id, root), tabulars.c.kind == "table")
            .order_by(namespaces.c.key, tabulars.c.name)
            .offset(offset)
            .limit(limit)
        )
        async with self._reading() as conn:
            return [(row[0], row[1]) for row in (await conn.execute(query)).all()]

    async def count_tabulars(self) -> int:
        async with self._reading() as conn:
            return int((await conn.execute(select(func.count()).select_from(tabulars))).scalar_one())
