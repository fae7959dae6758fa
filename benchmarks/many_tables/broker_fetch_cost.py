"""`python -m benchmarks.many_tables.broker_fetch_cost`: what the shared consumer's fetches cost the Kafka
broker at many quiet partitions, by fetch setting, beside the producer's own cost.

In the 1,000-table runs of `python -m benchmarks.many_tables` the broker took 0.55-0.71 of the machine's
two cores, as much as ingestion. This separates it: one local broker (`devtools.kafka_broker`) with
`--topics` one-partition topics, one record a second to each spread over the second
(`quiet_producer.QuietProducer`, as the main benchmark sends them), then a librdkafka consumer assigned
every partition and consuming as the shared consumer does (`consume(10_000, 0.2)` in a loop), with each
fetch setting in turn, `--rounds` rounds alternating the order. Measured over `--window` seconds each: the
broker's CPU and this process's (producer and consumer). A row's broker CPU minus the producer-only
row's is what that consumer costs the broker.

Results: benchmarks/results/many-tables-broker-fetch-cost.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil  # type: ignore[import-untyped]

from benchmarks.many_tables.__main__ import RESULTS, git_commit, write_markdown
from benchmarks.many_tables.quiet_producer import QuietProducer
from devtools.kafka_broker import LocalKafka
from ingest.shared.consumer import FETCH_BATCHING

SETTINGS: dict[str, dict[str, Any]] = {
    "floe's (fetch.min.bytes 1 MiB, fetch.wait.max.ms 500)": dict(FETCH_BATCHING),
    "librdkafka's defaults (1 byte, 500 ms)": {},
    "64 KiB, 500 ms": {"fetch.min.bytes": 64 * 1024, "fetch.wait.max.ms": 500},
    "1 MiB, 100 ms": {"fetch.min.bytes": 1024 * 1024, "fetch.wait.max.ms": 100},
}
PRODUCER_ONLY = "no consumer (the producer alone)"


def _cores(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def measure(broker: psutil.Process, seconds: float) -> tuple[float, float]:
    """The broker's and this process's CPU (cores) over the next `seconds`."""
    me = psutil.Process()
    b, m, began = _cores(broker), _cores(me), time.monotonic()
    time.sleep(seconds)
    took = time.monotonic() - began
    return (_cores(broker) - b) / took, (_cores(me) - m) / took


def with_consumer(
    bootstrap: str, topics: list[str], setting: dict[str, Any], run: Callable[[], tuple[float, float]]
) -> tuple[float, float]:
    from confluent_kafka import Consumer, TopicPartition

    stop = threading.Event()

    def consume() -> None:
        config = {
            **setting,
            "bootstrap.servers": bootstrap,
            "group.id": "fetch-cost",
            "enable.auto.commit": False,
        }
        consumer = Consumer(config)
        consumer.assign([TopicPartition(t, 0, -1) for t in topics])  # from the end: no backlog to read
        while not stop.is_set():
            consumer.consume(10_000, 0.2)
        consumer.close()

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    try:
        time.sleep(10)  # assigned, fetching
        return run()
    finally:
        stop.set()
        thread.join(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--window", type=float, default=30.0)
    args = parser.parse_args()
    from confluent_kafka.admin import AdminClient, NewTopic

    found: dict[str, list[tuple[float, float]]] = {}
    started = time.time()
    with (
        tempfile.TemporaryDirectory(prefix="floe-fetch-cost-") as folder,
        LocalKafka(data_dir=Path(folder) / "kafka", heap="1g") as kafka,
    ):
        assert kafka.process is not None
        admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
        topics = [f"t{i:04d}" for i in range(args.topics)]
        for i in range(0, len(topics), 200):
            for future in admin.create_topics([NewTopic(t, 1, 1) for t in topics[i : i + 200]]).values():
                future.result(60)
        broker = psutil.Process(kafka.process.pid)
        time.sleep(60)  # the broker settles after creating the topics (its CPU is back to ~0)
        idle = measure(broker, args.window)
        producer = QuietProducer(kafka.bootstrap_servers, topics, "spread")
        producer.start()
        time.sleep(10)
        names = [PRODUCER_ONLY, *SETTINGS]
        for index in range(args.rounds):
            for name in names if index % 2 == 0 else reversed(names):
                if name == PRODUCER_ONLY:
                    found.setdefault(name, []).append(measure(broker, args.window))
                    continue
                cores = with_consumer(
                    kafka.bootstrap_servers, topics, SETTINGS[name], lambda: measure(broker, args.window)
                )
                found.setdefault(name, []).append(cores)
        producer.stop()
    report(found, idle, args, started)


def report(
    found: dict[str, list[tuple[float, float]]],
    idle: tuple[float, float],
    args: argparse.Namespace,
    started: float,
) -> None:
    name = "many-tables-broker-fetch-cost"
    RESULTS.mkdir(parents=True, exist_ok=True)
    rows = {
        k: {"broker_cores": [round(b, 2) for b, _ in v], "client_cores": [round(c, 2) for _, c in v]}
        for k, v in found.items()
    }
    (RESULTS / f"{name}.json").write_text(
        json.dumps({"idle_broker_cores": round(idle[0], 2), "rows": rows}, indent=2) + "\n"
    )
    lines = [
        "# Many tables: what a consumer of many quiet partitions costs the Kafka broker, by fetch setting",
        "",
        f"Generated by `python -m benchmarks.many_tables.broker_fetch_cost` on "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} at git commit `{git_commit()}` "
        f"({time.time() - started:.0f} s in all): one local broker, {args.topics:,} one-partition "
        f"topics, one record a second to each spread over the second; then a consumer of every partition "
        f"with each fetch setting, {args.rounds} rounds alternating the order, {args.window:.0f} s "
        f"measured each. The broker idle with the topics: {idle[0]:.2f} cores.",
        "",
        "| consumer | broker CPU (median; each round) | producer + consumer CPU (median; each round) |",
        "|---|---:|---:|",
    ]
    for row, values in found.items():
        brokers, clients = [b for b, _ in values], [c for _, c in values]
        lines.append(
            f"| {row} | {statistics.median(brokers):.2f} ({', '.join(f'{b:.2f}' for b in brokers)}) "
            f"| {statistics.median(clients):.2f} ({', '.join(f'{c:.2f}' for c in clients)}) |"
        )
    write_markdown(name, lines)


if __name__ == "__main__":
    main()
