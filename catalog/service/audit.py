"""The audit log: entries are written by the HTTP layer (every mutation and token request) and by
operations outside it (`WarehouseService`); administrators read them back, newest first."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from catalog.auth import Principal, managed_cluster
from catalog.errors import BadRequest
from catalog.store.interfaces import AuditStore
from catalog.store.security import AuditEntry, AuditFilter


@dataclass(frozen=True, slots=True)
class AuditPage:
    """Entries newest first; `next_before` pages further back (None: this was the last page)."""

    entries: list[AuditEntry]
    next_before: int | None


# Entries one INSERT writes at most.
MAX_GROUP = 500
# Tries of a group's write: a connection whose backend was terminated fails once and is dropped, so
# the next try runs on another (a mutation is not answered while its entry is unwritten).
WRITE_ATTEMPTS = 3
# Windows of repeated entries kept at once; beyond it, all are summarized and a fresh set begins.
MAX_REPEAT_WINDOWS = 10_000
# (subject, cluster, action, target, outcome, status code, source): entries alike but for time and id.
_RepeatKey = tuple[str, str | None, str, str, str, int, str]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Repeats:
    """The repeats of a recorded entry within its window: the first of them (its time and request id)
    and how many there were."""

    until: float  # monotonic end of the window
    first: AuditEntry | None = None
    count: int = 0


class AuditWriter:
    """Writes the HTTP layer's entries in groups, as a database commits a group of transactions.

    `record` returns once its entry is stored, so a client that has its answer finds its request in the
    log. Entries that arrive while a write runs wait for it, then go in the next write together: under
    load one INSERT serves many requests, instead of one transaction each. One writer per process.

    Engines ask for a token before most queries (Trino 476: two per SELECT), each time the same key
    from the same address, each answered alike: `record_repeatable` stores the first such entry before
    its answer, as `record` does, and counts the identical ones that follow within `repeat_window`
    seconds, which are stored as one entry (`count`, the time and request id of the first of them) when
    the window ends, as syslog's "message repeated N times". An entry that differs in anything but its
    time and request id (another key, address, outcome or status) is its own entry.
    """

    def __init__(self, store: AuditStore, repeat_window: float = 0.0) -> None:
        self.store = store
        self.repeat_window = repeat_window
        self._pending: list[tuple[AuditEntry, asyncio.Future[None]]] = []
        self._writing: asyncio.Task[None] | None = None
        self._repeats: dict[_RepeatKey, _Repeats] = {}
        self._sweeping: asyncio.Task[None] | None = None

    async def record(self, entry: AuditEntry) -> None:
        """Store `entry`; raises what the write raised."""
        # Shielded: a caller that goes away does not stop the write its entry shares with others.
        await asyncio.shield(self._enqueue(entry))

    async def record_repeatable(self, entry: AuditEntry) -> None:
        """Store `entry` like `record`, unless an identical one was stored less than `repeat_window`
        seconds ago: then it is counted, and stored with the others of that window when it ends."""
        if self.repeat_window <= 0:
            await self.record(entry)
            return
        key = (
            entry.subject,
            entry.cluster,
            entry.action,
            entry.target,
            entry.outcome,
            entry.status_code,
            entry.source,
        )
        now = time.monotonic()
        repeats = self._repeats.get(key)
        if repeats is not None and now < repeats.until:
            if repeats.first is None:
                repeats.first = replace(entry, at=datetime.now(UTC))
            repeats.count += 1
            return
        if repeats is not None:
            self._summarize(repeats)
        elif len(self._repeats) >= MAX_REPEAT_WINDOWS:
            self._summarize_all()
        self._repeats[key] = _Repeats(now + self.repeat_window)
        loop = asyncio.get_running_loop()
        sweeping = self._sweeping
        if sweeping is None or sweeping.done() or sweeping.get_loop() is not loop:
            self._sweeping = loop.create_task(self._sweep())
        await self.record(entry)

    async def close(self) -> None:
        """Store the counted repeats of every open window and whatever waits to be written."""
        if self._sweeping is not None and not self._sweeping.done():
            self._sweeping.cancel()
        self._summarize_all()
        writing = self._writing
        if writing is not None and not writing.done():
            await asyncio.wait([writing])

    def _summarize(self, repeats: _Repeats) -> None:
        """Queue the entry of a window's repeats (nobody waits for it: a failure is logged)."""
        if repeats.first is None:
            return
        summary = replace(repeats.first, count=repeats.count)
        self._enqueue(summary).add_done_callback(_log_failure)

    def _summarize_all(self) -> None:
        for repeats in self._repeats.values():
            self._summarize(repeats)
        self._repeats.clear()

    async def _sweep(self) -> None:
        """Summarize the windows that ended, about once a window, while any is open."""
        while self._repeats:
            await asyncio.sleep(self.repeat_window)
            now = time.monotonic()
            for key, repeats in list(self._repeats.items()):
                if repeats.until <= now:
                    del self._repeats[key]
                    self._summarize(repeats)

    def _enqueue(self, entry: AuditEntry) -> asyncio.Future[None]:
        """The future of `entry`'s write, which starts with the next group."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        self._pending.append((entry, done))
        writing = self._writing
        if writing is None or writing.done() or writing.get_loop() is not loop:
            self._writing = loop.create_task(self._write_pending())
        return done

    async def _write_pending(self) -> None:
        # Let the requests this loop iteration already holds add their entries first: one write more.
        await asyncio.sleep(0)
        while self._pending:
            group, self._pending = self._pending[:MAX_GROUP], self._pending[MAX_GROUP:]
            try:
                await self._write_group([entry for entry, _ in group])
            except Exception as exc:  # every caller of the group hears of it
                for _, done in group:
                    if not done.done():
                        done.set_exception(exc)
            else:
                for _, done in group:
                    if not done.done():
                        done.set_result(None)

    async def _write_group(self, entries: list[AuditEntry]) -> None:
        for attempt in range(1, WRITE_ATTEMPTS + 1):
            try:
                await self.store.add_audit_entries(entries)
                return
            except Exception:
                # A failure after the rows were stored would write them twice: an entry too many is
                # better than a change without one.
                if attempt == WRITE_ATTEMPTS:
                    raise
                log.warning("audit write failed (attempt %d), retrying", attempt, exc_info=True)


def _log_failure(done: asyncio.Future[None]) -> None:
    if not done.cancelled() and done.exception() is not None:
        log.error("could not write a summary of repeated audit entries", exc_info=done.exception())


OUTCOMES = ("ok", "denied", "failed")


def parse_time(value: str | None, what: str) -> datetime | None:
    """A filter's date and time (ISO 8601; without an offset: UTC), in UTC as the database compares it."""
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
        # A time whose offset moves it out of years 1 to 9999 is refused here, not by the database
        # driver (a 500).
        return (parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)).astimezone(UTC)
    except (ValueError, OverflowError) as exc:
        raise BadRequest(f"Invalid {what}: expected a date and time such as 2026-01-31T12:00") from exc


