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
collection is a whole one (one long pause every ten minutes rather than every few seconds).
"""

from __future__ import annotations

import gc
import time
from typing import Any

RECLAIM_SECONDS = 600.0


class _FreezeSurvivors:
    """A gc callback: after a full collection, freeze its survivors (or, when a reclaim is due, leave
    them all unfrozen so the next full collection scans and reclaims everything)."""

    def __init__(self, reclaim_seconds: float) -> None:
        self.reclaim_seconds = reclaim_seconds
        self.next_reclaim = time.monotonic() + reclaim_seconds
        self.reclaiming = False
        self.full_collections = 0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase != "stop" or info.get("generation") != 2:
            return
        self.full_collections += 1
        now = time.monotonic()
        if not self.reclaiming and now >= self.next_reclaim:
            gc.unfreeze()  # the next full collection sees every object once
            self.reclaiming = True
            return
        if self.reclaiming:
            self.reclaiming = False
            self.next_reclaim = now + self.reclaim_seconds
        gc.freeze()


def keep_full_collections_short(reclaim_seconds: float = RECLAIM_SECONDS) -> None:
    """Install the policy in this process (once; later calls change nothing) and freeze what is
    loaded by now (modules, models, routes), which lives as long as the process."""
    if not any(isinstance(c, _FreezeSurvivors) for c in gc.callbacks):
        gc.callbacks.append(_FreezeSurvivors(reclaim_seconds))
    gc.freeze()
