"""`floe up`'s ready summary, run as printed: its pyiceberg line and its DuckDB statements, with the
secret filled in where the summary says, read a table (against a `floe serve` process) whose namespace
and name hold quotes, a backslash, a semicolon and non-ASCII letters: the quoting is right for the
engines, not only for their parsers (tests/unit/test_ready_summary.py parses every line)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField

from catalog.cli.ready_summary import SECRET_PLACEHOLDER, ready_summary
from devtools.catalog_server import CatalogProcess
from tests.e2e.duckdb_client import connect
from tests.unit.test_ready_summary import Table, block

TABLE_NAME = 'it\'s "quoted" \\ ünï 表; --'


@pytest.mark.timeout(600)
def test_the_summary_lines_run_with_quoted_names(
    catalog_server: CatalogProcess, duckdb_extensions: Path
) -> None:
    namespace = f'summary "{uuid.uuid4().hex[:6]}"\'s'
    catalog = catalog_server.catalog(warehouse="default")
    catalog.create_namespace(namespace)
    table = catalog.create_table((namespace, TABLE_NAME), Schema(NestedField(1, "id", LongType())))
    table.append(pa.table({"id": pa.array([1, 2, 3], pa.int64())}))
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
    program = "from pyiceberg.catalog import load_catalog\nprint(" + pyiceberg + ".num_rows)"
    result = subprocess.run(
        [sys.executable, "-c", program.replace(SECRET_PLACEHOLDER, secret)],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ),
        check=False,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert result.stdout.splitlines()[-1] == "3"

    install, create_secret, attach, query = block(summary, "DuckDB")
    assert install == "INSTALL iceberg; LOAD iceberg;"  # here: the extensions from their wheels instead
    duck = connect(duckdb_extensions)
    duck.execute(create_secret.replace(SECRET_PLACEHOLDER, secret))
    duck.execute(attach)
    assert duck.execute(query).fetchall() == [(3,)]
