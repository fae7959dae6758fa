"""The commit loop of tables and views: prepare the new metadata on the current state, write its files,
compare-and-swap the pointers, and retry a lost race on the new state.

One loop for both, so a table commit and a view commit hold the same per-object lock, retry with the same
jittered backoff, record the request's audit entry and idempotency outcome in the swap's own transaction,
answer a retried request that already landed from what it wrote, and turn a database failure during the
swap into `CommitStateUnknown` (never deleting files a landed swap may point at).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from catalog.errors import AlreadyExists, CommitFailed, CommitStateUnknown, NoSuchTable, NoSuchView
from catalog.faults import CRASH_AFTER_COMMIT, crash_point
from catalog.identifiers import TableIdent
from catalog.metadata_files import encode_metadata_file
from catalog.observability import COMMIT_CONFLICTS, COMMIT_RETRIES
from catalog.service.request_records import RequestRecords, request_records
from catalog.service.table_model import LoadedTable
from catalog.storage import MetadataFileError, Storage, StorageRunner
from catalog.store import CatalogStore, PendingCommit, TabularKind
from catalog.store.commit_records import RequestTakenOver
from catalog.store.database_faults import write_outcome_unknown

log = logging.getLogger(__name__)

# The longest pause between two attempts; the first pauses up to 5 ms, each next one twice as long.
MAX_BACKOFF_SECONDS = 0.25
# Deletions of obsolete metadata files run after the answer, at most this many at once; past that a
# commit deletes its own before answering, so a slow store holds commits back rather than piling up.
MAX_PENDING_DELETIONS = 16


class CommitLocks:
    """This process's commit lock per table or view (they share names, so one key space)."""

    def __init__(self) -> None:
        self._locks: weakref.WeakValueDictionary[tuple[str, str, str], asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )

    @contextlib.asynccontextmanager
    async def hold(self, warehouse_id: str, idents: Sequence[TableIdent]) -> AsyncIterator[None]:
        """Hold the lock of every object in `idents` (taken in a fixed order, so two multi-table
        transactions cannot deadlock); a lock lives while someone holds or awaits it."""
        keys = sorted({(warehouse_id, ident.namespace.key, ident.name) for ident in idents})
        locks = [self._locks.setdefault(key, asyncio.Lock()) for key in keys]
        async with contextlib.AsyncExitStack() as stack:
            for lock in locks:
                await stack.enter_async_context(lock)
            yield


@dataclass(slots=True)
class CommitAttempt:
    """One attempt, prepared on the current state: the compare-and-swap of each changed object and the
    answer per object (an unchanged object answers its current state and swaps nothing)."""

    swaps: list[PendingCommit] = field(default_factory=list)
    results: list[LoadedTable] = field(default_factory=list)
    # Prepared on a remembered row rather than a read one (`TableHeads`): when its swap loses, the
    # commit is prepared again on a fresh read at once, and that is no race lost.
    guessed: bool = False
    # Files the landed commit made obsolete (its tables' delete-after-commit): deleted after it lands.
    obsolete: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class CommitTarget:
    """What one commit request changes, and where its files go: `tenant` is the caller's share of the
    storage pool, `storage` its confined file access."""

    warehouse_id: str
    idents: Sequence[TableIdent]
    kind: TabularKind
    tenant: str
    storage: Storage
    config: dict[str, str]


