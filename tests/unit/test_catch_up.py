"""`catch_up_due`: when a shared-consumer table's batch is due while the consumer is behind its topic."""

from __future__ import annotations

from ingest.shared.consumer import CATCH_UP_STRETCH, catch_up_due


def test_before_its_interval_a_table_is_never_due() -> None:
    assert not catch_up_due(waited=1.9, interval=2.0, buffered=2_000, unread=0)
    assert not catch_up_due(waited=1.9, interval=2.0, buffered=2_000, unread=10**9)


def test_caught_up_a_table_is_due_at_its_interval() -> None:
    # What librdkafka fetched but has not handed over yet (a poll's worth) is less than the batch.
    assert catch_up_due(waited=2.0, interval=2.0, buffered=2_000, unread=150)
    assert catch_up_due(waited=2.0, interval=2.0, buffered=2_000, unread=2_000)


def test_behind_its_topic_a_table_fills_a_longer_batch() -> None:
    # More is waiting in the topic than the table read in a whole interval: it is over an interval behind.
    assert not catch_up_due(waited=2.0, interval=2.0, buffered=2_000, unread=2_001)
    assert not catch_up_due(waited=9.9, interval=2.0, buffered=9_900, unread=2_000_000)


def test_the_longer_batch_is_bounded() -> None:
    bound = 2.0 * CATCH_UP_STRETCH
    assert catch_up_due(waited=bound, interval=2.0, buffered=10_000, unread=2_000_000)
    assert catch_up_due(waited=bound + 30, interval=2.0, buffered=10_000, unread=2_000_000)
