"""DuckDB through a cluster reader's key reads its cluster and only that: the other cluster's tables
are neither listed nor readable. The rest of authorization is in tests/api/test_security.py, whose
`two_clusters` scene this module shares."""

from __future__ import annotations

import httpx
import pytest

from devtools.catalog_server import CatalogProcess
from tests.api.test_security import TwoClusters, make_two_clusters
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
