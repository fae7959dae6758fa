"""The shared consumer (`floe ingest`'s path for inline-JSON append tables): many JSON tables through
one Kafka consumer and one commit per round, with real Kafka, floe on PostgreSQL, pyiceberg and DuckDB
readers.

tests/e2e/test_ingest.py runs the same kinds of checks through the per-table Spark queries
(`ingest_path: spark`), which Avro, Protobuf, registry, upsert and Debezium tables always use."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog

from devtools.catalog_server import CatalogProcess
from devtools.kafka_broker import LocalKafka
from devtools.postgres import LocalPostgres
from ingest.ingest_table import IngestTable
from ingest.shared.catch_up import unread_records
from ingest.shared.consumer import SharedIngest
from ingest.shared.tables import SharedTable
from runtime.shards import owner_of, shard_of
from tests.e2e.duckdb_client import attach_catalog, connect
from tests.e2e.ingest_harness import (
    IngestProcess,
    Pipeline,
    Produced,
    admin_client,
    apply_pipeline,
    committed_offsets,
    produce,
    wait_until_committed,
)
from tests.e2e.test_ingest import EVENT_FIELDS, _event, _table_name, _topic
from tests.ingest_tables import json_table

pytestmark = pytest.mark.e2e

CLUSTER = "shared"
CRASH_CLUSTER = "shared_crash"
SHARD_CLUSTER = "shared_shards"
EVOLVE_CLUSTER = "shared_evolve"
AUTO_CLUSTER = "shared_auto"
PATH_CLUSTER = "shared_path"
ID_SCHEMA = {"fields": [{"name": "id", "id": 1, "type": "long"}]}


@pytest.fixture(scope="module")
def server(postgres: LocalPostgres, tmp_path_factory: pytest.TempPathFactory) -> Iterator[CatalogProcess]:
    url = postgres.create_database(f"floe_shared_{uuid.uuid4().hex[:8]}")
    with CatalogProcess(url, home=tmp_path_factory.mktemp("shared-floe")) as process:
        yield process


@pytest.fixture(scope="module")
def admin(server: CatalogProcess) -> Iterator[httpx.Client]:
    with admin_client(server) as client:
        yield client


@pytest.fixture(scope="module")
def pipeline(kafka: LocalKafka, admin: httpx.Client) -> Pipeline:
    clusters = [CLUSTER, CRASH_CLUSTER, SHARD_CLUSTER, EVOLVE_CLUSTER, AUTO_CLUSTER, PATH_CLUSTER]
    return Pipeline(kafka.bootstrap_servers, admin, clusters, CLUSTER)


@pytest.fixture(scope="module")
def ingest(
    server: CatalogProcess, pipeline: Pipeline, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[IngestProcess]:
    args = ["--commit-interval", "1", "--cluster", CLUSTER]
    with IngestProcess(server, tmp_path_factory.mktemp("shared-ingest"), args=args) as process:
        yield process


@pytest.fixture(scope="module")
def catalog(server: CatalogProcess) -> RestCatalog:
    return server.catalog()


_table = _table_name


def _id_tables(
    kafka: LocalKafka,
    pipeline: Pipeline,
    cluster: str,
    name: str,
    count: int,
    partitions: int,
    shards: int = 1,
    place: Callable[[str], int] | None = None,
) -> list[str]:
    """`count` new topics of `{"id": N}` records and their tables in `cluster`, applied at once; with
    `shards`, as many tables on each of that many shards (random names all land on one shard now and
    then: six on one of two, one run in 32), a table's shard `place(dotted table name)`, else its
    `--shard i/n` one."""
    where = place or (lambda dotted: shard_of(dotted, shards))
    if shards == 1:
        topics = [_topic(kafka, f"{name}{i}", partitions=partitions) for i in range(count)]
    else:
        wanted = count // shards
        chosen: dict[int, list[str]] = {shard: [] for shard in range(shards)}
        for i in itertools.count():
            candidate = f"{name}{i}.{uuid.uuid4().hex[:6]}"
            on = chosen[where(f"{cluster}.{_table(candidate)}")]
            if len(on) < wanted:
                on.append(candidate)
            if all(len(names) == wanted for names in chosen.values()):
                break
        topics = [topic for names in chosen.values() for topic in names]
        for topic in topics:
            kafka.create_topic(topic, partitions)
    pipeline.config["tables"] += [
        {
            "source_cluster_name": cluster,
            "source_topic": topic,
            "source_format": "json",
            "schema_mode": "inline",
            "schema": ID_SCHEMA,
        }
        for topic in topics
    ]
    apply_pipeline(pipeline.admin, pipeline.config)
    return topics


class _Producing:
    """JSON records to `topics`, 20 to each every 0.1 s, on a thread, until `stop()`."""

    def __init__(
        self, kafka: LocalKafka, topics: list[str], value: Callable[[int], Any] = lambda i: {"id": i}
    ) -> None:
        self.produced = {t: Produced() for t in topics}
        self._stop = threading.Event()

        def run() -> None:
            i = 0
            while not self._stop.is_set():
                for topic in topics:
                    values = (json.dumps(value(i + j)).encode() for j in range(20))
                    produce(kafka.bootstrap_servers, topic, values, into=self.produced[topic])
                i += 20
                time.sleep(0.1)

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)


def _positions(catalog: RestCatalog, cluster: str, table: str) -> list[tuple[int, int]]:
    rows = catalog.load_table(f"{cluster}.{table}").scan(selected_fields=("_kafka",)).to_arrow().to_pylist()
    return [(r["_kafka"]["partition"], r["_kafka"]["offset"]) for r in rows]


def test_json_records_become_rows_exactly_through_the_shared_consumer(
    kafka: LocalKafka, pipeline: Pipeline, ingest: IngestProcess, admin: httpx.Client, catalog: RestCatalog
) -> None:
    topic = _topic(kafka, "shared-events")
    table = _table(topic)
    pipeline.add(
        source_topic=topic,
        source_format="json",
        schema_mode="inline",
        partitioning_scheme="hour",
        schema={"fields": EVENT_FIELDS},
    )
    count = 400
    first = produce(
        kafka.bootstrap_servers,
        topic,
        (json.dumps(_event(i)).encode() for i in range(count // 2)),
        headers=lambda i: [("source", b"test")],
    )
    wait_until_committed(admin, CLUSTER, table, topic, first.end_offsets(), ingest=ingest)
    produced = produce(
        kafka.bootstrap_servers,
        topic,
        (json.dumps(_event(i)).encode() for i in range(count // 2, count)),
        headers=lambda i: [("source", b"test")],
    )
    produced.records.update(first.records)
    wait_until_committed(admin, CLUSTER, table, topic, produced.end_offsets(), ingest=ingest)

    loaded = catalog.load_table(f"{CLUSTER}.{table}")
    assert str(loaded.spec().fields[0].transform) == "hour"
    rows = loaded.scan().to_arrow().to_pylist()
    by_position = {(r["_kafka"]["partition"], r["_kafka"]["offset"]): r for r in rows}
    assert len(rows) == count
    assert set(by_position) == set(produced.records)
    for (partition, offset), (key, value) in produced.records.items():
        row = by_position[(partition, offset)]
        expected = json.loads(value or b"")
        assert row["id"] == expected["id"]
        assert row["name"] == expected["name"]
        assert row["score"] == expected["score"]
        assert row["at"] == dt.datetime.fromisoformat(expected["at"])
        assert row["device"] == expected["device"]
        assert row["tags"] == expected["tags"]
        assert dict(row["attributes"]) == expected["attributes"]
        assert row["_kafka"]["key"] == key
        assert [(h["key"], h["value"]) for h in row["_kafka"]["headers"]] == [("source", b"test")]
    # Every snapshot carries the offsets it covers, starting where the one before ended.
    covered: dict[str, int] = {}
    for snapshot in sorted(loaded.metadata.snapshots, key=lambda s: s.sequence_number):
        summary = snapshot.summary.additional_properties if snapshot.summary else {}
        start = json.loads(summary["floe.kafka.start-offsets"])
        assert start == {p: covered[p] for p in start}, (start, covered)
        covered.update(json.loads(summary["floe.kafka.end-offsets"]))
    assert covered == {str(p): o for p, o in produced.end_offsets().items()}
    # DuckDB, through floe's REST catalog, reads the same rows.
    duck = connect(Path(ingest.home) / "duckdb")
    attach_catalog(
        duck,
        endpoint=ingest.server.url,
        warehouse="default",
        client_id=ingest.credential[0],
        client_secret=ingest.credential[1],
    )
    total, distinct = duck.execute(
        f'SELECT count(*), count(DISTINCT id) FROM floe.{CLUSTER}."{table}"'
    ).fetchone() or (0, 0)
    assert (total, distinct) == (count, count)
    assert "shared consumer" in ingest.log_text()


def test_dead_letters_commit_with_the_rows_and_say_why(
    kafka: LocalKafka, pipeline: Pipeline, ingest: IngestProcess, admin: httpx.Client, catalog: RestCatalog
) -> None:
    topic = _topic(kafka, "shared-mixed", partitions=2)
    table = _table(topic)
    pipeline.add(
        source_topic=topic,
        source_format="json",
        schema_mode="inline",
        schema={
            "fields": [
                {"name": "id", "id": 1, "type": "long"},
                {"name": "note", "id": 2, "type": "string", "optional": True},
            ]
        },
    )
    bad: list[bytes | None] = [b"not json", b'{"note": "no id"}', b'{"id": "abc"}', b"[1,2]", None]
    values: list[bytes | None] = []
    for i in range(200):
        values.append(json.dumps({"id": i, "note": "ok"}).encode())
        if i % 40 == 0:
            values.append(bad[(i // 40) % len(bad)])
    produced = produce(kafka.bootstrap_servers, topic, values)
    wait_until_committed(admin, CLUSTER, table, topic, produced.end_offsets(), ingest=ingest)
    good = catalog.load_table(f"{CLUSTER}.{table}").scan().to_arrow()
    dead = catalog.load_table(f"{CLUSTER}.{table}_dlq").scan().to_arrow().to_pylist()
    assert sorted(good.column("id").to_pylist()) == list(range(200))
    assert {d["value"]: d["error"] for d in dead} == {
        b"not json": "not valid JSON: Expecting value at byte 0",
        b'{"note": "no id"}': "required field id is missing or null",
        b'{"id": "abc"}': "field 'id': expected long, got string \"abc\"",
        b"[1,2]": "not a JSON object (got array)",
        None: "record has no value (tombstone)",
    }
    assert all(d["topic"] == topic and d["failed_at"] is not None for d in dead)
    # The dead-letter table's offsets end where the table's do: they commit together.
    dlq_offsets = committed_offsets(admin, CLUSTER, f"{table}_dlq", topic)
    main_offsets = committed_offsets(admin, CLUSTER, table, topic)
    assert main_offsets == produced.end_offsets()
    assert all(dlq_offsets[p] <= main_offsets[p] for p in dlq_offsets)


def test_many_tables_and_one_added_while_the_others_flow(
    kafka: LocalKafka, pipeline: Pipeline, ingest: IngestProcess, admin: httpx.Client, catalog: RestCatalog
) -> None:
    topics = _id_tables(kafka, pipeline, CLUSTER, "shared-many", 30, partitions=1)
    produced = {
        t: produce(kafka.bootstrap_servers, t, (json.dumps({"id": i}).encode() for i in range(20)))
        for t in topics
    }
    for topic in topics:
        wait_until_committed(
            admin, CLUSTER, _table(topic), topic, produced[topic].end_offsets(), ingest=ingest
        )
    # One more table, applied while the others keep receiving records: they go on, it starts.
    late = _topic(kafka, "shared-late", partitions=1)
    more = {
        t: produce(kafka.bootstrap_servers, t, (json.dumps({"id": i}).encode() for i in range(20, 30)))
        for t in topics
    }
    pipeline.add(source_topic=late, source_format="json", schema_mode="inline", schema=ID_SCHEMA)
    late_records = produce(kafka.bootstrap_servers, late, (json.dumps({"id": i}).encode() for i in range(5)))
    wait_until_committed(admin, CLUSTER, _table(late), late, late_records.end_offsets(), ingest=ingest)
    for topic in topics:
        wait_until_committed(admin, CLUSTER, _table(topic), topic, more[topic].end_offsets(), ingest=ingest)
        positions = _positions(catalog, CLUSTER, _table(topic))
        assert sorted(positions) == [(0, o) for o in range(30)]
    assert "restarting" not in ingest.log_text()


def kill_9_while_records_flow(
    kafka: LocalKafka,
    server: CatalogProcess,
    admin: httpx.Client,
    cluster: str,
    topics: list[str],
    state: Path,
    env: Mapping[str, str] | None = None,
) -> dict[str, Produced]:
    """Records flow to `topics` while `floe ingest --cluster <cluster>` is started and killed with kill -9
    three times, each kill 0.7 s after a commit landed (into the next round: some tables' files written,
    their commit perhaps in flight); then a fresh instance brings every table to its topic's end. The
    records produced, by topic."""
    producing = _Producing(kafka, topics)
    args = ["--commit-interval", "1", "--cluster", cluster]

    def committed() -> int:
        return sum(sum(committed_offsets(admin, cluster, _table(t), t).values()) for t in topics)

    try:
        for _ in range(3):
            process = IngestProcess(server, state, args=args, env=env).start()
            before = committed()
            deadline = time.monotonic() + 180
            while committed() <= before:
                assert time.monotonic() < deadline, process.log_text()[-4000:]
                assert process.process is not None
                assert process.process.poll() is None, process.log_text()[-4000:]
                time.sleep(0.3)
            time.sleep(0.7)
            process.kill()
    finally:
        producing.stop()
    produced = producing.produced
    with IngestProcess(server, state, args=args, env=env) as process:
        for topic in topics:
            wait_until_committed(
                admin,
                cluster,
                _table(topic),
                topic,
                produced[topic].end_offsets(),
                timeout=300,
                ingest=process,
            )
    return produced


def assert_each_record_once(
    catalog: RestCatalog, cluster: str, topics: list[str], produced: dict[str, Produced]
) -> None:
    for topic in topics:
        positions = _positions(catalog, cluster, _table(topic))
        assert len(positions) == len(set(positions)), f"{topic}: a record was committed twice"
        assert sorted(positions) == sorted(produced[topic].records), f"{topic}: a record was lost"


def test_kill_9_of_the_shared_consumer_loses_and_duplicates_nothing_across_tables(
    kafka: LocalKafka,
    pipeline: Pipeline,
    server: CatalogProcess,
    admin: httpx.Client,
    catalog: RestCatalog,
    tmp_path: Path,
) -> None:
    topics = _id_tables(kafka, pipeline, CRASH_CLUSTER, "shared-crash", 8, partitions=2)
    produced = kill_9_while_records_flow(kafka, server, admin, CRASH_CLUSTER, topics, tmp_path / "crash")
    assert_each_record_once(catalog, CRASH_CLUSTER, topics, produced)


def test_two_shards_split_the_tables_and_an_instance_on_the_same_shard_is_fenced(
    kafka: LocalKafka,
    pipeline: Pipeline,
    server: CatalogProcess,
    admin: httpx.Client,
    catalog: RestCatalog,
    tmp_path: Path,
) -> None:
    topics = _id_tables(kafka, pipeline, SHARD_CLUSTER, "shared-shard", 6, partitions=1, shards=2)
    shards = {t: shard_of(f"{SHARD_CLUSTER}.{_table(t)}", 2) for t in topics}
    assert set(shards.values()) == {0, 1}, "the names chosen all hash to one shard"
    base = ["--commit-interval", "1", "--cluster", SHARD_CLUSTER]
    # Shard 0 twice (two instances racing for the same tables) and shard 1 once.
    with (
        IngestProcess(server, tmp_path / "s0a", args=[*base, "--shard", "0/2"]) as first,
        IngestProcess(server, tmp_path / "s0b", args=[*base, "--shard", "0/2"]) as second,
        IngestProcess(server, tmp_path / "s1", args=[*base, "--shard", "1/2"]) as third,
    ):
        produced = {t: Produced() for t in topics}
        for round_ in range(5):
            for topic in topics:
                produce(
                    kafka.bootstrap_servers,
                    topic,
                    (json.dumps({"id": round_ * 50 + j}).encode() for j in range(50)),
                    into=produced[topic],
                )
            time.sleep(0.5)
        for topic in topics:
            wait_until_committed(
                admin, SHARD_CLUSTER, _table(topic), topic, produced[topic].end_offsets(), ingest=third
            )
        for topic in topics:
            positions = _positions(catalog, SHARD_CLUSTER, _table(topic))
            assert len(positions) == len(set(positions)), f"{topic}: a record was committed twice"
            assert sorted(positions) == sorted(produced[topic].records)
        # Each instance ingested only its shard's tables.
        for process, shard in ((first, 0), (second, 0), (third, 1)):
            log = process.log_text()
            for topic in topics:
                if shards[topic] != shard:
                    assert _table(topic) not in log, (topic, shard)


def _member_of(process: IngestProcess, timeout: float = 120) -> str:
    """The instance name `floe ingest --shard auto` printed when it took its lease."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = re.search(r"instance (\S+) of ingest-", process.log_text())
        if found:
            return found.group(1)
        assert process.process is not None
        assert process.process.poll() is None, process.log_text()[-4000:]
        time.sleep(0.2)
    raise AssertionError(process.log_text()[-4000:])


