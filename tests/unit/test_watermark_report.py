"""Ingestion's end-offset reports (ingest/watermark_report.py): one request per cluster and warehouse for
the running tables, each observation reported once, floe's answer exported as gauges, a refused report
logged and dropped (the next poll reports again)."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

import pytest

from catalog.client import FloeClient
from ingest import metrics
from ingest.ingest_table import IngestTable
from ingest.watermark_report import report_watermarks
from tests.ingest_tables import json_table


def _table(name: str, cluster: str = "local") -> IngestTable:
    return json_table(name, cluster=cluster, topic=f"{name}_topic")


@dataclass
class Response:
    status_code: int
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode()

    def json(self) -> Any:
        return json.loads(self.content)


class FakeFloe(FloeClient):
    """floe's client with its transport replaced: each request answered here."""

    def __init__(self, status: int = 200) -> None:  # no HTTP client, no token
        self.status = status
        self.bodies: list[dict[str, Any]] = []

    def send(self, method: str, path: str, **kwargs: Any) -> Response:
        assert (method, path) == ("POST", "/management/v1/watermark/observations")
        body = kwargs["body"]
        self.bodies.append(body)
        if self.status != 200:
            return Response(
                self.status, b'{"error": {"message": "no", "type": "ForbiddenException", "code": 403}}'
            )
        answer = {
            "tables": [
                {
                    "namespace": t["namespace"],
                    "table": t["table"],
                    "watermark-ms": body["observed-at-ms"],
                    "watermark": None,
                    "topics": [
                        {
                            "topic": t["topic"],
                            "watermark-ms": body["observed-at-ms"],
                            "watermark": None,
                            "offset-completeness": 0.5,
                            "committed-records": 1,
                            "end-records": 2,
                            "as-of-ms": body["observed-at-ms"],
                            "partitions": [],
                        }
                    ],
                }
                for t in body["tables"]
            ]
        }
        return Response(200, json.dumps(answer).encode())


def _gauge(name: str, table: str) -> float | None:
    return metrics.REGISTRY.get_sample_value(name, {"table": table})


def test_running_tables_reported_once_per_cluster_and_gauges_set() -> None:
    floe = {"a": FakeFloe(), "b": FakeFloe()}
    events, orders, gone = _table("wr_events", "a"), _table("wr_orders", "a"), _table("wr_gone", "a")
    other = _table("wr_other", "b")
    observed = {t.name: (t, 1_700_000_000_000, {0: 5, 1: 0}) for t in (events, orders, gone, other)}
    running = [events.name, orders.name, other.name]
    report_watermarks(observed, running, lambda cluster: floe[cluster])
    assert observed == {}  # each observation reported (or dropped) once
    assert len(floe["a"].bodies) == 1
    assert len(floe["b"].bodies) == 1
    body = floe["a"].bodies[0]
    assert body["observed-at-ms"] == 1_700_000_000_000
    assert [(t["table"], t["topic"], t["end-offsets"]) for t in body["tables"]] == [
        ("wr_events", "wr_events_topic", {"0": 5, "1": 0}),
        ("wr_orders", "wr_orders_topic", {"0": 5, "1": 0}),
    ]
    assert _gauge("floe_ingest_watermark_timestamp_seconds", "a.wr_events") == 1_700_000_000
    assert _gauge("floe_ingest_offset_completeness", "b.wr_other") == 0.5
    assert _gauge("floe_ingest_watermark_timestamp_seconds", "a.wr_gone") is None


def test_a_refused_report_is_logged_and_dropped(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="ingest.watermark_report")
    refusing = FakeFloe(status=403)
    table = _table("wr_refused")
    observed = {table.name: (table, 1_000, {0: 1})}
    report_watermarks(observed, [table.name], lambda _: refusing)
    assert observed == {}
    assert "cannot report end offsets of 1 tables" in caplog.text
    assert _gauge("floe_ingest_watermark_timestamp_seconds", "local.wr_refused") is None


def test_floe_status_shows_the_watermark(monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner
    from prometheus_client import generate_latest

    from catalog.ingest_metrics import ingest_status
    from floe.cli import status

    table = _table("wr_status")
    report_watermarks({table.name: (table, 1_795_860_000_000, {0: 3})}, [table.name], lambda _: FakeFloe())
    parsed = ingest_status(generate_latest(metrics.REGISTRY).decode())
    entry = next(t for t in parsed["tables"] if t["table"] == "local.wr_status")
    assert entry["watermark"] == 1_795_860_000
    assert entry["offset_completeness"] == 0.5
    monkeypatch.setattr(status, "read_status", lambda _url: {"tables": [entry]})
    monkeypatch.setattr(status, "admin_credentials", lambda: ("id", "secret"))
    monkeypatch.setattr(status, "read_maintenance", lambda *_: [])
    result = CliRunner().invoke(status.status_command, [], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    assert "watermark (UTC)" in result.output
    assert "2026-11-28 10:00:00" in result.output
