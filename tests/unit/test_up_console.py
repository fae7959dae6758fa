"""`floe up` shows its console: the ready summary names `/console`, and the catalog it starts reads the
metrics of the ingestion it runs (FLOE_CONSOLE_INGEST_METRICS_URL), so the overview shows lag and
records/s (tests/api/test_console.py::test_overview_shows_the_ingestion_services_lag proves the reading)."""

from __future__ import annotations

from pathlib import Path

import pytest

from catalog.settings import Settings
from floe.cli.up import catalog_environment
from tests.unit.test_ready_summary import PLAIN, URL, summary


def test_the_ready_summary_names_the_console() -> None:
    lines = summary(*PLAIN).split("\n")
    console = [line for line in lines if line.strip().startswith("console")]
    assert console == [
        f"  console      {URL}/console  "
        "(sign in with the admin key; lag and records/s from ingestion's metrics)"
    ]


def test_the_catalog_floe_up_starts_reads_ingestions_metrics(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = catalog_environment(tmp_path, 9464)
    assert env["FLOE_HOME"] == str(tmp_path)
    assert env["FLOE_CONSOLE_INGEST_METRICS_URL"] == "http://127.0.0.1:9464/metrics"
    for name in ("FLOE_HOME", "FLOE_CONSOLE_INGEST_METRICS_URL"):  # the catalog reads it as the console's
        monkeypatch.setenv(name, env[name])
    assert Settings().console_ingest_metrics_url == "http://127.0.0.1:9464/metrics"


def test_metrics_off_leaves_the_console_without_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FLOE_CONSOLE_INGEST_METRICS_URL", raising=False)
    assert "FLOE_CONSOLE_INGEST_METRICS_URL" not in catalog_environment(tmp_path, 0)