def tables_divided_between(
    kafka: LocalKafka,
    pipeline: Pipeline,
    cluster: str,
    name: str,
    count: int,
    instances: tuple[IngestProcess, IngestProcess],
) -> tuple[list[str], list[str]]:
    """The names of two running `floe ingest --shard auto` instances, and `count` new two-partition
    tables of `cluster` (applied), named so that the leases give each instance half of them."""
    members = [_member_of(process) for process in instances]
    topics = _id_tables(
        kafka,
        pipeline,
        cluster,
        name,
        count,
        partitions=2,
        shards=2,
        place=lambda dotted: members.index(owner_of(dotted, members) or ""),
    )
    return members, topics


def test_auto_shards_divide_the_tables_and_take_a_killed_instances_over(
    kafka: LocalKafka,
    pipeline: Pipeline,
    server: CatalogProcess,
    admin: httpx.Client,
    catalog: RestCatalog,
    tmp_path: Path,
) -> None:
    """Two `floe ingest --shard auto` instances divide eight tables through their leases in floe; one is
    killed with kill -9 while records flow and the other takes its tables over once the lease runs out
    (15 s), from floe's offsets: every record once, none lost."""
    args = ["--commit-interval", "1", "--cluster", AUTO_CLUSTER, "--shard", "auto"]
    producing: _Producing | None = None
    try:
        with (
            IngestProcess(server, tmp_path / "a", args=args) as first,
            IngestProcess(server, tmp_path / "b", args=args) as second,
        ):
            # Four tables each (applied while both run): names chosen by the owner the leases give them.
            members, topics = tables_divided_between(
                kafka, pipeline, AUTO_CLUSTER, "shared-auto", 8, (first, second)
            )
            killed = [t for t in topics if owner_of(f"{AUTO_CLUSTER}.{_table(t)}", members) == members[1]]
            assert len(killed) == 4
            producing = _Producing(kafka, topics)

            def committed(topic: str) -> int:
                return sum(committed_offsets(admin, AUTO_CLUSTER, _table(topic), topic).values())

            # Both instances ingest their own tables (and, after the first one saw the second, only those).
            deadline = time.monotonic() + 180
            while not all(committed(t) > 0 for t in topics):
                assert time.monotonic() < deadline, first.log_text()[-3000:] + second.log_text()[-3000:]
                time.sleep(0.5)
            time.sleep(3)
            assert "2 live instance(s)" in first.log_text()
            for topic in killed:
                assert _table(topic) in second.log_text(), topic
            before = {t: committed(t) for t in killed}
            second.kill()
            killed_at = time.monotonic()
            # The survivor's next renewals stop naming the killed instance; its tables move over.
            while not all(committed(t) > before[t] + 40 for t in killed):
                assert time.monotonic() - killed_at < 120, first.log_text()[-4000:]
                time.sleep(0.5)
            took = time.monotonic() - killed_at
            print(f"tables of the killed instance committing again after {took:.1f} s")
            # The survivor's last view of its group: itself alone (its first line said 1 too).
            assert re.findall(r"(\d+) live instance\(s\)", first.log_text())[-1] == "1"
            producing.stop()
            for topic in topics:
                ends = producing.produced[topic].end_offsets()
                wait_until_committed(admin, AUTO_CLUSTER, _table(topic), topic, ends, ingest=first)
    finally:
        if producing is not None:
            producing.stop()
    assert_each_record_once(catalog, AUTO_CLUSTER, topics, producing.produced)


