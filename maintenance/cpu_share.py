"""A maintenance worker's thread held to a share of one core, where niceness cannot order it.

`floe maintain` lowers its niceness (`floe.cli.services.lower_cpu_priority`), but `floe up` runs the
worker in threads of its own process, beside ingestion's. Lowering a thread that holds Python's GIL
would stall every ingestion thread waiting for it while the kernel runs other work, so it keeps its
priority and instead rests after each table: a visit that used `c` seconds of its thread's CPU is
followed by a wait that brings it to `c / share` seconds of wall time, leaving the rest to ingestion.
Only the visiting thread's CPU counts (`time.thread_time`): that is the Python work that takes the
GIL; Spark's jobs run in the JVM, in its own scheduler pool.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager


def rest_seconds(share: float, cpu_seconds: float, wall_seconds: float) -> float:
    """How long to rest after a visit so that it used at most `share` of a core over its wall time."""
    if not 0 < share < 1:
        return 0.0
    return max(0.0, cpu_seconds / share - wall_seconds)


@contextmanager
def held_to(share: float | None, stop: threading.Event) -> Iterator[None]:
    """Runs the block, then rests for `rest_seconds` of what it used (none with `share` None or ≥ 1),
    until `stop` is set at the latest."""
    cpu, wall = time.thread_time(), time.monotonic()
    yield
    if share is not None:
        stop.wait(rest_seconds(share, time.thread_time() - cpu, time.monotonic() - wall))


__all__ = ["held_to", "rest_seconds"]
