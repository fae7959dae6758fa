"""Table commits: each change checked on its table's current metadata and all swapped in at once
(compare-and-swap), retried on a lost race; a retry of a request that already landed gets its answer."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Callable
from typing import NamedTuple

from pyiceberg.table.metadata import TableMetadata

from catalog import commit as core
from catalog.auth import Action, Principal, authorize
from catalog.errors import (
    AlreadyExists,
    BadRequest,
    CatalogError,
    NoSuchNamespace,
    NoSuchTable,
)
from catalog.events import EventBus, TableChanged
from catalog.identifiers import TableIdent
from catalog.kafka_offsets import KafkaProgress, check_kafka_progress, kafka_progress
from catalog.locations import (
    confine_table_metadata,
    default_table_location,
    is_default_table_location,
    namespace_location,
    normalize_location,
    tenant_root,
)
from catalog.metadata_files import obsolete_metadata_files
from catalog.observability import COMMIT_HEAD_GUESSES
from catalog.service.commit_loop import CommitAttempt, CommitLoop, CommitTarget
from catalog.service.metadata_models import MetadataModels
from catalog.service.quotas import Limits, cluster_quota
from catalog.service.table_heads import HeadKey, TableHeads
from catalog.service.table_model import LoadedTable, TableChange
from catalog.service.tenant_storage import TenantStorage, tenant_of
from catalog.service.warehouses import Warehouses
from catalog.settings import Settings
from catalog.store import CatalogStore, NamespaceRecord, PendingCommit, TabularRecord, WarehouseRecord

log = logging.getLogger(__name__)


def managed_location(
    warehouse: WarehouseRecord,
    namespace: NamespaceRecord,
    ident: TableIdent,
    location: str,
) -> str | None:
    """A new table's location in canonical form when floe assigned it (directly, or through a
    stage-create whose location the client sends back), else None: purge deletes all of it."""
    folder = namespace_location(warehouse.location, ident.namespace.levels, namespace.properties)
    if is_default_table_location(folder, ident.name, location):
        return normalize_location(location)
    return None


class CommittedModel(NamedTuple):
    """A commit's new model, to keep once it lands: where its JSON (`json_bytes` long) was written, and
    the location of the version it replaces (None for a new table); and the table's row once it lands
    (`head`, without its metadata JSON; None for a new table, whose id the database assigns)."""

    location: str
    model: TableMetadata
    json_bytes: int
    replaces: str | None
    key: HeadKey
    head: TabularRecord | None
    # Metadata files the commit drops from the table's log, deleted once it lands (delete-after-commit).
    obsolete: tuple[str, ...] = ()


class TableCommits:
    """The commit path of the table service, for the warehouse's tables as `table_config` presents them."""

    def __init__(
        self,
        *,
        store: CatalogStore,
        settings: Settings,
        warehouses: Warehouses,
        storage: TenantStorage,
        commits: CommitLoop,
        metadata_models: MetadataModels,
        table_heads: TableHeads,
        events: EventBus,
        table_config: Callable[[WarehouseRecord], dict[str, str]],
    ) -> None:
        self.store = store
        self.settings = settings
        self.limits = Limits.of(settings)
        self.warehouses = warehouses
        self.storage = storage
        # The commit loop shared with views; the committed models (the next commit's base); the bus
        # that tells subscribers (Glue, commit events) of committed changes.
        self.commits = commits
        self.metadata_models = metadata_models
        self.table_heads = table_heads
        self.events = events
        self.table_config = table_config

    async def commit_all(
        self, principal: Principal, prefix: str, changes: list[TableChange]
    ) -> list[LoadedTable]:
        """Commit changes to one or more tables atomically: all land or none does.

        Requirements are checked on the current metadata; when another writer wins the pointer swap,
        the commit is re-validated on the new base and retried (bounded), so a commit whose requirements
        still hold is never failed by a race, and one whose requirements broke gets a 409.
        """
        if not changes:
            raise BadRequest("Invalid transaction: 'table-changes' must not be empty")
        idents = [c.ident for c in changes]
        if len(set(idents)) != len(idents):
            raise BadRequest("Invalid transaction: a table appears more than once")
        warehouse = await self.warehouses.get(prefix)
        for change in changes:
            authorize(principal, Action.WRITE, prefix, change.ident.namespace.key)
            self.limits.check_table_change(change)
        root = tenant_root(warehouse.location, principal.cluster)
        storage = self.storage.confined(warehouse, root)
        config = self.table_config(warehouse)
        target = CommitTarget(warehouse.id, idents, "table", tenant_of(warehouse, principal), storage, config)
        models: list[CommittedModel] = []
        # A lone table's row as this process's last commit left it, if remembered (`TableHeads`):
        # looked up on the first attempt, under the table's lock (an earlier commit may just land).
        key = (warehouse.id, idents[0].namespace.key, idents[0].name)
        may_guess = len(changes) == 1 and bool(changes[0].updates)
        guessed = False

        async def attempt(guess: tuple[TabularRecord, TableMetadata] | None) -> CommitAttempt:
            pending, results, prepared_models = await self._prepare(warehouse, changes, root, guess)
            models[:] = prepared_models
            swaps = [p for p, changed in pending if changed]
            obsolete = [path for kept in prepared_models for path in kept.obsolete]
            return CommitAttempt(swaps, results, guess is not None, obsolete)

        async def prepare() -> CommitAttempt:
            nonlocal may_guess, guessed
            guess = self._guess(key) if may_guess else None
            may_guess = False
            if guess is not None:
                guessed = True
                # A stale head may fail a requirement that holds: only a fresh read's verdict counts.
                with contextlib.suppress(CatalogError):
                    return await attempt(guess)
            if guessed:  # the guess was stale (its swap lost, or it failed): read the row
                guessed = False
                self.table_heads.missed(key)
                COMMIT_HEAD_GUESSES.labels("stale").inc()
            return await attempt(None)

        async def landed(landing: CommitAttempt) -> None:
            if landing.guessed:
                COMMIT_HEAD_GUESSES.labels("current").inc()
            for kept in models:
                self.metadata_models.put(kept.location, kept.model, kept.json_bytes, replaces=kept.replaces)
                if kept.head is not None:
                    self.table_heads.committed(kept.key, kept.head, guessed=landing.guessed)
            for ident in idents:
                await self.events.publish(TableChanged(warehouse, ident.namespace, ident.name))

        # The loop shared with views: locks, retries on a lost race, in-transaction records, unknown state.
        return await self.commits.run(target, prepare, landed)

    def _guess(self, key: HeadKey) -> tuple[TabularRecord, TableMetadata] | None:
        """The remembered row of `key` with its current model, when this process holds both."""
        head = self.table_heads.guess(key)
        model = self.metadata_models.get(head.metadata_location) if head is not None else None
        return None if head is None or model is None else (head, model)

    async def _prepare(
        self,
        warehouse: WarehouseRecord,
        changes: list[TableChange],
        root: str,
        guess: tuple[TabularRecord, TableMetadata] | None,
    ) -> tuple[list[tuple[PendingCommit, bool]], list[LoadedTable], list[CommittedModel]]:
        """The new metadata of every change on its table's current state (for a lone change, on the
        remembered row and model `guess` when given; else as read), each confined to `root` (the
        caller's folder), as compare-and-swap commits; and the new models by their locations, each with
        the location of the version it replaces and the table's row once the swap lands."""
        pending: list[tuple[PendingCommit, bool]] = []
        results: list[LoadedTable] = []
        models: list[CommittedModel] = []
        config = self.table_config(warehouse)
        if guess is not None:
            lone = changes[0].ident
            tables: dict[tuple[str, str], tuple[TabularRecord, TableMetadata | None]] = {
                (lone.namespace.key, lone.name): guess
            }
        else:
            tables = await self._read_tables(warehouse, changes)
        fenced: list[tuple[str, KafkaProgress]] = []  # (table id, the progress its commit claims)
        namespaces: dict[str, NamespaceRecord | None] = {}
        for change in changes:
            ident = change.ident
            key = (ident.namespace.key, ident.name)
            record, cached = tables.get(key, (None, None))
            creating = any(r.type == "assert-create" for r in change.requirements)
            if record is not None and record.kind != "table":
                if creating:
                    # 409 AlreadyExistsException, worded as the Java reference words it.
                    raise AlreadyExists(f"View with same name already exists: {ident}")
                raise NoSuchTable(f"Table does not exist: {ident}")
            if record is None:
                if ident.namespace.key not in namespaces:  # an apply creates many tables per namespace
                    namespaces[ident.namespace.key] = await self.store.get_namespace(
                        warehouse.id, ident.namespace.key
                    )
                ns = namespaces[ident.namespace.key]
                if ns is None:
                    raise NoSuchNamespace(f"Namespace does not exist: {ident.namespace}")
                if not creating:
                    raise NoSuchTable(f"Table does not exist: {ident}")
                metadata = core.commit_table(
                    None,
                    None,
                    change.requirements,
                    change.updates,
                    default_table_location(
                        namespace_location(warehouse.location, ident.namespace.levels, ns.properties),
                        ident.name,
                    ),
                )
                metadata = confine_table_metadata(metadata, None, root)
                metadata_json = metadata.model_dump_json()
                location = core.new_metadata_location(metadata, None)
                progress = kafka_progress(change.updates)
                if progress is not None:
                    check_kafka_progress(progress, {})
                managed = managed_location(warehouse, ns, ident, metadata.location)
                quota = cluster_quota(self.settings, warehouse, ident.namespace, "table")
                pending.append(
                    (
                        PendingCommit(
                            None,
                            0,
                            location,
                            metadata_json,
                            ns.id,
                            ident.name,
                            "table",
                            progress,
                            managed,
                            quota,
                        ),
                        True,
                    )
                )
                results.append(LoadedTable(location, metadata_json, config))
                # Kept too: a new table's first commits (an apply's thousand tables, then ingestion's
                # first batch of each) start from it rather than parsing what was just written.
                models.append(
                    CommittedModel(location, metadata, len(metadata_json), None, (warehouse.id, *key), None)
                )
                continue
            base = cached or core.parse_table_metadata(record.metadata_json)
            metadata = core.commit_table(base, record.metadata_location, change.requirements, change.updates)
            self.limits.check_committed(change, metadata.properties)
            if change.updates:
                metadata = confine_table_metadata(metadata, base, root)
            else:
                pending.append(
                    (
                        PendingCommit(
                            record.id, record.version, record.metadata_location or "", record.metadata_json
                        ),
                        False,
                    )
                )
                results.append(LoadedTable(record.metadata_location, record.metadata_json, config))
                continue
            progress = kafka_progress(change.updates)
            if progress is not None:
                fenced.append((record.id, progress))
            metadata_json = self.metadata_models.dump(metadata)
            location = core.new_metadata_location(metadata, record.metadata_location)
            pending.append(
                (PendingCommit(record.id, record.version, location, metadata_json, kafka=progress), True)
            )
            results.append(LoadedTable(location, metadata_json, config))
            landed_head = dataclasses.replace(
                record, metadata_location=location, metadata_json="", version=record.version + 1
            )
            models.append(
                CommittedModel(
                    location,
                    metadata,
                    len(metadata_json),
                    record.metadata_location,
                    (warehouse.id, *key),
                    landed_head,
                    obsolete_metadata_files(base, metadata),
                )
            )
        # Read after the tables' rows: offsets only change together with a table's version, so a
        # commit that moved them after this read also fails this commit's compare-and-swap.
        for (_, progress), committed in zip(fenced, await self._read_offsets(fenced), strict=True):
            check_kafka_progress(progress, committed)
        return pending, results, models

    async def _read_tables(
        self, warehouse: WarehouseRecord, changes: list[TableChange]
    ) -> dict[tuple[str, str], tuple[TabularRecord, TableMetadata | None]]:
        """The changed tables' rows by (namespace key, name), each with its current metadata's parsed
        model when it is cached. A row is read without its metadata JSON (tens of KiB for a table with
        a hundred snapshots, megabytes for ingestion's hundred-table transactions) unless the change
        needs it: the model is not cached, or the change has no updates (its answer is that JSON)."""
        keys = [(c.ident.namespace.key, c.ident.name) for c in changes]
        heads = await self._read_rows(warehouse, keys, metadata_json=False)
        found: dict[tuple[str, str], tuple[TabularRecord, TableMetadata | None]] = {}
        missing: list[tuple[str, str]] = []
        for change, key in zip(changes, keys, strict=True):
            head = heads.get(key)
            if head is None:
                continue
            model = self.metadata_models.get(head.metadata_location) if change.updates else None
            if model is None and head.kind == "table":
                missing.append(key)
            found[key] = (head, model)
        if missing:
            # Read whole; a row that moved in between is taken as it is now (its swap checks that version).
            full = await self._read_rows(warehouse, missing, metadata_json=True)
            for key in missing:
                if key in full:
                    found[key] = (full[key], None)
                else:
                    found.pop(key)
        return found

    async def _read_rows(
        self, warehouse: WarehouseRecord, keys: list[tuple[str, str]], *, metadata_json: bool
    ) -> dict[tuple[str, str], TabularRecord]:
        """The rows of `keys` (namespace key, name) that exist: one query for all of a transaction's
        tables (ingestion commits a hundred at once); a lone table by the prepared single-row read."""
        if len(keys) > 1:
            return await self.store.get_tabulars(warehouse.id, keys, metadata_json=metadata_json)
        record = await self.store.get_tabular(warehouse.id, *keys[0], metadata_json=metadata_json)
        return {} if record is None else {keys[0]: record}

    async def _read_offsets(self, fenced: list[tuple[str, KafkaProgress]]) -> list[dict[int, int]]:
        """The committed offsets of each (table id, progress)'s topic, in one query for all."""
        store = self.store
        if len(fenced) == 1:
            tabular_id, progress = fenced[0]
            return [await store.get_kafka_offsets(tabular_id, progress.topic)]
        found = await store.get_kafka_offsets_of([(t, p.topic) for t, p in fenced]) if fenced else {}
        return [found[(t, p.topic)] for t, p in fenced]