def test_a_schema_change_applied_while_records_flow_loses_and_repeats_nothing(
    kafka: LocalKafka,
    pipeline: Pipeline,
    server: CatalogProcess,
    admin: httpx.Client,
    catalog: RestCatalog,
    tmp_path: Path,
) -> None:
    """Its own `floe ingest` commits every 5 s, so records are buffered for the table when the new
    schema arrives: the table is opened again and must read on from floe's offsets, not from where the
    consumer was (which skipped the buffered records)."""
    topic = _topic(kafka, "shared-evolve", partitions=2)
    table = _table(topic)
    args = ["--commit-interval", "5", "--cluster", EVOLVE_CLUSTER]
    ingest = IngestProcess(server, tmp_path / "evolve", args=args).start()
    pipeline.add(
        cluster=EVOLVE_CLUSTER,
        source_topic=topic,
        source_format="json",
        schema_mode="inline",
        schema=ID_SCHEMA,
    )
    producing = _Producing(kafka, [topic], lambda i: {"id": i, "note": f"n{i}"})
    produced = producing.produced[topic]
    try:
        wait_until_committed(admin, EVOLVE_CLUSTER, table, topic, {0: 1, 1: 1}, ingest=ingest)
        time.sleep(2)  # into the next interval: records are buffered
        note = {"name": "note", "id": 2, "type": "string", "optional": True}
        widened = {"fields": [*ID_SCHEMA["fields"], note]}
        pipeline.add(
            cluster=EVOLVE_CLUSTER,
            source_topic=topic,
            source_format="json",
            schema_mode="inline",
            schema=widened,
        )
        time.sleep(8)
    finally:
        producing.stop()
    try:
        wait_until_committed(admin, EVOLVE_CLUSTER, table, topic, produced.end_offsets(), ingest=ingest)
    finally:
        ingest.stop()
    assert "changed (schema or settings)" in ingest.log_text()
    rows = catalog.load_table(f"{EVOLVE_CLUSTER}.{table}").scan().to_arrow().to_pylist()
    positions = [(r["_kafka"]["partition"], r["_kafka"]["offset"]) for r in rows]
    assert len(positions) == len(set(positions)), "a record was committed twice"
    assert sorted(positions) == sorted(produced.records), "a record was lost"
    assert any(r["note"] for r in rows), "the new field is written once the schema has it"


