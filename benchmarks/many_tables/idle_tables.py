"""`python -m benchmarks.many_tables.idle_tables`: what a table whose topic is idle costs `floe ingest`
(issue 31: "a table whose topic is idle costs next to nothing").

Each row: a fresh floe (PostgreSQL) and Kafka broker, one busy table (`--rate` records a second, spread
over the second) and `--idle` N more tables whose topics get no record, all inline JSON on the shared
consumer; `floe ingest` started; once it has opened every table (its log says so for each) and the busy
table has rows, `--settle` seconds, then `--measure` seconds measured: `floe ingest`'s CPU and peak RSS
(Python and any JVM), floe's catalog with PostgreSQL, the broker, and the busy table's freshness (each
record: delivery confirmed → the first 0.25 s poll of floe's database showing its committed offset past
it). Rows alternate over `--rounds`, so the machine's drift falls on every row alike. An idle table's
cost is the difference between rows divided by the idle tables.

Results: benchmarks/results/NAME.{md,json} (default many-tables-idle).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.ingest.environment import apply_pipeline, environment
from benchmarks.many_tables.__main__ import (
    RESULTS,
    Offsets,
    floe_environment,
    git_commit,
    start_ingest,
    tree_rss,
    write_markdown,
)
from benchmarks.many_tables.freshness import p99
from benchmarks.many_tables.throughput import json_tables, value
from devtools.processes import stop_process

BUSY = "busy"


@dataclass
class Row:
    idle: int
    round: int
    opened_s: float | None = None  # every table opened and the busy one with rows, after start
    ingest_cores: float | None = None
    ingest_peak_rss_gib: float | None = None
    catalog_cores: float | None = None
    broker_cores: float | None = None
    other_cores: float | None = None
    records: int = 0
    freshness_p50_s: float | None = None
    freshness_p99_s: float | None = None
    notes: list[str] = field(default_factory=list)


class BusyProducer:
    """`rate` records a second to one topic, spread over each second; each record's delivery time by
    offset."""

    def __init__(self, bootstrap: str, topic: str, rate: int) -> None:
        from confluent_kafka import Producer

        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self.topic, self.rate = topic, rate
        self.delivered: dict[int, float] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, error: Any, message: Any) -> None:
        if error is None:
            self.delivered[message.offset()] = time.time()

    def _run(self) -> None:
        i, began = 0, time.monotonic()
        while not self.stop.is_set():
            self.producer.produce(self.topic, value=value(i), on_delivery=self._delivered)
            i += 1
            self.producer.poll(0)
            wait = began + i / self.rate - time.monotonic()
            if wait > 0:
                self.stop.wait(wait)
        self.producer.flush(30)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(60)


def _opened(log: Path) -> int:
    text = log.read_text(errors="replace") if log.exists() else ""
    return text.count("through the shared consumer every")


def run(idle: int, round_: int, work: Path, args: argparse.Namespace) -> Row:
    row = Row(idle, round_)
    with environment(work, kafka_heap="1g") as env:
        from confluent_kafka.admin import AdminClient, NewTopic

        topics = [BUSY, *(f"idle{i:04d}" for i in range(idle))]
        admin = AdminClient({"bootstrap.servers": env.kafka.bootstrap_servers})
        for i in range(0, len(topics), 200):  # a thousand in one request time out on this machine
            for future in admin.create_topics([NewTopic(t, 1, 1) for t in topics[i : i + 200]]).values():
                future.result(60)
        apply_pipeline(env.server, json_tables(env.kafka.bootstrap_servers, topics))
        offsets = Offsets(env.server.database_url or "")
        producer = BusyProducer(env.kafka.bootstrap_servers, BUSY, args.rate)
        producer.thread.start()
        log_path = work / "ingest.log"
        log = log_path.open("wb")
        process = start_ingest(work, floe_environment(env), log, "info")
        started = time.monotonic()
        sampler = env.sampler(None)
        sampler.groups["ingester"] = lambda: [process.pid]
        ages: list[float] = []
        window: tuple[float, float] | None = None
        next_offset, peak, polls = 0, 0, 0
        try:
            while True:
                now = time.time()
                committed = offsets.read().get(BUSY, 0)
                polls += 1
                if polls % 8 == 1:
                    sampler.sample()
                peak = max(peak, tree_rss(process.pid))
                while next_offset < committed:
                    delivered = producer.delivered.pop(next_offset, None)
                    if delivered is not None and window is not None and window[0] <= delivered <= window[1]:
                        ages.append(now - delivered)
                    next_offset += 1
                if window is None and committed > 0 and _opened(log_path) >= len(topics):
                    row.opened_s = round(time.monotonic() - started, 1)
                    window = (now + args.settle, now + args.settle + args.measure)
                if window is not None and now >= window[1] + 5:  # the window's last records committed
                    sampler.sample()
                    cores = sampler.cores(*window)
                    row.ingest_cores = cores.get("ingester")
                    row.catalog_cores = cores.get("catalog")
                    row.broker_cores = cores.get("broker")
                    row.other_cores = cores.get("other")
                    break
                if window is None and time.monotonic() - started > args.open_limit:
                    row.notes.append(f"{_opened(log_path)} of {len(topics)} tables opened after the limit")
                    break
                if process.poll() is not None:
                    row.notes.append(f"floe ingest exited with {process.returncode}")
                    break
                time.sleep(0.25)
        finally:
            producer.close()
            stop_process(process)  # SIGTERM, SIGKILL when it does not exit
            offsets.close()
            log.close()
    ages.sort()
    row.records = len(ages)
    if ages:
        row.freshness_p50_s = round(statistics.median(ages), 2)
        row.freshness_p99_s = round(p99(ages), 2)
    row.ingest_peak_rss_gib = round(peak / 2**30, 2)
    return row


def report(rows: list[Row], args: argparse.Namespace, started: float) -> None:
    commit = git_commit()
    lines = [
        "# Many tables: what an idle table costs `floe ingest`",
        "",
        f"Generated by `python -m benchmarks.many_tables.idle_tables --idle {args.idle} --rate {args.rate} "
        f"--settle {args.settle:g} --measure {args.measure:g} --rounds {args.rounds}` on "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} at git commit `{commit}` "
        f"({time.time() - started:.0f} s in all).",
        "",
        (__doc__ or "").split("\n\n")[1].replace("\n", " "),
        "",
        "| idle tables | round | all opened, busy table with rows | busy table freshness p50 / p99 (records) "
        "| ingestion CPU | ingestion peak RSS | catalog + PostgreSQL CPU | broker CPU | other load |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        fresh = f"{r.freshness_p50_s} / {r.freshness_p99_s} s ({r.records})" if r.records else "n/a"
        lines.append(
            f"| {r.idle:,} | {r.round} | {r.opened_s} s | {fresh} | {r.ingest_cores} | "
            f"{r.ingest_peak_rss_gib} GiB | {r.catalog_cores} | {r.broker_cores} | {r.other_cores} |"
        )
    notes = [f"- {r.idle} idle, round {r.round}: {n}" for r in rows for n in r.notes]
    if notes:
        lines += ["", "Notes:", "", *notes]
    write_markdown(args.name, lines)
    payload = {"commit": commit, "args": vars(args), "rows": [asdict(r) for r in rows]}
    (RESULTS / f"{args.name}.json").write_text(json.dumps(payload, indent=2) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--idle", default="0,999", help="idle tables beside the busy one, a row each")
    parser.add_argument("--rate", type=int, default=10, help="the busy table's records a second")
    parser.add_argument("--settle", type=float, default=30.0)
    parser.add_argument("--measure", type=float, default=120.0)
    parser.add_argument("--rounds", type=int, default=2, help="rows alternate, this many times each")
    parser.add_argument("--open-limit", type=float, default=300.0, help="seconds to open every table")
    parser.add_argument("--name", default="many-tables-idle")
    parser.add_argument("--work-dir", type=Path, default=None, help="Kafka's log and floe's warehouse")
    args = parser.parse_args()
    started = time.time()
    counts = [int(n) for n in args.idle.split(",") if n]
    rows: list[Row] = []
    for round_ in range(1, args.rounds + 1):
        order = counts if round_ % 2 else counts[::-1]
        for idle in order:
            print(f"== {idle} idle tables, round {round_}", flush=True)
            with tempfile.TemporaryDirectory(prefix="floe-idle-", dir=args.work_dir) as work:
                rows.append(run(idle, round_, Path(work), args))
            print(asdict(rows[-1]), flush=True)
            report(rows, args, started)


if __name__ == "__main__":
    main()
