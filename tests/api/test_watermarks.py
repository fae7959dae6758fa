"""`/management/v1/watermark`: a table's completeness watermark derived from its committed Kafka offsets
and the broker end offsets ingestion reports (`POST …/observations`), read and long-polled
(`?until=&wait=`), on both backends; who may report and who may read; bad input is a 400, too many
waits a 429. The derivation itself is in tests/unit/test_watermarks.py."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pytest
from click.testing import CliRunner, Result
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.types import LongType, NestedField

from devtools.catalog_server import CatalogProcess
from floe.cli import main
from tests.api.test_console import Key, signed_in, text_of
from tests.unit.test_kafka_offsets import progress_props

ROWS = pa.schema([pa.field("id", pa.int64(), nullable=True)])
WATERMARK = "/management/v1/watermark"


@dataclass
class Tenant:
    cluster: str
    writer: httpx.Client
    reader: httpx.Client
    stranger: httpx.Client  # a reader key of another cluster
    table: Table
    reader_key: Key


def _client(server: CatalogProcess, key: dict[str, Any]) -> httpx.Client:
    token = server.token(key["client_id"], key["client_secret"])
    return httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=30)


@pytest.fixture
def tenant(catalog_server: CatalogProcess, http: httpx.Client) -> Iterator[Tenant]:
    cluster, other = (f"wm_{uuid.uuid4().hex[:8]}" for _ in range(2))
    keys = {}
    for name, role in ((cluster, "writer"), (cluster, "reader"), (other, "reader")):
        if (name, role) == (other, "reader"):
            assert http.post("/management/v1/clusters", json={"name": other}).status_code == 201
        elif role == "writer":
            assert http.post("/management/v1/clusters", json={"name": cluster}).status_code == 201
        created = http.post("/management/v1/keys", json={"role": role, "cluster": name})
        assert created.status_code == 201, created.text
        keys[(name, role)] = created.json()
    catalog = catalog_server.catalog()
    if cluster not in [n[0] for n in catalog.list_namespaces()]:
        catalog.create_namespace(cluster)
    table = catalog.create_table(f"{cluster}.events", Schema(NestedField(1, "id", LongType())))
    clients = [
        _client(catalog_server, keys[k])
        for k in ((cluster, "writer"), (cluster, "reader"), (other, "reader"))
    ]
    try:
        reader_key = Key(keys[(cluster, "reader")]["client_id"], keys[(cluster, "reader")]["client_secret"])
        yield Tenant(cluster, clients[0], clients[1], clients[2], table, reader_key)
    finally:
        for client in clients:
            client.close()


def _commit(table: Table, start: dict[int, int], end: dict[int, int]) -> None:
    table.append(pa.table({"id": [1]}, schema=ROWS), snapshot_properties=progress_props("orders", start, end))


def _report(
    client: httpx.Client, cluster: str, at_ms: int, ends: dict[int, int], **extra: Any
) -> httpx.Response:
    body = {
        "warehouse": "default",
        "observed-at-ms": at_ms,
        "tables": [
            {
                "namespace": [cluster],
                "table": "events",
                "topic": "orders",
                "end-offsets": {str(p): o for p, o in ends.items()},
            }
        ],
        **extra,
    }
    return client.post(f"{WATERMARK}/observations", json=body)


def _get(client: httpx.Client, cluster: str, **params: Any) -> httpx.Response:
    return client.get(
        WATERMARK, params={"warehouse": "default", "namespace": cluster, "table": "events", **params}
    )


def test_watermark_follows_commits_and_reports(tenant: Tenant) -> None:
    # Nothing committed, nothing reported: no watermark yet.
    body = _get(tenant.reader, tenant.cluster).json()
    assert body["watermark-ms"] is None
    assert body["topics"] == []

    _commit(tenant.table, {}, {0: 3})
    now = int(time.time() * 1000)
    # Partition 1 is empty (idle from the start), partition 0 holds 3 records, all committed.
    reported = _report(tenant.writer, tenant.cluster, now - 5_000, {0: 3, 1: 0})
    assert reported.status_code == 200, reported.text
    assert reported.json()["tables"][0]["watermark-ms"] == now - 5_000

    # Two more records arrive in partition 0: until they are committed, the watermark stays.
    assert _report(tenant.writer, tenant.cluster, now - 4_000, {0: 5, 1: 0}).status_code == 200
    body = _get(tenant.reader, tenant.cluster, until=now - 4_000).json()
    assert body["watermark-ms"] == now - 5_000
    assert body["complete"] is False
    topic = body["topics"][0]
    assert topic["offset-completeness"] == pytest.approx(3 / 5)
    assert topic["committed-records"] == 3
    assert topic["end-records"] == 5
    assert [(p["partition"], p["committed-offset"], p["end-offset"]) for p in topic["partitions"]] == [
        (0, 3, 5),
        (1, None, 0),
    ]
    # Committed: the table is complete through the observation that saw them.
    _commit(tenant.table, {0: 3}, {0: 5})
    body = _get(tenant.reader, tenant.cluster, until=now - 4_000).json()
    assert body["watermark-ms"] == now - 4_000
    assert body["complete"] is True
    assert body["watermark"].startswith(time.strftime("%Y-%m-%dT", time.gmtime((now - 4_000) / 1000)))
    # An idle partition keeps up with each report; a report from the future counts as now.
    reported = _report(tenant.writer, tenant.cluster, now + 3_600_000, {0: 5, 1: 0})
    assert now <= reported.json()["tables"][0]["watermark-ms"] <= int(time.time() * 1000)


def test_long_poll_returns_when_the_watermark_passes(tenant: Tenant) -> None:
    now = int(time.time() * 1000)
    _commit(tenant.table, {}, {0: 1})
    assert _report(tenant.writer, tenant.cluster, now - 10_000, {0: 1}).status_code == 200
    # Not complete through `now` and nothing changes: the answer comes after the wait, complete false.
    began = time.monotonic()
    body = _get(tenant.reader, tenant.cluster, until=now, wait=1).json()
    assert time.monotonic() - began >= 0.9
    assert body["complete"] is False
    assert body["watermark-ms"] == now - 10_000

    answered: dict[str, Any] = {}

    def wait() -> None:
        answered.update(_get(tenant.reader, tenant.cluster, until=now, wait=20).json())

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(0.5)
    assert _report(tenant.writer, tenant.cluster, now + 1, {0: 1}).status_code == 200
    waiter.join(timeout=15)
    assert not waiter.is_alive()
    assert answered["complete"] is True
    assert answered["watermark-ms"] >= now


def test_who_may_report_and_read(tenant: Tenant, http: httpx.Client) -> None:
    now = int(time.time() * 1000)
    # A reader key may not report; another cluster's key sees no such namespace.
    assert _report(tenant.reader, tenant.cluster, now, {0: 0}).status_code == 403
    assert _report(tenant.stranger, tenant.cluster, now, {0: 0}).status_code == 404
    assert _get(tenant.stranger, tenant.cluster).status_code == 404
    assert _get(tenant.stranger, tenant.cluster, until=now, wait=1).status_code == 404
    assert _get(tenant.reader, tenant.cluster).status_code == 200
    assert _get(http, tenant.cluster).status_code == 200  # a global administrator


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"until": "yesterday"}, "until must be"),
        ({"until": "99999999999999999"}, "until must be"),
        ({"wait": 5}, "wait needs until"),
        ({"until": "2026-11-28T10:00:00Z", "wait": 100_000}, "wait must be 0 to"),
        ({"wait": -1}, ""),
    ],
)
def test_bad_queries_are_400(tenant: Tenant, params: dict[str, Any], message: str) -> None:
    response = _get(tenant.reader, tenant.cluster, **params)
    assert response.status_code == 400, response.text
    assert message in response.json()["error"]["message"]


@pytest.mark.parametrize(
    "ends",
    [{"x": 1}, {"-1": 1}, {"0": -1}, {"0": 2**63}, {"0": 1.5}, {"0": [1]}, {"0": True}],
)
def test_bad_reports_are_400_and_change_nothing(tenant: Tenant, ends: dict[str, Any]) -> None:
    body = {
        "warehouse": "default",
        "observed-at-ms": int(time.time() * 1000),
        "tables": [
            {"namespace": [tenant.cluster], "table": "events", "topic": "orders", "end-offsets": ends}
        ],
    }
    response = tenant.writer.post(f"{WATERMARK}/observations", json=body)
    assert response.status_code == 400, response.text
    assert _get(tenant.reader, tenant.cluster).json()["topics"] == []


def test_missing_table_is_404(tenant: Tenant) -> None:
    response = tenant.reader.get(
        WATERMARK, params={"warehouse": "default", "namespace": tenant.cluster, "table": "nope"}
    )
    assert response.status_code == 404
    assert response.json()["error"]["type"] == "NoSuchTableException"


def test_too_many_waits_of_one_cluster_are_429(tenant: Tenant, catalog_server: CatalogProcess) -> None:
    now = int(time.time() * 1000)
    results: list[int] = []

    def wait() -> None:
        with httpx.Client(base_url=catalog_server.url, headers=tenant.reader.headers, timeout=30) as client:
            results.append(_get(client, tenant.cluster, until=now + 3_600_000, wait=3).status_code)

    waiters = [threading.Thread(target=wait) for _ in range(8)]  # FLOE_WATERMARK_WAITS_PER_CLUSTER
    for waiter in waiters:
        waiter.start()
    time.sleep(1.0)
    refused = _get(tenant.reader, tenant.cluster, until=now + 3_600_000, wait=3)
    assert refused.status_code == 429, refused.text
    assert "Too many watermark waits" in refused.json()["error"]["message"]
    for waiter in waiters:
        waiter.join(timeout=15)
    assert results == [200] * 8
    # Without a wait a reader is always answered.
    assert _get(tenant.reader, tenant.cluster, until=now).status_code == 200


def test_console_table_page_shows_the_watermark(tenant: Tenant, catalog_server: CatalogProcess) -> None:
    _commit(tenant.table, {}, {0: 4})
    at_ms = 1_795_860_000_000  # 2026-11-28 10:00:00 UTC
    assert _report(tenant.writer, tenant.cluster, at_ms, {0: 4, 1: 0}).status_code == 200
    browser = signed_in(catalog_server, tenant.reader_key)
    try:
        text = text_of(browser.page(f"/console/tables/default/{tenant.cluster}/events"))
    finally:
        browser.close()
    assert "Completeness" in text
    assert "Watermark 2026-11-28 10:00:00 UTC" in text
    assert "Offsets committed orders 100.00 % (4 of 4)" in text


# -- floe wait ----------------------------------------------------------------------------------------


def _floe_wait(server: CatalogProcess, key: Key, tmp_path: Path, *args: str) -> Result:
    key_file = tmp_path / "reader.json"
    key_file.write_text(json.dumps({"client_id": key.client_id, "client_secret": key.secret}))
    env = {"FLOE_URL": server.url, "FLOE_HOME": str(tmp_path / "home")}
    return CliRunner().invoke(main, ["wait", "--key-file", str(key_file), *args], env=env)


def test_floe_wait_exits_0_when_complete_and_2_after_the_timeout(
    tenant: Tenant, catalog_server: CatalogProcess, tmp_path: Path
) -> None:
    _commit(tenant.table, {}, {0: 2})
    assert _report(tenant.writer, tenant.cluster, 1_795_860_000_000, {0: 2}).status_code == 200
    table = f"{tenant.cluster}.events"
    done = _floe_wait(
        catalog_server, tenant.reader_key, tmp_path, "--table", table, "--until", "2026-11-28T10:00:00Z"
    )
    assert done.exit_code == 0, done.output
    assert f"{table} is complete through 2026-11-28T10:00:00.000Z" in done.output
    assert "offsets committed 100.00 %" in done.output

    began = time.monotonic()
    late = _floe_wait(
        catalog_server,
        tenant.reader_key,
        tmp_path,
        "--table",
        table,
        "--until",
        "2026-11-28T10:00:01Z",
        "--timeout",
        "2s",
    )
    assert late.exit_code == 2, late.output
    assert time.monotonic() - began >= 1.9
    assert "timed out after 2s" in late.output
    assert "watermark 2026-11-28T10:00:00.000Z" in late.output


def test_floe_wait_refuses_another_clusters_table(
    tenant: Tenant, catalog_server: CatalogProcess, tmp_path: Path, http: httpx.Client
) -> None:
    # A reader key of another cluster: the table does not exist for it.
    stranger = Key(*_key_of(http, tenant))
    result = _floe_wait(
        catalog_server, stranger, tmp_path, "--table", f"{tenant.cluster}.events", "--until", "0"
    )
    assert result.exit_code == 1, result.output
    assert "does not exist" in result.output


def _key_of(http: httpx.Client, tenant: Tenant) -> tuple[str, str]:
    cluster = f"wm_{uuid.uuid4().hex[:8]}"
    assert http.post("/management/v1/clusters", json={"name": cluster}).status_code == 201
    created = http.post("/management/v1/keys", json={"role": "reader", "cluster": cluster}).json()
    return created["client_id"], created["client_secret"]


def test_a_topic_no_longer_reported_stops_counting(tenant: Tenant) -> None:
    now = int(time.time() * 1000)
    old = {
        "warehouse": "default",
        "observed-at-ms": now - 60_000,
        "tables": [
            {"namespace": [tenant.cluster], "table": "events", "topic": "orders.v0", "end-offsets": {"0": 9}}
        ],
    }
    assert tenant.writer.post(f"{WATERMARK}/observations", json=old).status_code == 200
    assert (
        _get(tenant.reader, tenant.cluster).json()["watermark-ms"] is None
    )  # nothing of orders.v0 committed
    # floe.yaml now names topic orders: ingestion reports it alone from then on.
    _commit(tenant.table, {}, {0: 2})
    assert _report(tenant.writer, tenant.cluster, now, {0: 2}).status_code == 200
    body = _get(tenant.reader, tenant.cluster).json()
    assert body["watermark-ms"] == now
    assert sorted(t["topic"] for t in body["topics"]) == ["orders", "orders.v0"]  # both still shown


def test_a_report_leaves_out_a_table_that_does_not_exist(tenant: Tenant) -> None:
    now = int(time.time() * 1000)
    body = {
        "warehouse": "default",
        "observed-at-ms": now,
        "tables": [
            {"namespace": [tenant.cluster], "table": "dropped", "topic": "gone", "end-offsets": {"0": 1}},
            {"namespace": [tenant.cluster], "table": "events", "topic": "orders", "end-offsets": {"0": 0}},
        ],
    }
    response = tenant.writer.post(f"{WATERMARK}/observations", json=body)
    assert response.status_code == 200, response.text
    assert [t["table"] for t in response.json()["tables"]] == ["events"]
    assert _get(tenant.reader, tenant.cluster).json()["watermark-ms"] == now