def test_a_table_moved_to_a_spark_query_and_back_while_records_flow_loses_and_repeats_nothing(
    kafka: LocalKafka,
    pipeline: Pipeline,
    server: CatalogProcess,
    admin: httpx.Client,
    catalog: RestCatalog,
    tmp_path: Path,
) -> None:
    """`ingest_path: spark` applied to a table the shared consumer reads moves it to a Spark query of
    its own, and `auto` moves it back, while records flow: each path starts from floe's offsets (a
    commit of the other still in flight is fenced), so every record is in the table once."""
    topic = _topic(kafka, "shared-path", partitions=2)
    table = _table(topic)
    definition: dict[str, Any] = {
        "cluster": PATH_CLUSTER,
        "source_topic": topic,
        "source_format": "json",
        "schema_mode": "inline",
        "schema": ID_SCHEMA,
    }
    args = ["--commit-interval", "1", "--cluster", PATH_CLUSTER]
    pipeline.add(**definition)
    producing = _Producing(kafka, [topic])

    def committed() -> int:
        return sum(committed_offsets(admin, PATH_CLUSTER, table, topic).values())

    def commits_more(process: IngestProcess, records: int) -> None:
        start, deadline = committed(), time.monotonic() + 240
        while committed() < start + records:
            assert time.monotonic() < deadline, process.log_text()[-4000:]
            assert process.process is not None
            assert process.process.poll() is None, process.log_text()[-4000:]
            time.sleep(0.5)

    try:
        with IngestProcess(server, tmp_path / "path", args=args) as ingest:
            commits_more(ingest, 200)
            assert f"{table}: ingesting topic {topic} through the shared consumer" in ingest.log_text()
            pipeline.add(**definition, ingest_path="spark")
            deadline = time.monotonic() + 240
            while f"{table}: ingesting topic {topic} every" not in ingest.log_text():
                assert time.monotonic() < deadline, ingest.log_text()[-4000:]
                time.sleep(0.5)
            commits_more(ingest, 400)  # through the Spark query (the shared consumer left the table)
            pipeline.add(**definition)
            deadline = time.monotonic() + 120
            while ingest.log_text().count(f"{table}: ingesting topic {topic} through the shared") < 2:
                assert time.monotonic() < deadline, ingest.log_text()[-4000:]
                time.sleep(0.5)
            commits_more(ingest, 200)
            producing.stop()
            ends = producing.produced[topic].end_offsets()
            wait_until_committed(admin, PATH_CLUSTER, table, topic, ends, ingest=ingest)
    finally:
        producing.stop()
    assert_each_record_once(catalog, PATH_CLUSTER, [topic], producing.produced)


