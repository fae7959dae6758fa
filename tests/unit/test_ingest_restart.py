"""A table's query is stopped between batches when its settings change (`BatchGate`): closing the gate
lets no further batch start and waits for the one under way."""

from __future__ import annotations

import threading
import time

from ingest.batches import BatchGate


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
