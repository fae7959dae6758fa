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


def _reconcile(consumer: SharedIngest, answers: Answers) -> list[str]:
    """A reconcile of the wanted tables with the next of `answers` as the lookup's metadata."""
    return consumer._reconcile(answers, consumer._wanted_now(), lambda: answers.list_topics(timeout=10))


def test_a_topic_left_out_of_one_answer_keeps_its_partitions_and_is_looked_for_again() -> None:
    both = {"events": TopicAnswer({0: object(), 1: object()})}
    answers = Answers([both, {}, {"events": TopicAnswer({}, error="LEADER_NOT_AVAILABLE")}, both])
    consumer = _consumer("events")
    assert _reconcile(consumer, answers) == []
    assert answers.assigned == [[("events", 0, 7), ("events", 1, 3)]]  # from floe's offsets
    # Left out, then answered with an error: still read where it was (assigned again from floe's
    # offsets, its buffered records would be read twice), and reported missing for an early look.
    assert _reconcile(consumer, answers) == ["events"]
    assert _reconcile(consumer, answers) == ["events"]
    assert _reconcile(consumer, answers) == []
    assert answers.unassigned == []
    assert len(answers.assigned) == 1
    assert consumer.assigned_partitions() == {"events": [0, 1]}


def test_a_topic_not_there_yet_is_looked_for_again_within_seconds_then_a_minute() -> None:
    consumer = _consumer("later")
    answers = Answers([{}] * 8 + [{"later": TopicAnswer({0: object()})}])
    waits = []
    for _ in range(8):
        missing = _reconcile(consumer, answers)
        waits.append(60.0 - consumer._missing_topics_wait(missing))
    assert waits == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 32.0, 32.0]
    assert answers.assigned == []
    assert consumer._missing_topics_wait(_reconcile(consumer, answers)) == 0.0  # found: a minute again
    assert answers.assigned == [[("later", 0, 7)]]  # from floe's offsets


def test_only_a_change_to_a_table_that_may_be_in_flight_waits_for_the_transactions() -> None:
    """The minute's look for new partitions and a table added on a topic of its own reconcile without
    waiting for the transactions in flight (at a thousand tables that wait stalled every table for
    seconds); closing a table, reopening a changed one, or opening one on a topic an open table reads
    (which rewinds that topic) waits."""
    import dataclasses

    both = {"events": TopicAnswer({0: object(), 1: object()})}
    consumer = _consumer("events")
    _reconcile(consumer, Answers([both]))
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


class _Client:
    """A stand-in for confluent_kafka.Consumer that records which thread calls which of its methods."""

    made: list[_Client] = []

    def __init__(self, config: dict[str, Any]) -> None:
        self.calls: list[tuple[str, str]] = []
        self.assigned: list[str] = []
        _Client.made.append(self)

    def _call(self, name: str) -> None:
        import threading

        self.calls.append((name, threading.current_thread().name))

    def consume(self, num_messages: int, timeout: float) -> list[Any]:
        import time

        self._call("consume")
        time.sleep(timeout)
        return []

    def list_topics(self, timeout: float) -> Any:
        self._call("list_topics")
        every_topic = type("Topics", (), {"get": lambda self, topic: TopicAnswer({0: object()})})()
        return type("Metadata", (), {"topics": every_topic})()

    def incremental_assign(self, partitions: list[Any]) -> None:
        self._call("incremental_assign")
        self.assigned += [p.topic for p in partitions]

    def incremental_unassign(self, partitions: list[Any]) -> None:
        self._call("incremental_unassign")

    def close(self) -> None:
        self._call("close")


def test_the_metadata_lookup_never_calls_into_the_polling_consumer(monkeypatch: Any) -> None:
    """confluent-kafka lets one call at a time into a client: a lookup on the consumer itself, from
    another thread, waited for ever behind the loop's back-to-back polls, and a table added to a running
    consumer never got its partitions. The lookup has a client of its own, each used by one thread."""
    import time

    import confluent_kafka

    _Client.made.clear()
    monkeypatch.setattr(confluent_kafka, "Consumer", _Client)
    consumer = _consumer("events")
    consumer.start()
    try:
        assert consumer.assigned.wait(10)
        consumer.set_tables(
            [json_table("t", cluster="c", topic="events"), json_table("u", cluster="c", topic="more")]
        )
        deadline = time.monotonic() + 10
        while "more" not in [t for c in _Client.made for t in c.assigned] and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        consumer.stop()
    polling = [c for c in _Client.made if any(name == "consume" for name, _ in c.calls)]
    assert len(polling) == 1
    assert polling[0].assigned == ["events", "more"]
    assert not any(name == "list_topics" for name, _ in polling[0].calls)
    assert len(_Client.made) == 2
    for client in _Client.made:  # closed by the loop once its lookup is done: used by one thread at a time
        assert len({thread for name, thread in client.calls if name != "close"}) == 1, client.calls
