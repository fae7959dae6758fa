"""`catch_up_due`: when a shared-consumer table's batch is due while the consumer is behind its topic."""

from __future__ import annotations

from ingest.shared.catch_up import CATCH_UP_STRETCH, catch_up_due


def test_before_its_interval_a_table_is_never_due() -> None:
    assert not catch_up_due(waited=1.9, interval=2.0, buffered=2_000, unread=0)
    assert not catch_up_due(waited=1.9, interval=2.0, buffered=2_000, unread=10**9)


def test_caught_up_or_a_few_seconds_behind_a_table_is_due_at_its_interval() -> None:
    # What librdkafka fetched but has not handed over yet (a poll's worth) is less than the batch.
    assert catch_up_due(waited=2.0, interval=2.0, buffered=2_000, unread=150)
    # A lag of a few intervals (a loaded node): a longer batch would only delay records already late.
    assert catch_up_due(waited=2.0, interval=2.0, buffered=2_000, unread=6_000)
    assert catch_up_due(waited=2.0, interval=2.0, buffered=2_000, unread=int(2_000 * CATCH_UP_STRETCH))
    # Nothing buffered counts as a record a second, never a division by zero.
    assert catch_up_due(waited=2.0, interval=2.0, buffered=0, unread=5)


def test_behind_its_topic_by_a_backlog_a_table_fills_a_longer_batch() -> None:
    # More waits in the topic than the table would read in CATCH_UP_STRETCH intervals at its rate.
    just_past = int(2_000 * CATCH_UP_STRETCH) + 1
    assert not catch_up_due(waited=2.0, interval=2.0, buffered=2_000, unread=just_past)
    assert not catch_up_due(waited=2.0, interval=2.0, buffered=2_000, unread=2_000_000)
    assert not catch_up_due(waited=9.9, interval=2.0, buffered=9_900, unread=2_000_000)
    # The same backlog at a slower rate is fewer intervals behind: due.
    assert catch_up_due(waited=4.0, interval=2.0, buffered=2_000_000, unread=2_000_000)


def test_the_longer_batch_is_bounded() -> None:
    bound = 2.0 * CATCH_UP_STRETCH
    assert catch_up_due(waited=bound, interval=2.0, buffered=10_000, unread=2_000_000)
    assert catch_up_due(waited=bound + 30, interval=2.0, buffered=10_000, unread=2_000_000)