def test_another_writers_commits_between_batches_cost_no_restart_and_no_record(
    kafka: LocalKafka, pipeline: Pipeline, ingest: IngestProcess, admin: httpx.Client, catalog: RestCatalog
) -> None:
    """Maintenance, a dead-letter redrive or an engine commits to a table the shared consumer is
    writing: the consumer's next commit is refused (its snapshot requirement fails) and its batch goes
    in again on the table's new state — no restart, no problem reported, every record once."""
    [topic] = _id_tables(kafka, pipeline, CLUSTER, "shared-other-writer", 1, partitions=2)
    table_name = _table(topic)
    producing = _Producing(kafka, [topic])
    try:
        # The consumer has committed (its appender holds the table's state) before the engine's appends:
        # records produced, then committed. (Waiting on no records yet returned at once, and the engine
        # could be done before the consumer's first commit, which then loaded every append: no refusal.)
        while not producing.produced[topic].records:
            time.sleep(0.05)
        wait_until_committed(
            admin, CLUSTER, table_name, topic, producing.produced[topic].end_offsets(), ingest=ingest
        )
        table = catalog.load_table(f"{CLUSTER}.{table_name}")
        schema = table.schema().as_arrow()
        for i in range(6):  # an engine's appends (no _kafka column), between and during batches
            table = catalog.load_table(f"{CLUSTER}.{table_name}")
            table.append(pa.Table.from_pylist([{"id": -1 - i, "_kafka": None}], schema=schema))
            time.sleep(0.7)
    finally:
        producing.stop()
    produced = producing.produced[topic]
    wait_until_committed(admin, CLUSTER, table_name, topic, produced.end_offsets(), ingest=ingest)
    rows = catalog.load_table(f"{CLUSTER}.{table_name}").scan().to_arrow().to_pylist()
    engine = sorted(r["id"] for r in rows if r["_kafka"] is None)
    assert engine == [-6, -5, -4, -3, -2, -1]
    positions = [(r["_kafka"]["partition"], r["_kafka"]["offset"]) for r in rows if r["_kafka"] is not None]
    assert len(positions) == len(set(positions)), "a record was committed twice"
    assert sorted(positions) == sorted(produced.records), "a record was lost"
    lines = [line for line in ingest.log_text().splitlines() if table_name in line]
    assert any("moved by another writer" in line for line in lines), lines[-20:]
    assert not [line for line in lines if "re-reading from floe" in line or "restarted" in line]


