"""How a table query's batches and commits are sequenced: `BatchGate` lets a query stop between batches,
`CommitQueue` commits staged appends in order on a thread of their own while the next batch runs."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

log = logging.getLogger(__name__)


class BatchGate:
    """Lets a query's batches through until it is closed; closing waits for the batch under way.

    A query's batches run back to back while it is behind, so there is no moment between them to stop
    it in; stopping one mid-batch interrupts its Spark jobs (safe, but logged as errors with stack
    traces). Once closed, a batch that starts is skipped: its records are read again by the table's
    next query, which starts from the offsets committed to floe, not from Spark's checkpoint."""

    def __init__(self) -> None:
        self._state = threading.Condition()
        self._closed = False
        self._inside = False

    def enter(self) -> bool:
        """Whether a batch may run (then `leave` when it ends)."""
        with self._state:
            if self._closed:
                return False
            self._inside = True
            return True

    def leave(self) -> None:
        with self._state:
            self._inside = False
            self._state.notify_all()

    def close(self, timeout: float) -> bool:
        """Let no further batch through; False when the batch under way still runs after `timeout` s."""
        with self._state:
            self._closed = True
            return self._state.wait_for(lambda: not self._inside, timeout)


class CommitFailed(RuntimeError):
    """An earlier batch's commit failed: the query stops, and its next one restarts from floe's offsets."""


class CommitQueue:
    """A table query's staged appends, committed one at a time, in batch order, on a thread of their
    own: the query's next batch is planned and written while the last one commits (~0.1 s through floe,
    which the executors spent idle). After a failed commit none of the later ones runs (their files are
    discarded), and the failure ends the query at its next batch or the service's next look; the next
    query starts from the offsets committed to floe, so nothing is lost or written twice."""

    def __init__(self) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="floe-commit")
        self._last: Future[None] | None = None
        self.error: BaseException | None = None
        # Where the last queued commit leaves the table: the next batch starts there.
        self.end_offsets: dict[int, int] = {}

    def submit(
        self, commit: Callable[[], object], discard: Callable[[], object], end: Mapping[int, int]
    ) -> None:
        """Queue `commit` (`discard` instead, when an earlier one failed)."""

        def run() -> None:
            if self.error is not None:
                try:
                    discard()
                except Exception as exc:  # the files are left for maintenance's orphan removal
                    log.warning("cannot discard the files of a commit skipped after a failure: %s", exc)
                return
            try:
                commit()
            except BaseException as exc:
                self.error = exc
                log.warning("a commit failed; the table's ingestion restarts from floe's offsets: %s", exc)

        # Merged: an earlier commit still queued may hold partitions this batch did not read.
        self.end_offsets = {**self.end_offsets, **end}
        self._last = self._executor.submit(run)

    def drain(self, timeout: float | None = None) -> bool:
        """Wait for the queued commits to end; False when one still runs after `timeout` seconds."""
        last = self._last
        if last is None:
            return True
        try:
            last.result(timeout)
        except FutureTimeout:
            return False
        return True

    def close(self) -> None:
        """Let the commit thread end once the queued commits have run (the query is gone)."""
        self._executor.shutdown(wait=False)

    def check(self) -> None:
        """Raise CommitFailed when a queued commit failed."""
        if self.error is not None:
            raise CommitFailed(f"an earlier batch's commit failed: {self.error}") from self.error