def audit_filter(
    *,
    subject: str | None = None,
    action: str | None = None,
    target: str | None = None,
    outcome: str | None = None,
    since: str | None = None,
    until: str | None = None,
    hide_pipeline: bool = False,
) -> AuditFilter:
    """The filters of an audit listing as the console and `GET /management/v1/audit` take them (empty
    values: no filter); BadRequest for an unknown outcome or a time that is not one."""
    if outcome and outcome not in OUTCOMES:
        raise BadRequest(f"Invalid outcome {outcome!r}: expected one of {', '.join(OUTCOMES)}")
    return AuditFilter(
        subject=subject or None,
        action=action or None,
        target=target or None,
        outcome=outcome or None,
        since=parse_time(since, "since"),
        until=parse_time(until, "until"),
        hide_pipeline=hide_pipeline,
    )


class AuditService:
    def __init__(self, store: AuditStore) -> None:
        self.store = store

    async def list(
        self,
        principal: Principal,
        cluster: str | None,
        limit: int,
        before: int | None,
        filters: AuditFilter | None = None,
    ) -> AuditPage:
        """A page of the log: all of it (or one cluster's) for a global administrator, a cluster
        admin's own cluster's; `filters` narrow it further."""
        entries = await self.store.list_audit(
            cluster=managed_cluster(principal, cluster), limit=limit, before_id=before, filters=filters
        )
        return AuditPage(entries, entries[-1].id if len(entries) == limit else None)