def test_unread_records_come_from_the_consumers_positions_and_cached_high_watermarks(
    kafka: LocalKafka,
) -> None:
    """The catch-up rule's input, against the real broker and librdkafka (a contract: `position()` is the
    next offset handed over, `get_watermark_offsets(cached=True)` the end its fetches saw)."""
    from confluent_kafka import Consumer, TopicPartition

    topic = _topic(kafka, "unread", partitions=2)
    produced = produce(kafka.bootstrap_servers, topic, (b'{"id": 1}' for _ in range(400)))
    ends = produced.end_offsets()
    assert set(ends) == {0, 1}
    consumer = Consumer(
        {"bootstrap.servers": kafka.bootstrap_servers, "group.id": f"unread-{uuid.uuid4().hex[:6]}"}
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in (0, 1)])
        assert unread_records(consumer, topic, [0, 1]) == 0  # nothing handed over yet: unknown
        taken: dict[int, int] = {}
        deadline = time.monotonic() + 60
        while sum(taken.values()) < 150 or len(taken) < 2:
            assert time.monotonic() < deadline, taken
            for message in consumer.consume(num_messages=25, timeout=1):
                partition, offset = message.partition(), message.offset()
                assert message.error() is None
                assert partition is not None
                assert offset is not None
                taken[partition] = offset + 1
        assert unread_records(consumer, topic, [0, 1]) == sum(ends[p] - taken[p] for p in (0, 1))
        assert unread_records(consumer, topic, [1]) == ends[1] - taken[1]
    finally:
        consumer.close()


