"""The garbage collector of a long-running floe process: the catalog server and ingestion.

Python's full (oldest-generation) collection scans every object the collector tracks, and it runs each
time the objects promoted since the last one pass a quarter of the old generation. A busy floe process
churns long-lived objects (the catalog's cached table metadata models, a consumer's appenders and kept
manifest entries, replaced at every commit), so at a thousand tables both processes ran a full collection
every few seconds, each a pause of 0.4-0.7 s that stalled every request or table behind it
(`python -m benchmarks.many_tables`, measured with gc callbacks: 27 such pauses in three minutes).

`keep_full_collections_short` freezes what survives each full collection (`gc.freeze`: moved to the
permanent generation, which collections skip), so the next one scans only what was allocated since.
Frozen objects are still freed by reference counting when dropped; only a reference cycle that dies
after being frozen would stay, so every `reclaim_seconds` everything is unfrozen first and the next full
collection is a whole one (one long pause every ten minutes rather than every few seconds: 2.2-2.4 s at
1,000 tables of ~100 snapshots).

Taking that whole collection only when the frozen generation has also doubled (`reclaim_growth`) was
measured and not adopted: it took one whole collection where the clock took four, but the process made
fewer commits in the same time in every paired run (`python -m benchmarks.many_tables.collector_reclaim`),
which is not understood yet.

Every full collection's pause is a histogram (`floe_gc_full_collection_seconds`, by whether it scanned
everything), so a stall in a request or a table's freshness can be matched against one.
"""

from __future__ import annotations

import gc
import time
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, Histogram

RECLAIM_SECONDS = 600.0
_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


class _FreezeSurvivors:
    """A gc callback: after a full collection, freeze its survivors, unless a reclaim is due (by the clock,
    and with `reclaim_growth`, by the frozen generation's growth since the last whole collection): then
    leave every object unfrozen so that the next full collection scans and reclaims everything. Times
    every full collection."""

    def __init__(
        self,
        reclaim_seconds: float,
        reclaim_growth: float | None = None,
        pauses: Histogram | None = None,
    ) -> None:
        self.reclaim_seconds = reclaim_seconds
        self.reclaim_growth = reclaim_growth
        self.next_reclaim = time.monotonic() + reclaim_seconds
        # What the last whole collection left frozen (before the first one: what was frozen at install).
        self.live_after_reclaim = max(gc.get_freeze_count(), 1)
        self.reclaiming = False
        self.full_collections = 0
        self.reclaims = 0
        self._started = 0.0
        self._pauses = (
            None if pauses is None else {False: pauses.labels("frozen skipped"), True: pauses.labels("whole")}
        )

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if info.get("generation") != 2:
            return
        if phase == "start":
            self._started = time.perf_counter()
            return
        if phase != "stop":
            return
        self.full_collections += 1
        if self._pauses is not None:
            self._pauses[self.reclaiming].observe(time.perf_counter() - self._started)
        gc.freeze()
        now = time.monotonic()
        if self.reclaiming:  # that was the whole collection: what it left is the live set
            self.reclaiming = False
            self.reclaims += 1
            self.live_after_reclaim = max(gc.get_freeze_count(), 1)
            self.next_reclaim = now + self.reclaim_seconds
        elif now >= self.next_reclaim and (
            self.reclaim_growth is None
            or gc.get_freeze_count() >= self.reclaim_growth * self.live_after_reclaim
        ):
            gc.unfreeze()  # the next full collection sees every object once
            self.reclaiming = True


_PAUSES: dict[CollectorRegistry, Histogram] = {}  # a metric registers once in each registry


def full_collection_pauses(registry: CollectorRegistry = REGISTRY) -> Histogram:
    """The histogram of full collections' pauses in `registry` (made on the first call for it)."""
    pauses = _PAUSES.get(registry)
    if pauses is None:
        pauses = _PAUSES[registry] = Histogram(
            "floe_gc_full_collection_seconds",
            "Pauses of Python's full garbage collections, by whether they scanned every object (a reclaim "
            "of frozen cycles) or only those not frozen since the last one",
            ("scan",),
            registry=registry,
            buckets=_BUCKETS,
        )
    return pauses


def keep_full_collections_short(
    reclaim_seconds: float = RECLAIM_SECONDS, pauses: Histogram | None = None
) -> None:
    """Install the policy in this process (once; later calls change nothing) and freeze what is
    loaded by now (modules, models, routes), which lives as long as the process. `pauses`: where to
    observe each full collection's pause (`full_collection_pauses`)."""
    gc.freeze()
    if not any(isinstance(c, _FreezeSurvivors) for c in gc.callbacks):
        gc.callbacks.append(_FreezeSurvivors(reclaim_seconds, pauses=pauses))
