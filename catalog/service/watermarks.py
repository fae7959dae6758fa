"""Completeness watermarks (catalog/watermarks.py): a table's, read or waited for by its readers, and the
broker end offsets ingestion reports to derive them.

A wait is a bounded long-poll: at most `FLOE_WATERMARK_MAX_WAIT_SECONDS`, and at most
`FLOE_WATERMARK_WAITS_PER_CLUSTER` at once per cluster and catalog process (more get 429), re-reading
the table's progress every `POLL_SECONDS` (the report that advances it may land on another process).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

from catalog.auth import Action, Principal, authorize
from catalog.errors import BadRequest, LimitExceeded, NoSuchTable, TooManyRequests
from catalog.identifiers import Namespace, TableIdent
from catalog.kafka_offsets import MAX_OFFSET, MAX_PARTITION, MAX_TOPIC_CHARS
from catalog.service.tabulars import Tabulars
from catalog.service.warehouses import Warehouses
from catalog.settings import Settings
from catalog.store import CatalogStore
from catalog.store.watermarks import TopicProgress, Transition
from catalog.watermarks import Completeness, PartitionState, completeness, observe_all

POLL_SECONDS = 1.0
# One report names at most this many tables, each at most this many partitions (a report of a
# cluster's tables is split by ingestion when it has more).
MAX_REPORTED_TABLES = 1_000
MAX_REPORTED_PARTITIONS = 10_000
# A report from the future is taken as now: a clock ahead must not claim completeness not yet reached.
_waiting: Counter[str] = Counter()  # tenant → long-polls open in this process


@dataclass(frozen=True, slots=True)
class TableWatermark:
    """A table's completeness per topic; its watermark is the earliest of its topics'."""

    ident: TableIdent
    topics: tuple[Completeness, ...]

    @property
    def current_topics(self) -> tuple[Completeness, ...]:
        """The topics ingestion reads now: those of its latest report (a topic floe.yaml no longer names
        keeps its rows, but is not reported any more and stops counting)."""
        latest = {t.topic: max((p.observed_at_ms or 0 for p in t.partitions), default=0) for t in self.topics}
        newest = max(latest.values(), default=0)
        return tuple(t for t in self.topics if newest and latest[t.topic] == newest)

    @property
    def watermark_ms(self) -> int | None:
        """The earliest of its current topics' watermarks; None while any has none (or none is reported)."""
        times = [t.watermark_ms for t in self.current_topics]
        return None if not times or None in times else min(t for t in times if t is not None)

    def complete_through(self, until_ms: int) -> bool:
        return self.watermark_ms is not None and self.watermark_ms >= until_ms


def _of(ident: TableIdent, progress: Mapping[str, TopicProgress]) -> TableWatermark:
    return TableWatermark(
        ident,
        tuple(completeness(topic, p.committed, p.states) for topic, p in sorted(progress.items())),
    )


def as_datetime(epoch_ms: int | None) -> datetime | None:
    return None if epoch_ms is None else datetime.fromtimestamp(epoch_ms / 1000, UTC)


@contextmanager
def _waiter_slot(principal: Principal, limit: int) -> Iterator[None]:
    tenant = principal.cluster or f"key:{principal.subject}"
    if _waiting[tenant] >= limit:
        raise TooManyRequests(
            f"Too many watermark waits open for cluster {principal.cluster or principal.subject} "
            f"(at most {limit}); retry later"
        )
    _waiting[tenant] += 1
    try:
        yield
    finally:
        _waiting[tenant] -= 1
        if not _waiting[tenant]:
            del _waiting[tenant]