class _HoldingTable(SharedTable):
    """A table that holds every record already: its batches are empty (nothing written, nothing sent)."""

    def prepare(self, messages: list[Any]) -> None:
        return None


def _started_without_floe(
    cluster: str, config: dict[str, Any], table: IngestTable, interval: float
) -> SharedIngest:
    """A shared consumer of `table` alone, started, that writes and commits nothing (its table holds
    every record already): no floe, no appenders; what it assigns and fetches is the broker's."""
    unused: Any = None
    consumer = SharedIngest(
        cluster,
        config,
        unused,
        lambda t: _HoldingTable(t, unused, unused, {}, dict),
        lambda t, result: None,
        lambda t: interval,
        lambda warehouse: warehouse,
    )
    consumer.set_tables([table])
    consumer.start()
    return consumer


def test_a_topic_created_after_its_table_opened_is_read_within_seconds(kafka: LocalKafka) -> None:
    """A topic floe up has just created (or one created right after its table was applied) may be missing
    from the consumer's first metadata: the consumer looks again within seconds, not at the next
    minute's refresh (the quick start's added table once waited a minute for its first record)."""
    topic = f"shared-later.{uuid.uuid4().hex[:6]}"
    table = json_table(
        "t", cluster="later", topic=topic, consumer_config={"bootstrap.servers": kafka.bootstrap_servers}
    )
    consumer = _started_without_floe("later", dict(table.consumer_config), table, 1.0)
    try:
        assert consumer.assigned.wait(30)
        assert topic not in consumer.assigned_partitions()
        kafka.create_topic(topic, 2)
        created = time.monotonic()
        while sorted(consumer.assigned_partitions().get(topic, [])) != [0, 1]:
            assert time.monotonic() - created < 15, consumer.assigned_partitions()
            time.sleep(0.1)
    finally:
        consumer.stop()


