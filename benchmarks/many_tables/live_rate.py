"""`python -m benchmarks.many_tables.live_rate`: `floe ingest` under a steady produce rate, the rate spread
over many tables or sent to one, side by side in one run.

Each row: a fresh floe database (PostgreSQL), the tables applied, a producer in this process sending
`--rate` records a second in all (JSON values of ~200 bytes), then `floe ingest` started.
Rows: one table of `--partitions` partitions taking the whole rate, and `--tables` one-partition tables
taking an equal share each. Once every table has rows, `--settle` seconds pass, then `--measure` seconds
are measured:
- committed records/s: the tables' committed offsets (read from floe's database every 0.5 s) at the
  window's end minus at its start, over its length; and the records produced meanwhile (delivery
  confirmed), so a row that cannot keep up shows it, with its backlog at the end;
- freshness of a sample of the records (ten a second per partition): produce (delivery confirmed) →
  the first poll showing the partition's committed offset past it;
- CPU of `floe ingest`, of floe's catalog with PostgreSQL, of the broker, and of this process (the
  producer).
With `--maintain on` (or `off,on`: a row each) the long-running `floe maintain` runs beside ingestion
from its start, as an operator runs it on the same node (built-in policy: every table every 10 minutes,
at most 100 snapshots kept; niceness 10). Every row also reports each minute after the first rows:
records committed and produced, the backlog, CPU, and the maintenance visits that began in it.
Issue 31's target: 100 tables x 1,000 records/s reach ≥ 80 % of what one table of 100,000 records/s
reaches, with freshness p99 ≤ 10 s.
Results: benchmarks/results/NAME.{md,json} (default many-tables-live-rate).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import tempfile
import threading
import time
from collections import deque
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
)
from benchmarks.many_tables.freshness import p99
from benchmarks.many_tables.maintenance import start_worker
from benchmarks.many_tables.throughput import json_tables

SAMPLES_PER_SECOND = 10  # per partition: enough for a p99, few enough to keep in memory
MAINTAIN_NICE = 10


@dataclass
class Minute:
    """One minute after every table had rows."""

    minute: int
    committed_per_s: int
    produced_per_s: int
    backlog: int  # delivered but not committed at the minute's end
    ingest_cores: float | None
    catalog_cores: float | None
    maintainer_cores: float | None
    visits: int = 0  # maintenance visits that began in the minute
    snapshots_before: float | None = None  # their tables' snapshots before and after (mean)
    snapshots_after: float | None = None


@dataclass
class Row:
    tables: int
    partitions_per_topic: int
    offered_per_s: int
    first_rows_s: float | None = None  # floe ingest's start → every table has rows
    produced_per_s: float | None = None  # delivered within the window, per second
    committed_per_s: float | None = None  # committed within the window, per second
    backlog_at_end: int | None = None  # delivered but not committed at the window's end
    freshness_p50_s: float | None = None
    freshness_p99_s: float | None = None
    freshness_max_s: float | None = None
    samples: int = 0
    samples_missing: int = 0  # sampled records in the window not committed by the end
    ingest_cores: float | None = None
    ingest_peak_rss_gib: float | None = None
    catalog_cores: float | None = None
    broker_cores: float | None = None
    producer_cores: float | None = None
    other_cores: float | None = None
    maintainer_cores: float | None = None
    minutes: list[Minute] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    design: str = "current"  # or "before (<tree>)": `floe ingest` from an earlier tree (`--before`)
    producer: str = "batch"  # the producer's mode (`RateProducer`)


PRODUCER_MODES = ("batch", "each")


class RateProducer:
    """Sends `rate` records a second, round-robin over (topic, partition); records the delivery time and
    offset of every `every`-th record of each partition, in offset order.

    `mode` "each" calls librdkafka's `produce` once per record; "batch" hands each partition's records of a
    tick to `produce_batch` in one call. The producer stands in for applications that run elsewhere, but
    here it shares the 2 cores with what is measured. Without a broker "each" cost 5.7 µs a record and
    "batch" 2.1-2.5 µs, but beside one (librdkafka's own threads send the records) this process took 0.65
    against 0.58 cores at 100,000 records/s (`many-tables-live-rate-producer.md`)."""

    def __init__(self, bootstrap: str, pairs: list[tuple[str, int]], rate: int, mode: str = "batch") -> None:
        from confluent_kafka import Producer

        self.pairs = pairs
        self.rate = rate
        self.mode = mode
        per_partition = rate / len(pairs)
        self.every = max(1, int(per_partition // SAMPLES_PER_SECOND))
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "linger.ms": 20,
                "batch.size": 1_000_000,
                "queue.buffering.max.messages": 1_000_000,
            }
        )
        self.samples: dict[tuple[str, int], deque[tuple[int, float]]] = {p: deque() for p in pairs}
        self.skipped = 0  # records not sent because the producer fell over a second behind
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _sampled(self, error: Any, message: Any) -> None:
        if error is None:
            self.samples[(message.topic(), message.partition())].append((message.offset(), time.time()))

    def _run(self) -> None:
        sent = 0
        per_pair = [0] * len(self.pairs)
        # ~200-byte values, as the drain benchmark's; one send time per tick (at most 5 ms old), so
        # that a record costs the producer little more than librdkafka's own work.
        template = b'{"id":%d,"name":"' + b"x" * 150 + b'","sent_at":%d}'
        started = time.monotonic()
        while not self.stop.is_set():
            due = int((time.monotonic() - started) * self.rate) - self.skipped
            if due - sent > self.rate:
                # Over a second behind (the machine is short of CPU): skip what is late rather than
                # send it in a burst, so the offered rate stays steady; the row reports the skip.
                self.skipped += due - sent
                continue
            sent_at = int(time.time() * 1000)
            if self.mode == "batch":
                sent += self._send_batches(due - sent, sent % len(self.pairs), per_pair, template, sent_at)
            while sent < due:
                index = sent % len(self.pairs)
                topic, partition = self.pairs[index]
                n = per_pair[index]
                try:
                    self.producer.produce(
                        topic,
                        template % (n, sent_at),
                        partition=partition,
                        on_delivery=self._sampled if n % self.every == 0 else None,
                    )
                except BufferError:
                    self.producer.poll(0.05)
                    continue
                per_pair[index] = n + 1
                sent += 1
            self.producer.poll(0.005)
        self.producer.flush(30)

    def _send_batches(
        self, count: int, first: int, per_pair: list[int], template: bytes, sent_at: int
    ) -> int:
        """Send `count` records, round-robin from pair `first`, one `produce_batch` call per pair: how
        many were sent (the rest, refused by a full queue, are sent one by one after a wait)."""
        pairs = len(self.pairs)
        sent = 0
        for k in range(min(count, pairs)):
            index = (first + k) % pairs
            share = count // pairs + (1 if k < count % pairs else 0)
            topic, partition = self.pairs[index]
            n = per_pair[index]
            messages: list[dict[str, Any]] = [{"value": template % (n + j, sent_at)} for j in range(share)]
            for j in range(-n % self.every, share, self.every):
                messages[j]["callback"] = self._sampled
            queued = self.producer.produce_batch(topic, messages, partition=partition)
            per_pair[index] = n + queued
            sent += queued
            if queued < share:  # the queue is full: the rest of the tick goes one by one
                self.producer.poll(0.05)
                break
        return sent

    def start(self) -> None:
        self.thread.start()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(60)


def run(
    tables: int,
    partitions: int,
    rate: int,
    work: Path,
    args: argparse.Namespace,
    tree: str | None = None,
    maintain: bool = False,
    producer_mode: str = "batch",
) -> Row:
    row = Row(tables, partitions, rate, producer=producer_mode)
    if tree is not None:
        row.design = f"before ({Path(tree).name})"
    if maintain:
        row.design += f" + floe maintain (nice {MAINTAIN_NICE})"
    with environment(work, kafka_heap="1g") as env:
        from confluent_kafka.admin import AdminClient, NewTopic

        topics = [f"t{i:04d}" for i in range(tables)]
        admin = AdminClient({"bootstrap.servers": env.kafka.bootstrap_servers})
        for future in admin.create_topics([NewTopic(t, partitions, 1) for t in topics]).values():
            future.result(60)
        apply_pipeline(env.server, json_tables(env.kafka.bootstrap_servers, topics))
        offsets = Offsets(env.server.database_url or "")
        pairs = [(t, p) for t in topics for p in range(partitions)]
        producer = RateProducer(env.kafka.bootstrap_servers, pairs, rate, producer_mode)
        # Delivered records are counted from the partitions' end offsets: a callback per record would
        # cost the producer more than the records.
        log = (work / "ingest.log").open("wb")
        producer.start()
        process = start_ingest(work, floe_environment(env), log, args.log_level, tree)
        started = time.monotonic()
        sampler = env.sampler(None)
        sampler.groups["ingester"] = lambda: [process.pid]
        worker_log = (work / "maintain.log").open("wb")
        worker = start_worker(floe_environment(env), worker_log, MAINTAIN_NICE) if maintain else None
        if worker is not None:
            sampler.groups["maintainer"] = lambda: [worker.pid]
        marks: list[tuple[float, int, int]] = []  # (time, committed, delivered) each minute from first rows
        peak = polls = 0
        ages: list[float] = []
        window: tuple[float, float] | None = None
        at_start: tuple[int, int] | None = None  # (committed, delivered) when the window opened
        try:
            while True:
                committed = offsets.read_all()
                polled = time.time()
                polls += 1
                if polls % 4 == 1:  # every 2 s: a sample walks /proc, which costs this process CPU
                    sampler.sample()
                peak = max(peak, tree_rss(process.pid))
                for (topic, partition), queue in producer.samples.items():
                    next_offset = committed.get((topic, partition), 0)
                    while queue and queue[0][0] < next_offset:
                        _, delivered_at = queue.popleft()
                        if window is not None and window[0] <= delivered_at <= window[1]:
                            ages.append(polled - delivered_at)
                with_rows = len({t for (t, _), o in committed.items() if o > 0})
                if row.first_rows_s is None and with_rows == tables:
                    row.first_rows_s = round(time.monotonic() - started, 1)
                    window = (polled + args.settle, polled + args.settle + args.measure)
                if window is not None and polled >= window[0] - args.settle + 60 * len(marks):
                    sampler.sample()
                    marks.append((polled, sum(committed.values()), end_offsets(admin, pairs)))
                if window is not None and at_start is None and polled >= window[0]:
                    at_start = (sum(committed.values()), end_offsets(admin, pairs))
                if window is not None and at_start is not None and polled >= window[1]:
                    total, delivered = sum(committed.values()), end_offsets(admin, pairs)
                    span = polled - window[0]
                    row.committed_per_s = round((total - at_start[0]) / span)
                    row.produced_per_s = round((delivered - at_start[1]) / span)
                    row.backlog_at_end = delivered - total
                    # Sampled records of the window still waiting (not yet committed) at its end.
                    row.samples_missing = sum(
                        1
                        for q in list(producer.samples.values())
                        for _, d in tuple(q)
                        if window[0] <= d <= window[1]
                    )
                    sampler.sample()
                    cores = sampler.cores(window[0], polled)
                    row.ingest_cores = cores.get("ingester")
                    row.catalog_cores = cores.get("catalog")
                    row.broker_cores = cores.get("broker")
                    row.producer_cores = cores.get("benchmark")  # this process: the producer and the polls
                    row.other_cores = cores.get("other")
                    row.maintainer_cores = cores.get("maintainer")
                    row.minutes = minutes(marks, sampler, offsets if maintain else None)
                    break
                if row.first_rows_s is None and time.monotonic() - started > args.first_rows_limit:
                    row.notes.append(f"only {with_rows} of {tables} tables had rows after the limit")
                    break
                if process.poll() is not None:
                    row.notes.append(f"floe ingest exited with {process.returncode}")
                    break
                if worker is not None and worker.poll() is not None:
                    row.notes.append(f"floe maintain exited with {worker.returncode}")
                    break
                time.sleep(0.5)
        finally:
            producer.close()
            if producer.skipped:
                row.notes.append(f"the producer fell behind and skipped {producer.skipped:,} records")
            for child in (process, worker):
                if child is None:
                    continue
                child.terminate()
                try:
                    child.wait(60)
                except subprocess.TimeoutExpired:
                    child.kill()
            offsets.close()
            log.close()
            worker_log.close()
        ages.sort()
        row.samples = len(ages)
        if ages:
            row.freshness_p50_s = round(statistics.median(ages), 2)
            row.freshness_p99_s = round(p99(ages), 2)
            row.freshness_max_s = round(ages[-1], 2)
        row.ingest_peak_rss_gib = round(peak / 2**30, 2)
    return row


def minutes(marks: list[tuple[float, int, int]], sampler: Any, offsets: Offsets | None) -> list[Minute]:
    """Each minute between `marks`: rates, backlog, CPU and (with `offsets`) maintenance visits."""
    visits: list[Any] = []
    if offsets is not None and marks:
        visits = offsets.fetch(
            "SELECT extract(epoch from started_at) AS began, before, after FROM maintenance_passes "
            "WHERE started_at >= to_timestamp($1)",
            marks[0][0],
        )
    result = []
    for index, ((t0, c0, d0), (t1, c1, d1)) in enumerate(itertools.pairwise(marks)):
        cores = sampler.cores(t0, t1)
        minute = Minute(
            index,
            round((c1 - c0) / (t1 - t0)),
            round((d1 - d0) / (t1 - t0)),
            d1 - c1,
            cores.get("ingester"),
            cores.get("catalog"),
            cores.get("maintainer"),
        )
        counts = [
            (_snapshots(v["before"]), _snapshots(v["after"])) for v in visits if t0 <= float(v["began"]) < t1
        ]
        minute.visits = len(counts)
        befores = [b for b, _ in counts if b is not None]
        afters = [a for _, a in counts if a is not None]
        minute.snapshots_before = round(statistics.mean(befores), 1) if befores else None
        minute.snapshots_after = round(statistics.mean(afters), 1) if afters else None
        result.append(minute)
    return result


def _snapshots(counts: Any) -> int | None:
    """The snapshot count in a maintenance pass's `before`/`after` column (JSON), if it has one."""
    if isinstance(counts, str):
        counts = json.loads(counts)
    value = counts.get("snapshots") if isinstance(counts, dict) else None
    return int(value) if isinstance(value, int) else None


def end_offsets(admin: Any, pairs: list[tuple[str, int]]) -> int:
    """Records the broker holds in `pairs` (the sum of their end offsets): what was delivered."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec

    latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
    request = {TopicPartition(t, p): latest for t, p in pairs}
    futures = admin.list_offsets(request)
    return sum(int(future.result(30).offset) for future in futures.values())


def report(rows: list[Row], args: argparse.Namespace, started: float) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.name}.json").write_text(json.dumps([asdict(r) for r in rows], indent=2) + "\n")
    paragraphs = (__doc__ or "").split("\n\n")
    lines = [
        "# Many tables: floe ingest under a steady produce rate, spread over many tables or in one",
        "",
        f"Generated by `python -m benchmarks.many_tables.live_rate --rate {args.rate} --tables "
        f"{args.tables} --settle {args.settle:g} --measure {args.measure:g} --rows {args.rows}"
        f"{' --before ' + Path(args.before).name if args.before else ''}"
        f"{' --maintain ' + args.maintain if args.maintain != 'off' else ''}"
        f"{' --producer ' + args.producer if args.producer != 'batch' else ''}` on "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} at git commit `{git_commit()}` "
        f"({time.time() - started:.0f} s in all). {paragraphs[1]}",
        "",
        "| design | producer | tables x partitions | offered records/s | produced records/s "
        "| committed records/s "
        "| backlog at the end | freshness p50 / p99 / max (samples) | first rows | ingestion CPU "
        "| peak RSS | catalog + PostgreSQL CPU | broker CPU | producer CPU | other |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.design} | {r.producer} | {r.tables} x {r.partitions_per_topic} | {r.offered_per_s:,} "
            f"| {r.produced_per_s} | {r.committed_per_s} | {r.backlog_at_end} "
            f"| {r.freshness_p50_s} / {r.freshness_p99_s} / "
            f"{r.freshness_max_s} s ({r.samples}, {r.samples_missing} not committed) "
            f"| {r.first_rows_s} s | {r.ingest_cores} | {r.ingest_peak_rss_gib} GiB | {r.catalog_cores} "
            f"| {r.broker_cores} | {r.producer_cores} | {r.other_cores} |"
        )
    notes = [f"- {r.design}, producer {r.producer}, {r.tables} tables: {n}" for r in rows for n in r.notes]
    for r in rows:
        if not r.minutes:
            continue
        lines += [
            "",
            f"### {r.design}, producer {r.producer}, {r.tables} x {r.partitions_per_topic}: by the minute "
            "after every table had rows"
            + (
                f" (floe maintain's CPU over the window: {r.maintainer_cores} cores)"
                if r.maintainer_cores
                else ""
            ),
            "",
            "| minute | committed records/s | produced records/s | backlog at its end | ingestion CPU "
            "| catalog + PostgreSQL CPU | floe maintain CPU | maintenance visits "
            "| their snapshots before → after |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
            *(
                f"| {m.minute} | {m.committed_per_s:,} | {m.produced_per_s:,} | {m.backlog:,} "
                f"| {m.ingest_cores} | {m.catalog_cores} | {m.maintainer_cores} | {m.visits} "
                f"| {m.snapshots_before} → {m.snapshots_after} |"
                for m in r.minutes
            ),
        ]
    lines += ["", *notes, "", f"Machine: {os.cpu_count()} CPUs; load average at the end {os.getloadavg()}."]
    (RESULTS / f"{args.name}.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rate", type=int, default=100_000, help="records a second in all, per row")
    parser.add_argument("--tables", type=int, default=100, help="tables of the spread row")
    parser.add_argument("--partitions", type=int, default=4, help="partitions of the one-table row")
    parser.add_argument("--settle", type=float, default=30.0, help="seconds after first rows")
    parser.add_argument("--measure", type=float, default=120.0, help="seconds measured")
    parser.add_argument("--first-rows-limit", type=float, default=300.0)
    parser.add_argument("--log-level", default="info", help="floe ingest --log-level")
    parser.add_argument("--name", default="many-tables-live-rate")
    parser.add_argument(
        "--before",
        default="",
        help="also run each row with floe ingest from this source tree (an earlier commit's git archive)",
    )
    parser.add_argument(
        "--producer",
        default="batch",
        help="the producer's mode, a row each: batch (produce_batch per partition and tick), each (a call "
        "per record, as before 2026-11-30), or each,batch",
    )
    parser.add_argument("--rows", default="one,spread", help="which rows: one (the one table), spread")
    parser.add_argument(
        "--maintain", default="off", help="off, on, or off,on: floe maintain beside ingestion (a row each)"
    )
    args = parser.parse_args()
    started = time.time()
    rows = []
    shapes = {"one": (1, args.partitions), "spread": (args.tables, 1)}
    trees = [args.before, None] if args.before else [None]
    modes = [m == "on" for m in args.maintain.split(",") if m]
    producers = [m for m in args.producer.split(",") if m]
    if not producers or any(m not in PRODUCER_MODES for m in producers):
        parser.error(f"--producer: {', '.join(PRODUCER_MODES)} or a list of them")
    plan = [
        (shapes[name], tree, mode, producer)
        for name in args.rows.split(",")
        if name
        for tree in trees
        for mode in modes
        for producer in producers
    ]
    for (tables, partitions), tree, maintain, producer in plan:
        with tempfile.TemporaryDirectory(prefix="floe-live-rate-") as work:
            print(f"== {tables} x {partitions} at {args.rate:,} records/s ({tree or 'current'})", flush=True)
            row = run(tables, partitions, args.rate, Path(work), args, tree, maintain, producer)
            print(f"   {row}", flush=True)
            rows.append(row)
            report(rows, args, started)


if __name__ == "__main__":
    main()
