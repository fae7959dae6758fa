"""The local Kafka broker (devtools/kafka_broker.py): real Kafka, restarts keep data, `floe dev kafka`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from devtools.kafka_broker import LocalKafka
from devtools.ports import free_port

# A real Kafka broker (JVM): `pytest -m "not e2e"` skips them.
pytestmark = pytest.mark.e2e

Record = tuple[int, bytes, bytes]  # (partition, key, value)


def _produce(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    failures: list[str] = []

    def delivered(error: object, message: Message) -> None:
        if error is not None:
            failures.append(str(error))

    for number in range(count):
        producer.produce(
            topic, key=f"key-{number}".encode(), value=f"value-{number}".encode(), on_delivery=delivered
        )
    assert producer.flush(60) == 0, "records still undelivered after 60 s"
    assert failures == []


def _consume(bootstrap: str, topic: str, count: int, group: str, *, commit: bool = False) -> list[Record]:
    """Read `count` records from the start of `topic` (waits up to 90 s for them)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    records: list[Record] = []
    deadline = time.monotonic() + 90
    try:
        while len(records) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error() is not None:
                raise KafkaException(message.error())
            key, value, partition = message.key(), message.value(), message.partition()
            assert key is not None
            assert value is not None
            assert partition is not None
            records.append((partition, key, value))
        if commit:
            consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return records


def _expected(count: int) -> set[tuple[bytes, bytes]]:
    return {(f"key-{n}".encode(), f"value-{n}".encode()) for n in range(count)}


def _topic() -> str:
    return f"floe-test-{uuid.uuid4().hex[:8]}"


def test_produce_consume_round_trip_on_three_partitions(kafka: LocalKafka) -> None:
    topic = _topic()
    kafka.create_topic(topic, 3)
    metadata = kafka.admin_client().list_topics(topic=topic, timeout=30)
    assert sorted(metadata.topics[topic].partitions) == [0, 1, 2]

    _produce(kafka.bootstrap_servers, topic, 60)
    records = _consume(kafka.bootstrap_servers, topic, 60, group=f"g-{topic}")

    assert len(records) == 60
    assert {(key, value) for _, key, value in records} == _expected(60)
    # Keys are hashed over all three partitions, and each partition keeps its production order.
    assert {partition for partition, _, _ in records} == {0, 1, 2}
    for partition in range(3):
        numbers = [int(value.split(b"-")[1]) for p, _, value in records if p == partition]
        assert numbers == sorted(numbers)


def test_topics_are_created_on_first_use(kafka: LocalKafka) -> None:
    topic = _topic()
    _produce(kafka.bootstrap_servers, topic, 3)
    metadata = kafka.admin_client().list_topics(topic=topic, timeout=30)
    assert len(metadata.topics[topic].partitions) == kafka.partitions_default
    assert {(k, v) for _, k, v in _consume(kafka.bootstrap_servers, topic, 3, group=f"g-{topic}")} == (
        _expected(3)
    )


def test_create_topic_exist_ok(kafka: LocalKafka) -> None:
    topic = _topic()
    kafka.create_topic(topic, 2)
    kafka.create_topic(topic, 2, exist_ok=True)
    with pytest.raises(KafkaException, match="already exists"):
        kafka.create_topic(topic, 2)


def test_restart_on_the_same_data_dir_keeps_records_and_offsets(tmp_path: Path) -> None:
    data_dir = tmp_path / "kafka"
    topic, group = _topic(), "restart-group"
    with LocalKafka(data_dir=data_dir, partitions_default=2) as first:
        first.create_topic(topic, 3)
        _produce(first.bootstrap_servers, topic, 30)
        # A group commits its position; a topic is auto-created with partitions_default=2.
        assert len(_consume(first.bootstrap_servers, topic, 30, group, commit=True)) == 30
        _produce(first.bootstrap_servers, f"{topic}-auto", 1)
        cluster_id = (data_dir / "data" / "meta.properties").read_text()
    assert not first.running

    # A new broker object (and new ports) on the same directory: the storage is reused, not reformatted.
    with LocalKafka(data_dir=data_dir) as second:
        assert (data_dir / "data" / "meta.properties").read_text() == cluster_id
        records = _consume(second.bootstrap_servers, topic, 30, group=f"fresh-{topic}")
        assert {(key, value) for _, key, value in records} == _expected(30)

        consumer = Consumer({"bootstrap.servers": second.bootstrap_servers, "group.id": group})
        try:
            committed = consumer.committed([TopicPartition(topic, p) for p in range(3)], timeout=30)
        finally:
            consumer.close()
        assert sum(tp.offset for tp in committed) == 30

        # The auto-created topic kept the first run's partitions_default.
        metadata = second.admin_client().list_topics(topic=f"{topic}-auto", timeout=30)
        assert len(metadata.topics[f"{topic}-auto"].partitions) == 2


def test_a_busy_port_is_a_clear_error(kafka: LocalKafka, tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match=f"Port {kafka.port} on 127.0.0.1 is already in use"):
        LocalKafka(port=kafka.port, data_dir=tmp_path / "kafka").start()


def test_floe_dev_kafka_runs_in_the_foreground_until_ctrl_c(tmp_path: Path) -> None:
    port = free_port()
    data_dir = tmp_path / "kafka"
    command = "from floe.cli.dev import kafka_command; kafka_command()"
    process = subprocess.Popen(
        [sys.executable, "-c", command, "--port", str(port), "--dir", str(data_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "COLUMNS": "200"},
    )
    output = process.stdout
    assert output is not None
    lines: list[str] = []

    def read_output() -> None:
        for line in output:
            lines.append(line.decode())

    reader = threading.Thread(target=read_output, daemon=True)
    reader.start()
    try:
        # Ready once it prints where it listens (after its own probe answered).
        deadline = time.monotonic() + 180
        while not any(f"127.0.0.1:{port}" in line for line in lines):
            assert process.poll() is None, "".join(lines)
            assert time.monotonic() < deadline, f"floe dev kafka did not start within 180 s: {lines}"
            time.sleep(0.2)
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
        assert 1 in admin.list_topics(timeout=30).brokers

        process.send_signal(signal.SIGINT)
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    reader.join(timeout=10)
    text = "".join(lines)
    assert process.returncode == 0, text
    assert "Kafka stopped." in text
    assert (data_dir / "server.log").exists()
    assert (data_dir / "data" / "meta.properties").exists()
    # The broker JVM went down with it: its port is free again.
    with pytest.raises(KafkaException):
        AdminClient({"bootstrap.servers": f"127.0.0.1:{port}", "log_level": 0}).list_topics(timeout=3)
