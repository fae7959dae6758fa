"""`floe up`'s ready summary, run as printed: its pyiceberg line and its DuckDB program, with the
secret filled in where the summary says, read a table (against a `floe serve` process) whose namespace
and name hold quotes, a backslash, a semicolon and non-ASCII letters: the quoting is right for the
engines, not only for their parsers (tests/unit/test_ready_summary.py parses every line)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, TimestamptzType

from devtools.catalog_server import CatalogProcess
from floe.cli.ready_summary import SECRET_PLACEHOLDER, ready_summary
from tests.unit.test_ready_summary import Table, block

TABLE_NAME = 'it\'s "quoted" \\ ünï 表; --'


@pytest.mark.timeout(600)
def test_the_summary_lines_run_with_quoted_names(catalog_server: CatalogProcess, tmp_path: Path) -> None:
    namespace = f'summary "{uuid.uuid4().hex[:6]}"\'s'
    catalog = catalog_server.catalog(warehouse="default")
    catalog.create_namespace(namespace)
    table = catalog.create_table(
        (namespace, TABLE_NAME),
        Schema(NestedField(1, "id", LongType()), NestedField(2, "seen", TimestamptzType(), required=False)),
    )
    times = [datetime(2026, 11, 28, 10, 0, second, tzinfo=UTC) for second in (1, 2, 3)]
    table.append(
        pa.table(
            {"id": pa.array([1, 2, 3], pa.int64()), "seen": pa.array(times, pa.timestamp("us", tz="UTC"))}
        )
    )
    summary = ready_summary(
        url=catalog_server.url,
        home=Path("/tmp/floe-home"),
        client_id=catalog_server.admin_client_id,
        warehouse="default",
        tables=[Table((namespace,), TABLE_NAME)],  # type: ignore[list-item]
        broker=None,
        logs=[],
        metrics_port=0,
        maintenance=False,
        seconds=1.0,
    ).plain
    secret = catalog_server.admin_client_secret  # URL-safe base64: nothing to quote in Python or SQL

    (pyiceberg,) = block(summary, "pyiceberg")
    pyiceberg_program = "from pyiceberg.catalog import load_catalog\nprint(" + pyiceberg + ".num_rows)"
    result = subprocess.run(
        [sys.executable, "-c", pyiceberg_program.replace(SECRET_PLACEHOLDER, secret)],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ),
        check=False,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert result.stdout.splitlines()[-1] == "3"

    # DuckDB's block is a Python program, run as printed in a fresh HOME (DuckDB's extension directory,
    # ~/.duckdb, starts empty): it installs the extensions from the `duckdb` extra's wheels itself, with
    # automatic downloads off. A timestamptz read into Python needs pytz, which the extra brings.
    install, *program = block(summary, "DuckDB")
    assert "-m pip install '.[duckdb]'" in install
    assert "INSTALL iceberg" not in summary
    query = program[-1]
    assert query.startswith("print(con.sql(")
    assert "SELECT count(*) FROM " in query
    program.append(query.replace("count(*)", "max(seen)"))
    result = subprocess.run(
        [sys.executable, "-c", "\n".join(program).replace(SECRET_PLACEHOLDER, secret)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HOME": str(tmp_path), "TZ": "UTC"},
        check=False,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    count, latest = result.stdout.splitlines()
    assert count == "[(3,)]"
    assert latest.startswith("[(datetime.datetime(2026, 11, 28, 10, 0, 3, tzinfo="), latest
    assert list((tmp_path / ".duckdb" / "extensions").rglob("iceberg.duckdb_extension"))
