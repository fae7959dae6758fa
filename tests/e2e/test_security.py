"""Security with real processes: DuckDB through a cluster reader's key reads its cluster and only that
(the other cluster's tables are neither listed nor readable), and the `floe clusters`/`floe keys`
command line manages clusters and keys; then nothing either used is in the server's log. The rest is in
tests/api/test_security.py, whose scenes and helpers this module shares."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import httpx
import pytest

from devtools.catalog_server import CatalogProcess
from tests.api.test_security import (
    SECRETS_SEEN,
    Key,
    TwoClusters,
    make_two_clusters,
    token_for,
)
from tests.api.test_security import (
    test_no_secret_or_token_in_the_server_log as check_the_server_log,
)
from tests.e2e.duckdb_client import attach_catalog, connect


@pytest.fixture
def two_clusters(catalog_server: CatalogProcess, http: httpx.Client) -> TwoClusters:
    return make_two_clusters(catalog_server, http)


@pytest.mark.e2e
def test_duckdb_reads_its_cluster_and_only_that(
    catalog_server: CatalogProcess, two_clusters: TwoClusters, tmp_path_factory: pytest.TempPathFactory
) -> None:
    t = two_clusters
    connection = connect(tmp_path_factory.mktemp("duckdb-ext"))
    attach_catalog(
        connection,
        endpoint=catalog_server.url,
        warehouse="default",
        client_id=t.a_reader.client_id,
        client_secret=t.a_reader.client_secret,
    )
    assert connection.execute(f'SELECT count(*) FROM floe."{t.a}".events').fetchone() == (3,)
    tables = {(row[1], row[2]) for row in connection.execute("SHOW ALL TABLES").fetchall()}
    assert (t.a, "events") in tables
    assert all(schema != t.b for schema, _ in tables)
    with pytest.raises(Exception, match=r"(?i)not exist|not found|catalog error"):
        connection.execute(f'SELECT count(*) FROM floe."{t.b}".events').fetchone()


def _floe(
    server: CatalogProcess, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "floe.cli", *args],
        env={
            **os.environ,
            "FLOE_URL": server.url,
            "FLOE_CLIENT_ID": server.admin_client_id,
            "FLOE_CLIENT_SECRET": server.admin_client_secret,
            **(env or {}),
        },
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cli_manages_clusters_and_keys(catalog_server: CatalogProcess) -> None:
    name = f"cli_{uuid.uuid4().hex[:6]}"
    created = _floe(catalog_server, "clusters", "create", name, "--output", "json")
    assert created.returncode == 0, created.stderr
    assert json.loads(created.stdout)["name"] == name
    listed = _floe(catalog_server, "clusters", "list", "--output", "json")
    assert name in {c["name"] for c in json.loads(listed.stdout)["clusters"]}
    table = _floe(catalog_server, "clusters", "list")
    assert name in table.stdout

    made = _floe(catalog_server, "keys", "create", "--cluster", name, "--role", "reader", "--expires", "90d")
    assert made.returncode == 0, made.stderr
    key = json.loads(made.stdout)
    SECRETS_SEEN.add(key["client_secret"])
    assert key["cluster"] == name
    assert key["role"] == "reader"
    assert key["expires_at"]
    assert token_for(catalog_server, Key(key["client_id"], key["client_secret"]))

    keys = json.loads(_floe(catalog_server, "keys", "list", "--cluster", name, "--output", "json").stdout)[
        "keys"
    ]
    assert [k["client_id"] for k in keys] == [key["client_id"]]
    rotated = _floe(catalog_server, "keys", "rotate", key["client_id"])
    assert rotated.returncode == 0, rotated.stderr
    SECRETS_SEEN.add(json.loads(rotated.stdout)["client_secret"])
    assert _floe(catalog_server, "keys", "revoke", key["client_id"]).returncode == 0

    bad = _floe(catalog_server, "keys", "list", env={"FLOE_CLIENT_SECRET": "wrong"})
    assert bad.returncode != 0
    assert "Authentication failed" in bad.stderr
    assert "wrong" not in bad.stderr
    refused = _floe(catalog_server, "keys", "create", "--cluster", "no_such_cluster", "--role", "reader")
    assert refused.returncode != 0
    assert "Cluster does not exist" in refused.stderr
    assert _floe(catalog_server, "clusters", "delete", name).returncode == 0


def test_no_secret_or_token_in_the_server_log(catalog_server: CatalogProcess, http: httpx.Client) -> None:
    """Runs after the tests above (same module, same server): nothing they used was logged."""
    check_the_server_log(catalog_server, http)