def test_a_trickle_of_records_is_fetched_in_batches_not_a_fetch_a_record(kafka: LocalKafka) -> None:
    """Every fetch costs the broker a look at each of the consumer's partitions (a thousand for a thousand
    quiet tables): records trickling in at 50 a second are fetched at most ~2 times a second (a fetch
    waits up to FETCH_BATCHING's 500 ms for 1 MiB), not once per record or two, counted by librdkafka's
    own statistics against the real broker."""
    topic = _topic(kafka, "trickle", partitions=1)
    fetches: list[int] = []

    def on_stats(text: str) -> None:
        stats = json.loads(text)
        fetches.append(sum(b["req"].get("Fetch", 0) for b in stats["brokers"].values() if b["nodeid"] >= 0))

    config = {
        "bootstrap.servers": kafka.bootstrap_servers,
        "statistics.interval.ms": 1000,
        "stats_cb": on_stats,
    }
    table = json_table("t", cluster="trickle", topic=topic, consumer_config={"bootstrap.servers": "unused"})
    consumer = _started_without_floe("trickle", config, table, 3600.0)
    try:
        assert consumer.assigned.wait(30)
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "linger.ms": 0})
        time.sleep(2)  # the consumer's first fetches (its partition's offsets, the session) are done
        counted_from = len(fetches)
        began = time.monotonic()
        while time.monotonic() - began < 6:
            producer.produce(topic, b'{"id": 1}')
            producer.poll(0)
            time.sleep(0.02)
        assert producer.flush(30) == 0
        time.sleep(1.5)  # the last statistics of the window
        assert len(fetches) - counted_from >= 6, fetches
        window = fetches[-1] - fetches[counted_from - 1] if counted_from else fetches[-1]
        seconds = len(fetches) - counted_from
        assert window <= 3 * seconds, f"{window} fetches in ~{seconds} s"
    finally:
        consumer.stop()
