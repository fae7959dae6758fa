"""The shared consumer's partition assignment when one metadata answer lacks a topic it reads.

librdkafka's metadata answer is the input; a broker cannot be made to leave an existing topic out of one
answer on demand, so the answers are given here (`Answers`), and the consumer's assignment calls recorded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ingest.shared.consumer import SharedIngest
from ingest.shared.tables import SharedTable
from tests.ingest_tables import json_table


@dataclass
class TopicAnswer:
    partitions: dict[int, object]
    error: object | None = None


@dataclass
class Answers:
    """What `list_topics` answers, one answer per call; the assignment calls made."""

    answers: list[dict[str, TopicAnswer]]
    assigned: list[list[tuple[str, int, int]]] = field(default_factory=list)
    unassigned: list[list[tuple[str, int]]] = field(default_factory=list)

    def list_topics(self, timeout: float) -> Any:
        return type("Metadata", (), {"topics": self.answers.pop(0)})()

    def incremental_assign(self, partitions: list[Any]) -> None:
        self.assigned.append([(p.topic, p.partition, p.offset) for p in partitions])

    def incremental_unassign(self, partitions: list[Any]) -> None:
        self.unassigned.append([(p.topic, p.partition) for p in partitions])


def _consumer(topic: str) -> SharedIngest:
    table = json_table("t", cluster="c", topic=topic)
    unused: Any = None  # no record is committed: the appenders and floe's client are never called
    consumer = SharedIngest(
        "c",
        {},
        unused,
        lambda t: SharedTable(t, unused, unused, {0: 7, 1: 3}, dict),
        lambda t, result: None,
        lambda t: 1.0,
        lambda warehouse: warehouse,
    )
    consumer.set_tables([table])
    return consumer


def test_a_topic_left_out_of_one_answer_keeps_its_partitions_and_is_looked_for_again() -> None:
    both = {"events": TopicAnswer({0: object(), 1: object()})}
    answers = Answers([both, {}, {"events": TopicAnswer({}, error="LEADER_NOT_AVAILABLE")}, both])
    consumer = _consumer("events")
    assert consumer._reconcile(answers) == []
    assert answers.assigned == [[("events", 0, 7), ("events", 1, 3)]]  # from floe's offsets
    # Left out, then answered with an error: still read where it was (assigned again from floe's
    # offsets, its buffered records would be read twice), and reported missing for an early look.
    assert consumer._reconcile(answers) == ["events"]
    assert consumer._reconcile(answers) == ["events"]
    assert consumer._reconcile(answers) == []
    assert answers.unassigned == []
    assert len(answers.assigned) == 1
    assert consumer.assigned_partitions() == {"events": [0, 1]}


def test_a_topic_not_there_yet_is_looked_for_again_within_seconds_then_a_minute() -> None:
    consumer = _consumer("later")
    answers = Answers([{}] * 8 + [{"later": TopicAnswer({0: object()})}])
    waits = []
    for _ in range(8):
        missing = consumer._reconcile(answers)
        waits.append(60.0 - consumer._missing_topics_wait(missing))
    assert waits == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 32.0, 32.0]
    assert answers.assigned == []
    assert consumer._missing_topics_wait(consumer._reconcile(answers)) == 0.0  # found: a minute again
    assert answers.assigned == [[("later", 0, 7)]]  # from floe's offsets


def test_only_a_change_to_a_table_that_may_be_in_flight_waits_for_the_transactions() -> None:
    """The minute's look for new partitions and a table added on a topic of its own reconcile without
    waiting for the transactions in flight (at a thousand tables that wait stalled every table for
    seconds); closing a table, reopening a changed one, or opening one on a topic an open table reads
    (which rewinds that topic) waits."""
    import dataclasses

    both = {"events": TopicAnswer({0: object(), 1: object()})}
    consumer = _consumer("events")
    consumer._reconcile(Answers([both]))
    waits = consumer._waits_for_in_flight
    assert not waits(consumer._wanted_now())
    [shared] = consumer.tables.values()
    table = shared.table
    consumer.set_tables([table, json_table("u", cluster="c", topic="other")])
    assert not waits(consumer._wanted_now())  # added, on a topic of its own
    consumer.set_tables([table, json_table("u", cluster="c", topic="events")])
    assert waits(consumer._wanted_now())  # added, on the open table's topic
    consumer.set_tables([dataclasses.replace(table, fingerprint="changed")])
    assert waits(consumer._wanted_now())  # its settings changed
    consumer.set_tables([])
    assert waits(consumer._wanted_now())  # it left
    consumer.set_tables([table])
    assert not waits(consumer._wanted_now())


def test_the_metadata_asked_for_off_the_loop_is_reconciled_when_it_lands() -> None:
    """The loop asks for the cluster's metadata on a thread of its own (at 1,000 topics the answer kept
    every table waiting for seconds) and reconciles with the answer; a failed lookup is tried again in
    RECONCILE_RETRY_SECONDS, after the tables are opened, as when the loop asked for it itself."""
    import time
    from concurrent.futures import Future

    from ingest.shared.consumer import PARTITIONS_REFRESH_SECONDS, RECONCILE_RETRY_SECONDS

    consumer = _consumer("events")
    answers = Answers([])
    landed: Future[Any] = Future()
    landed.set_result(type("Metadata", (), {"topics": {"events": TopicAnswer({0: object()})}})())
    before = time.monotonic()
    refreshed = consumer._reconcile_with(answers, landed)
    assert before <= refreshed <= time.monotonic()  # a minute until the next
    assert answers.assigned == [[("events", 0, 7)]]
    failed: Future[Any] = Future()
    failed.set_exception(RuntimeError("cluster unreachable"))
    refreshed = consumer._reconcile_with(answers, failed)
    retry_in = refreshed + PARTITIONS_REFRESH_SECONDS - time.monotonic()
    assert RECONCILE_RETRY_SECONDS - 1 < retry_in <= RECONCILE_RETRY_SECONDS
    assert answers.assigned == [[("events", 0, 7)]]  # nothing changed
    # A failed lookup still lets each table open first (and report its own cluster's refusal).
    fresh = _consumer("events")
    fresh._reconcile_with(answers, failed)
    assert len(fresh.tables) == 1