class WatermarkService:
    """Watermarks over the store's offsets, the spec's lookups and the cached warehouses; the settings
    bound the waits and reports."""

    def __init__(
        self, store: CatalogStore, settings: Settings, tabulars: Tabulars, warehouses: Warehouses
    ) -> None:
        self.store = store
        self.settings = settings
        self.tabulars = tabulars
        self.warehouses = warehouses

    async def _table_id(self, prefix: str, ident: TableIdent) -> str:
        """The table's id, without reading its metadata (a wait re-reads only its offsets)."""
        warehouse = await self.warehouses.get(prefix)
        key = (ident.namespace.key, ident.name)
        tabular_id = (await self.store.table_ids(warehouse.id, [key])).get(key)
        if tabular_id is None:
            await self.tabulars.get(warehouse, ident, "table")  # the spec's 404 for what is missing
            raise NoSuchTable(f"Table does not exist: {ident}")
        return tabular_id

    async def watermark(
        self,
        principal: Principal,
        prefix: str,
        ident: TableIdent,
        until_ms: int | None = None,
        wait_seconds: float = 0.0,
    ) -> TableWatermark:
        """The table's completeness; with `until_ms` and `wait_seconds`, once it is complete through
        `until_ms` or the wait is over, whichever comes first. Readers of the table may call it."""
        await self.warehouses.get(prefix)
        authorize(principal, Action.READ, prefix, ident.namespace.key)
        settings = self.settings
        if wait_seconds < 0 or wait_seconds > settings.watermark_max_wait_seconds:
            raise BadRequest(f"wait must be 0 to {settings.watermark_max_wait_seconds:g} seconds")
        if wait_seconds and until_ms is None:
            raise BadRequest("wait needs until (the time the table must be complete through)")
        tabular_id = await self._table_id(prefix, ident)
        found = _of(ident, await self.store.topic_progress(tabular_id))
        if until_ms is None or not wait_seconds or found.complete_through(until_ms):
            return found
        deadline = time.monotonic() + wait_seconds
        with _waiter_slot(principal, settings.watermark_waits_per_cluster):
            while not found.complete_through(until_ms):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                await asyncio.sleep(min(POLL_SECONDS, left))
                found = _of(ident, await self.store.topic_progress(tabular_id))
        return found

    async def report(
        self,
        principal: Principal,
        prefix: str,
        observed_at_ms: int,
        tables: Sequence[tuple[TableIdent, str, Mapping[str, int]]],
    ) -> list[TableWatermark]:
        """Record the broker end offsets ingestion read at `observed_at_ms` for each (table, topic,
        {partition: end offset}); the tables' completeness after it (tables that do not exist are left
        out). Writers of the tables may call it."""
        if len(tables) > MAX_REPORTED_TABLES:
            raise LimitExceeded(f"A report names at most {MAX_REPORTED_TABLES} tables")
        if sum(len(ends) for _, _, ends in tables) > MAX_REPORTED_PARTITIONS:
            raise LimitExceeded(f"A report names at most {MAX_REPORTED_PARTITIONS} partitions")
        warehouse = await self.warehouses.get(prefix)
        for ident, _, _ in tables:
            authorize(principal, Action.WRITE, prefix, ident.namespace.key)
        now_ms = int(time.time() * 1000)
        at_ms = min(observed_at_ms, now_ms)
        for ident, topic, ends in tables:
            if not topic or len(topic) > MAX_TOPIC_CHARS:
                raise BadRequest(f"Invalid topic for {ident}: 1 to {MAX_TOPIC_CHARS} characters")
            _partitions(ident, ends)
        # One query for every table's id: a report names up to a thousand. A table dropped meanwhile
        # is left out (the others' watermarks must not wait for ingestion to notice).
        ids = await self.store.table_ids(
            warehouse.id, [(ident.namespace.key, ident.name) for ident, _, _ in tables]
        )
        transitions: dict[tuple[str, str], Transition] = {}
        idents: dict[str, TableIdent] = {}
        for ident, topic, ends in tables:
            tabular_id = ids.get((ident.namespace.key, ident.name))
            if tabular_id is not None:
                idents[tabular_id] = ident
                transitions[(tabular_id, topic)] = _transition(_partitions(ident, ends), at_ms)
        progress = await self.store.observe_end_offsets(transitions)
        by_table: dict[str, dict[str, TopicProgress]] = {}
        for (tabular_id, topic), found in progress.items():
            by_table.setdefault(tabular_id, {})[topic] = found
        return [_of(idents[tid], topics) for tid, topics in by_table.items()]


def _partitions(ident: TableIdent, ends: Mapping[str, int]) -> list[tuple[int, int]]:
    observed = []
    for key, end in ends.items():
        if not key.isdigit() or int(key) > MAX_PARTITION:
            raise BadRequest(f"Invalid partition {key[:20]!r} for {ident} (partitions: 0 to {MAX_PARTITION})")
        if isinstance(end, bool) or not isinstance(end, int) or not 0 <= end <= MAX_OFFSET:
            raise BadRequest(f"Invalid end offset for partition {key} of {ident} (0 to {MAX_OFFSET})")
        observed.append((int(key), end))
    return observed


def _transition(observed: list[tuple[int, int]], at_ms: int) -> Transition:
    def apply(
        states: Mapping[int, PartitionState], committed: Mapping[int, int]
    ) -> dict[int, PartitionState]:
        return observe_all(states, committed, observed, at_ms)

    return apply


def table_ident(namespace: list[str] | str, table: str) -> TableIdent:
    levels = namespace.split("\x1f") if isinstance(namespace, str) else namespace
    return TableIdent(Namespace.of(levels), table)
