"""A table's query is stopped between batches when its settings change (`wait_between_batches`)."""

from __future__ import annotations

import time
from typing import Any

from ingest.service import wait_between_batches


class _Query:
    """The two attributes of a StreamingQuery the wait reads; in a batch for the first `busy` polls."""

    def __init__(self, busy: int, *, active: bool = True) -> None:
        self.polls = 0
        self.busy = busy
        self.isActive = active

    @property
    def status(self) -> dict[str, Any]:
        self.polls += 1
        return {"isTriggerActive": self.polls <= self.busy, "message": "Processing new data"}


def test_waits_until_the_running_batch_ends() -> None:
    query = _Query(busy=3)
    assert wait_between_batches(query, timeout=5, poll=0.01)
    assert query.polls == 4


def test_gives_up_after_the_timeout_on_a_batch_that_does_not_end() -> None:
    query = _Query(busy=10**9)
    started = time.monotonic()
    assert not wait_between_batches(query, timeout=0.1, poll=0.01)
    assert 0.1 <= time.monotonic() - started < 2


def test_a_stopped_or_failing_query_is_not_waited_for() -> None:
    assert wait_between_batches(_Query(busy=10**9, active=False), timeout=5)

    class Failing(_Query):
        @property
        def status(self) -> dict[str, Any]:
            raise RuntimeError("py4j: the query's JVM side is gone")

    assert wait_between_batches(Failing(busy=1), timeout=5)
