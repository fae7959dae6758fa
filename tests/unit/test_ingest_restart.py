"""A table's query is stopped between batches when its settings change (`BatchGate`): closing the gate
lets no further batch start and waits for the one under way. Its staged appends commit in order on a
thread of their own (`CommitQueue`), and a failed one stops the ones after it."""

from __future__ import annotations

import functools
import threading
import time

import pytest

from ingest.batch_flow import BatchGate, CommitFailed, CommitQueue


def test_closing_waits_until_the_running_batch_ends() -> None:
    gate = BatchGate()
    assert gate.enter()
    ended = threading.Event()

    def batch() -> None:
        time.sleep(0.2)
        ended.set()
        gate.leave()

    threading.Thread(target=batch).start()
    assert gate.close(timeout=5)
    assert ended.is_set()


def test_a_closed_gate_lets_no_batch_start() -> None:
    gate = BatchGate()
    assert gate.close(timeout=0)  # nothing under way
    assert not gate.enter()


def test_gives_up_after_the_timeout_on_a_batch_that_does_not_end() -> None:
    gate = BatchGate()
    assert gate.enter()
    started = time.monotonic()
    assert not gate.close(timeout=0.1)
    assert 0.1 <= time.monotonic() - started < 2
    assert not gate.enter()  # still closed for the batches after it


def test_batches_pass_one_after_another_while_open() -> None:
    gate = BatchGate()
    for _ in range(3):
        assert gate.enter()
        gate.leave()
    assert gate.close(timeout=0)


# -- CommitQueue: a batch's commit runs while the next batch is written ---------------------------------


def test_commits_run_in_order_on_their_own_thread() -> None:
    queue = CommitQueue()
    done: list[int] = []
    caller = threading.get_ident()
    threads: set[int] = set()

    def commit(n: int) -> None:
        time.sleep(0.05)
        threads.add(threading.get_ident())
        done.append(n)

    for n in range(5):
        queue.submit(functools.partial(commit, n), lambda: None, {0: (n + 1) * 10})
    assert queue.end_offsets == {0: 50}  # where the next batch starts, before any commit ended
    assert queue.drain(timeout=5)
    assert done == [0, 1, 2, 3, 4]
    assert caller not in threads
    queue.check()  # nothing failed


def test_after_a_failed_commit_the_later_ones_are_discarded_and_the_failure_is_raised() -> None:
    queue = CommitQueue()
    committed: list[int] = []
    discarded: list[int] = []

    def fail() -> None:
        raise RuntimeError("floe refused the offsets")

    queue.submit(lambda: committed.append(1), lambda: discarded.append(1), {0: 1})
    queue.submit(fail, lambda: discarded.append(2), {0: 2})
    queue.submit(lambda: committed.append(3), lambda: discarded.append(3), {0: 3})
    assert queue.drain(timeout=5)
    assert committed == [1]
    assert discarded == [3]  # a failed commit cleans up after itself (StagedAppend)
    with pytest.raises(CommitFailed, match="floe refused the offsets"):
        queue.check()


def test_draining_gives_up_after_the_timeout() -> None:
    queue = CommitQueue()
    release = threading.Event()
    queue.submit(release.wait, lambda: None, {})
    assert not queue.drain(timeout=0.1)
    release.set()
    assert queue.drain(timeout=5)


def test_closing_lets_the_queued_commits_run_and_then_ends_the_thread() -> None:
    queue = CommitQueue()
    done: list[int] = []
    release = threading.Event()
    queue.submit(release.wait, lambda: None, {0: 1})
    queue.submit(lambda: done.append(2), lambda: None, {0: 2})
    queue.close()
    release.set()
    assert queue.drain(timeout=5)
    assert done == [2]
    with pytest.raises(RuntimeError):  # nothing is queued after the query is gone
        queue.submit(lambda: None, lambda: None, {})
