"""A dead-letter redrive (ingest/dlq_redrive.py) against floe's own catalog: one `/transactions/commit`
moves what now decodes from the dead-letter table to the table, the same commit sent again is refused
(409), the audit entry carries the counts and the console's dead-letters page lists the redrive.
With Kafka, ingestion and kill -9: tests/e2e/test_dlq_redrive.py."""

from __future__ import annotations

import datetime as dt
import html
import uuid
from typing import Any

import httpx
import pyarrow as pa
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField

from catalog.pipelines import dlq_schema
from catalog.pipelines.columns import KAFKA_FIELD
from devtools.catalog_server import CatalogProcess
from ingest.dlq_redrive import redrive
from tests.api.test_console import Key, create_key, signed_in

AT = dt.datetime(2026, 11, 28, 9, tzinfo=dt.UTC)


def _letters(values: list[bytes]) -> pa.Table:
    rows = [
        {
            "topic": "orders",
            "partition": 0,
            "offset": n,
            "timestamp": AT,
            "key": None,
            "value": value,
            "headers": None,
            "error": "field 'amount': expected int (does not fit int)",
            "failed_at": AT,
        }
        for n, value in enumerate(values)
    ]
    return pa.Table.from_pylist(rows, schema=dlq_schema().as_arrow())


def test_a_redrive_commits_once_is_audited_and_shown(catalog_server: CatalogProcess) -> None:
    cluster = f"rd_{uuid.uuid4().hex[:6]}"
    headers = {"Authorization": f"Bearer {catalog_server.token()}"}
    with httpx.Client(base_url=catalog_server.url, headers=headers, timeout=30) as http:
        assert http.post("/management/v1/clusters", json={"name": cluster}).status_code == 201
        catalog = catalog_server.catalog(warehouse="default")
        schema = Schema(
            NestedField(1, "id", LongType(), required=True),
            NestedField(2, "amount", LongType(), required=False),
            KAFKA_FIELD,
        )
        catalog.create_table(f"{cluster}.orders", schema, properties={"floe.source.format": "json"})
        dlq = catalog.create_table(f"{cluster}.orders_dlq", dlq_schema())
        dlq.append(_letters([b'{"id": 1, "amount": 3000000000}', b'{"id": 2, "amount": 4000000000}', b"{x"]))
        # The cluster's writer key is enough to redrive (it reads and commits the cluster's tables).
        writer = create_key(http, "writer", cluster)
        as_writer = catalog_server.catalog(f"{writer.client_id}:{writer.secret}", warehouse="default")
        prefix = str(as_writer.properties.get("prefix") or "default")
        token = catalog_server.token(writer.client_id, writer.secret)
        sent: list[list[dict[str, Any]]] = []

        def send(changes: list[dict[str, Any]]) -> str:
            sent.append(changes)
            response = http.post(
                f"/v1/{prefix}/transactions/commit",
                json={"table-changes": changes},
                headers={"Authorization": f"Bearer {token}"},
            )
            return {204: "committed", 409: "refused"}.get(response.status_code, response.text)

        main_id, dlq_id = (cluster, "orders"), (cluster, "orders_dlq")
        result = redrive(as_writer.load_table, send, main_id, dlq_id)
        assert (result.redriven, result.still_failing, result.reasons_changed, result.commits) == (2, 1, 1, 1)
        rows = catalog.load_table(main_id).scan().to_arrow().to_pylist()
        assert sorted((r["id"], r["amount"], r["_kafka"]["offset"]) for r in rows) == [
            (1, 3_000_000_000, 0),
            (2, 4_000_000_000, 1),
        ]
        kept = catalog.load_table(dlq_id).scan().to_arrow().to_pylist()
        assert [(k["offset"], k["error"].startswith("not valid JSON")) for k in kept] == [(2, True)]
        # The same commit again (a zombie redrive): floe refuses it, nothing lands twice.
        response = http.post(f"/v1/{prefix}/transactions/commit", json={"table-changes": sent[0]})
        assert response.status_code == 409, response.text
        assert redrive(as_writer.load_table, send, main_id, dlq_id).redriven == 0
        assert len(catalog.load_table(main_id).scan().to_arrow()) == 2
        # No Kafka offsets were stored by it: the tables' offsets fence is as ingestion left it (none).
        offsets = http.get(
            "/management/v1/kafka-offsets",
            params={"warehouse": "default", "namespace": cluster, "table": "orders"},
        ).json()
        assert offsets["topics"] == []
        audit = http.get(
            "/management/v1/audit", params={"action": "commitTransaction", "target": f"{cluster}.orders_dlq"}
        ).json()["entries"]
        assert [e["target"].split(" ")[-2:] for e in audit if e["outcome"] == "ok"] == [
            ["redriven=2", "still-failing=1"]
        ]
    browser = signed_in(
        catalog_server, Key(catalog_server.admin_client_id, catalog_server.admin_client_secret)
    )
    try:
        page = browser.get(f"/console/tables/default/{cluster}/orders/dead-letters")
        assert page.status_code == 200, page.text
        text = html.unescape(page.text)
        assert f"floe dlq redrive --table {cluster}.orders" in text
        redrives = text[text.index('id="redrives"') :]
        assert '<td class="num">2</td><td class="num">1</td>' in redrives  # redriven, still failing
        assert "No redrives yet." not in redrives
    finally:
        browser.close()
