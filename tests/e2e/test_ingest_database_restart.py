"""`floe ingest --shard auto` while floe's PostgreSQL goes away and comes back (issue 31's leases, the
guide's fault rule): two instances divide six tables through their leases in floe, records flow, and the
database is shut down for longer than a lease lives, then started again.

The promises: neither instance exits; every table commits again once the database is back; the two
instances divide the tables again (each renewal answers both); every record is in its table exactly
once, none lost, although both instances' leases ran out and their views of the group differed for a
renewal (the catalog's offsets fence lets one of them commit each batch).

The module has a PostgreSQL of its own: stopping the session's would disturb other modules' servers.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from pyiceberg.catalog.rest import RestCatalog

from devtools.catalog_server import CatalogProcess
from devtools.kafka_broker import LocalKafka
from devtools.postgres import LocalPostgres
from runtime.leases import DEFAULT_TTL_SECONDS
from tests.e2e.ingest_harness import (
    IngestProcess,
    Pipeline,
    admin_client,
    committed_offsets,
    wait_until_committed,
)
from tests.e2e.test_shared_ingest import (
    _Producing,
    _table,
    assert_each_record_once,
    tables_divided_between,
)

pytestmark = pytest.mark.e2e

CLUSTER = "restart_auto"
# Longer than a lease lives: when the database is back, both instances' leases have run out.
DOWN_SECONDS = DEFAULT_TTL_SECONDS + 5


@pytest.fixture(scope="module")
def pg() -> Iterator[LocalPostgres]:
    with LocalPostgres() as server:
        yield server


@pytest.fixture(scope="module")
def server(pg: LocalPostgres, tmp_path_factory: pytest.TempPathFactory) -> Iterator[CatalogProcess]:
    url = pg.create_database(f"floe_restart_{uuid.uuid4().hex[:8]}")
    with CatalogProcess(url, home=tmp_path_factory.mktemp("restart-floe")) as process:
        yield process


@pytest.fixture(scope="module")
def admin(server: CatalogProcess) -> Iterator[httpx.Client]:
    with admin_client(server) as client:
        yield client


def _live_instances(process: IngestProcess) -> list[int]:
    """Every group size the instance logged, in order (a line each time its view changed)."""
    return [int(n) for n in re.findall(r"(\d+) live instance\(s\)", process.log_text())]


def test_auto_shards_survive_a_database_outage_longer_than_a_lease(
    kafka: LocalKafka, pg: LocalPostgres, server: CatalogProcess, admin: httpx.Client, tmp_path: Path
) -> None:
    pipeline = Pipeline(kafka.bootstrap_servers, admin, [CLUSTER], CLUSTER)
    catalog: RestCatalog = server.catalog()
    args = ["--commit-interval", "1", "--cluster", CLUSTER, "--shard", "auto"]
    producing: _Producing | None = None
    try:
        with (
            IngestProcess(server, tmp_path / "a", args=args) as first,
            IngestProcess(server, tmp_path / "b", args=args) as second,
        ):
            _, topics = tables_divided_between(kafka, pipeline, CLUSTER, "restart-auto", 6, (first, second))
            producing = _Producing(kafka, topics)

            def committed(topic: str) -> int:
                return sum(committed_offsets(admin, CLUSTER, _table(topic), topic).values())

            def logs() -> str:
                return first.log_text()[-4000:] + "\n-----\n" + second.log_text()[-4000:]

            deadline = time.monotonic() + 180
            while not all(committed(t) > 0 for t in topics):
                assert time.monotonic() < deadline, logs()
                time.sleep(0.5)
            time.sleep(3)
            assert [_live_instances(first)[-1], _live_instances(second)[-1]] == [2, 2], logs()

            pg.shut_down()
            time.sleep(DOWN_SECONDS)
            pg.start_again()
            back_at = time.monotonic()
            before = {t: committed(t) for t in topics}
            while not all(committed(t) > before[t] + 40 for t in topics):
                assert time.monotonic() - back_at < 180, logs()
                time.sleep(0.5)
            print(f"every table committing again {time.monotonic() - back_at:.1f} s after the restart")
            # Both instances renewed again once the database was back (each had logged the failure),
            # and within a renewal or two see each other again: the first to renew found both leases
            # run out, took the other's away and saw itself alone until the other renewed.
            deadline = time.monotonic() + 2 * DEFAULT_TTL_SECONDS
            while not all(
                "renewed again" in p.log_text() and _live_instances(p)[-1] == 2 for p in (first, second)
            ):
                assert time.monotonic() < deadline, logs()
                time.sleep(0.5)
            producing.stop()
            for topic in topics:
                ends = producing.produced[topic].end_offsets()
                wait_until_committed(admin, CLUSTER, _table(topic), topic, ends, ingest=first)
            for process in (first, second):
                assert process.process is not None
                assert process.process.poll() is None, logs()
    finally:
        if producing is not None:
            producing.stop()
    assert_each_record_once(catalog, CLUSTER, topics, producing.produced)
