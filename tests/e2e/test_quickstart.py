"""README's quick start, for real: `floe up` on a fresh FLOE_HOME starts the catalog, a local Kafka broker and
ingestion; records produced to `events` are queryable from DuckDB within a minute; Ctrl-C stops it all."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from catalog.cli.up import port_answers
from devtools.ports import free_port
from tests.e2e.duckdb_client import attach_catalog, connect
from tests.e2e.ingest_harness import produce

# `floe up` (catalog, Kafka broker and Spark ingestion) queried with DuckDB: `pytest -m "not e2e"` skips it.
pytestmark = pytest.mark.e2e


def _wait_for(log: Path, text: str, process: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        content = log.read_text(errors="replace") if log.exists() else ""
        if text in content:
            return
        assert process.poll() is None, content[-4000:]
        time.sleep(0.5)
    raise AssertionError(f"{text!r} not seen: {log.read_text(errors='replace')[-4000:]}")


def test_floe_up_ingests_a_topic_that_duckdb_then_queries(tmp_path: Path) -> None:
    home = tmp_path / "home"
    port, kafka_port, metrics_port = free_port(), free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOE_")}
    env |= {"FLOE_HOME": str(home), "FLOE_SPARK_MASTER": "local[2]"}
    log = tmp_path / "up.log"
    command = [
        sys.executable,
        "-m",
        "catalog.cli",
        "up",
        "--port",
        str(port),
        "--kafka-port",
        str(kafka_port),
        "--metrics-port",
        str(metrics_port),
    ]
    with log.open("wb") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait_for(log, "floe ingest", process, timeout=240)
        assert (home / "floe.yaml").exists()
        started = time.monotonic()
        produce(
            f"127.0.0.1:{kafka_port}",
            "events",
            (json.dumps({"user_id": i, "action": "click", "amount": i / 2}).encode() for i in range(100)),
        )
        admin = json.loads((home / "admin.json").read_text())
        duck = connect(tmp_path / "duckdb")
        attach_catalog(
            duck,
            endpoint=f"http://127.0.0.1:{port}",
            warehouse="default",
            client_id=admin["client_id"],
            client_secret=admin["client_secret"],
        )
        count = 0
        while time.monotonic() - started < 60:
            try:
                row = duck.execute("SELECT count(*) FROM floe.local.events").fetchone()
                count = int(row[0]) if row else 0
            except Exception:
                count = 0
            if count == 100:
                break
            time.sleep(1)
        assert count == 100, log.read_text(errors="replace")[-4000:]
        assert duck.execute("SELECT sum(amount) FROM floe.local.events").fetchone() == (
            sum(i / 2 for i in range(100)),
        )
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            process.kill()
            pytest.fail(f"floe up did not stop on Ctrl-C: {log.read_text(errors='replace')[-4000:]}")
    assert not port_answers("127.0.0.1", port), "the catalog kept running"
    assert not port_answers("127.0.0.1", kafka_port), "the broker kept running"