class CommitLoop:
    """Runs commits of tables and views: `prepare` builds an attempt on the current state (pure commit
    core plus reads), the loop does the I/O, the locking and the retries."""

    def __init__(
        self,
        store: CatalogStore,
        locks: CommitLocks,
        storage_runner: StorageRunner,
        retries: int,
        max_metadata_file_bytes: int,
    ) -> None:
        self.store = store
        self.locks = locks
        self.storage_runner = storage_runner
        self.attempts = retries + 1
        self.max_metadata_file_bytes = max_metadata_file_bytes
        self._deletions: set[asyncio.Task[None]] = set()

    async def _storage(self, target: CommitTarget, func: Any, *args: Any) -> Any:
        return await self.storage_runner.run(target.tenant, func, *args)

    async def run(
        self,
        target: CommitTarget,
        prepare: Callable[[], Awaitable[CommitAttempt]],
        landed: Callable[[CommitAttempt], Awaitable[None]] | None = None,
    ) -> list[LoadedTable]:
        """Commit: all of the attempt's swaps land or none does. Requirements are checked by `prepare`
        on the current state; when another writer wins a swap, the commit is prepared again on the new
        state and retried (bounded), so a commit whose requirements still hold is never failed by a
        race, and one whose requirements broke gets its 409. `landed` runs once the swap committed."""
        request = request_records()
        earlier = request.landed_locations(len(target.idents)) if request is not None else None
        if earlier is not None:
            # An earlier attempt of this request committed (then its process died): answer it again.
            return await self._landed_answer(target, earlier)
        # One commit per object at a time in this process: concurrent commits to an object can only
        # land one by one (compare-and-swap), so racing them here just burned retries (and failed
        # commits after the last one). Other workers and servers still race; the swap decides.
        async with self.locks.hold(target.warehouse_id, target.idents):
            attempt = 0
            while attempt < self.attempts:
                prepared = await prepare()
                if await self._swap(target, prepared, request):
                    crash_point(CRASH_AFTER_COMMIT)
                    if landed is not None:
                        await landed(prepared)
                    if prepared.obsolete:
                        await self._schedule_deletion(target, prepared.obsolete)
                    return prepared.results
                if prepared.guessed:
                    continue  # `prepare` reads the row this time
                attempt += 1
                COMMIT_RETRIES.inc()
                log.info(
                    "commit to %s lost a race (attempt %d), retrying on the new base",
                    target.idents,
                    attempt,
                )
                # Jittered exponential backoff: writers in other processes that lost the same race
                # would otherwise retry in lockstep and collide again.
                await asyncio.sleep(random.uniform(0, min(MAX_BACKOFF_SECONDS, 0.005 * 2 ** (attempt - 1))))
        COMMIT_CONFLICTS.inc()
        raise CommitFailed(
            f"Commit failed: {', '.join(map(str, target.idents))} kept changing; "
            f"gave up after {self.attempts} attempts"
        )

    async def _swap(
        self, target: CommitTarget, prepared: CommitAttempt, request: RequestRecords | None
    ) -> bool:
        """Write the attempt's metadata files and swap them in; False when another writer won (its
        files are deleted then)."""
        written = [swap.metadata_location for swap in prepared.swaps]
        try:
            if prepared.swaps:  # one storage call for all (a transaction's hundred tables)
                files = [
                    (swap.metadata_location, encode_metadata_file(swap.metadata_location, swap.metadata_json))
                    for swap in prepared.swaps
                ]
                await self.storage_runner.write_many(target.tenant, target.storage, files)
            # The request's audit entry and idempotency outcome commit with the swap.
            records = request.for_commit([r.metadata_location for r in prepared.results]) if request else None
            swapped = not prepared.swaps or await self.store.swap(prepared.swaps, records)
            if prepared.swaps and swapped and request is not None and records is not None:
                request.committed(records)
        except AlreadyExists:
            await self._storage(target, target.storage.delete_many, written)
            raise CommitFailed(f"Requirement failed: {target.kind} already exists") from None
        except RequestTakenOver:
            await self._storage(target, target.storage.delete_many, written)
            raise
        except Exception as exc:
            if not write_outcome_unknown(exc):
                raise  # e.g. DatabaseUnavailable: nothing reached the database
            # The database may or may not have applied the swap: never delete the new files.
            log.error("commit state unknown for %s: %s", target.idents, exc)
            raise CommitStateUnknown(
                f"Commit state unknown: the database failed during the commit ({type(exc).__name__})"
            ) from exc
        if not swapped:
            await self._storage(target, target.storage.delete_many, written)
        return bool(swapped)

    async def _schedule_deletion(self, target: CommitTarget, locations: list[str]) -> None:
        """Delete a landed commit's obsolete files after it answers (a busy table's commit should not
        wait for an object store's DELETEs), or now when `MAX_PENDING_DELETIONS` are already running."""
        if len(self._deletions) >= MAX_PENDING_DELETIONS:
            await self._delete_obsolete(target, locations)
            return
        task = asyncio.create_task(self._delete_obsolete(target, locations))
        self._deletions.add(task)  # the loop keeps only a weak reference to a task
        task.add_done_callback(self._deletions.discard)

    async def _delete_obsolete(self, target: CommitTarget, locations: list[str]) -> None:
        """Delete what a landed commit dropped from its tables' logs, confined to the caller's storage
        (`Storage.delete_many` skips anything outside it). The commit stands whatever happens here: a
        file left behind is maintenance's to remove (it deletes every version below the log's oldest)."""
        try:
            await self._storage(target, target.storage.delete_many, locations)
        except Exception as exc:  # the answer is the landed commit's, never this cleanup's failure
            log.warning("old metadata files of %s not deleted: %s", target.idents, type(exc).__name__)

    async def _landed_answer(self, target: CommitTarget, locations: list[str]) -> list[LoadedTable]:
        """The answer of a commit that landed: its objects as it wrote them (metadata files are never
        overwritten, so they are what the first attempt answered). A file deleted since (later commits
        dropped it from the log with delete-after-commit, or maintenance removed it) is answered with
        the object as it is now: the commit landed, and what followed it builds on it."""
        results = []
        for ident, location in zip(target.idents, locations, strict=True):
            read = target.storage.read_metadata_file
            try:
                raw = await self._storage(target, read, location, self.max_metadata_file_bytes)
            except MetadataFileError:
                if await self._storage(target, target.storage.exists, location):
                    raise  # there but unreadable: not this case
                results.append(await self._current(target, ident))
                continue
            results.append(LoadedTable(location, raw.decode(), target.config))
        return results

    async def _current(self, target: CommitTarget, ident: TableIdent) -> LoadedTable:
        record = await self.store.get_tabular(target.warehouse_id, ident.namespace.key, ident.name)
        if record is None or record.kind != target.kind or record.metadata_location is None:
            # Dropped since: answered as a commit to it now would be.
            missing = NoSuchTable if target.kind == "table" else NoSuchView
            raise missing(f"{target.kind.capitalize()} does not exist: {ident}")
        return LoadedTable(record.metadata_location, record.metadata_json, target.config)
