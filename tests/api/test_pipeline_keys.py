"""Pipeline keys (issue 29, item 13): floe's ingestion and maintenance run under writer keys of their
source cluster (`pipeline-ingest-<cluster>`, `pipeline-maintain-<cluster>`), created and rotated by floe
with the admin key and kept in 0600 files, never under the admin key; such a key can do nothing beyond
its cluster's tables."""

from __future__ import annotations

import json
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path

import click
import httpx
import pytest
from click.testing import CliRunner
from pyiceberg.exceptions import ForbiddenError, NoSuchNamespaceError, OAuthError

from catalog.client import ClientError, FloeClient, Forbidden
from devtools.catalog_server import CatalogProcess
from floe.cli import main
from floe.cli.pipeline_keys import INGEST, MAINTAIN, PipelineKeys, read_key_file
from floe.cli.remote import cli_credentials


@pytest.fixture
def admin(catalog_server: CatalogProcess) -> Iterator[FloeClient]:
    with FloeClient(
        catalog_server.url, catalog_server.admin_client_id, catalog_server.admin_client_secret
    ) as c:
        yield c


@pytest.fixture
def two_clusters(admin: FloeClient) -> tuple[str, str]:
    names = (f"pk_{uuid.uuid4().hex[:6]}", f"pk_{uuid.uuid4().hex[:6]}")
    for name in names:
        admin.create_cluster(name)
    return names


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_keys_are_created_once_per_run_and_rotated_by_the_next(
    catalog_server: CatalogProcess, admin: FloeClient, two_clusters: tuple[str, str], tmp_path: Path
) -> None:
    cluster, _ = two_clusters
    keys = PipelineKeys(admin, tmp_path)
    ingest = keys.key(INGEST, cluster)
    assert ingest.name == f"pipeline-ingest-{cluster}"
    assert keys.key(INGEST, cluster) is ingest  # one secret per run
    maintain = keys.key(MAINTAIN, cluster)
    assert maintain.client_id != ingest.client_id
    listed = {k.client_id: k for k in admin.keys(cluster)}
    for key in (ingest, maintain):
        record = listed[key.client_id]
        assert (record.role, record.cluster, record.description) == ("writer", cluster, key.name)
        path = keys.path(INGEST if key is ingest else MAINTAIN, cluster)
        assert _mode(path) == 0o600
        assert read_key_file(path) == (key.client_id, key.client_secret)
    assert _mode(tmp_path / "keys") == 0o700
    assert ingest.client_secret not in repr(ingest)

    # The next run (floe up's next start) rotates: same key, new secret, the old one refused at once.
    rotated = PipelineKeys(admin, tmp_path).key(INGEST, cluster)
    assert rotated.client_id == ingest.client_id
    assert rotated.client_secret != ingest.client_secret
    assert catalog_server.token(rotated.client_id, rotated.client_secret)
    with pytest.raises(httpx.HTTPStatusError, match="401"):
        catalog_server.token(ingest.client_id, ingest.client_secret)

    # A lost file: a new key, and the one it named revoked (one live key per name).
    keys.path(INGEST, cluster).unlink()
    renewed = PipelineKeys(admin, tmp_path).key(INGEST, cluster)
    assert renewed.client_id != ingest.client_id
    named = [k for k in admin.keys(cluster) if k.description == renewed.name]
    assert {k.client_id for k in named if k.revoked_at is None} == {renewed.client_id}


def test_a_pipeline_key_reaches_only_its_cluster_tables(
    catalog_server: CatalogProcess, admin: FloeClient, two_clusters: tuple[str, str], tmp_path: Path
) -> None:
    cluster, other = two_clusters
    key = PipelineKeys(admin, tmp_path).key(INGEST, cluster)
    catalog = catalog_server.catalog(credential=f"{key.client_id}:{key.client_secret}")
    catalog.create_namespace((cluster, "sub"))  # what ingestion needs: its cluster's namespaces and tables
    with pytest.raises(ForbiddenError):
        catalog.create_namespace((other, "sub"))
    with pytest.raises(NoSuchNamespaceError):
        catalog.list_tables((other,))
    with FloeClient(catalog_server.url, key.client_id, key.client_secret) as pipeline:
        with pytest.raises(Forbidden):
            pipeline.create_key("admin", description="escalation")
        with pytest.raises(Forbidden):
            pipeline.create_key("writer", cluster=other)
        with pytest.raises(Forbidden):
            pipeline.keys()
        with pytest.raises(ClientError):
            pipeline.apply_pipeline({"source_clusters": [], "tables": []})
    # A revoked key gets nothing.
    admin.revoke_key(key.client_id)
    with pytest.raises(OAuthError):
        catalog_server.catalog(credential=f"{key.client_id}:{key.client_secret}")


def test_floe_keys_pipeline_and_key_file(
    catalog_server: CatalogProcess, two_clusters: tuple[str, str], tmp_path: Path
) -> None:
    cluster, _ = two_clusters
    env = {
        "FLOE_URL": catalog_server.url,
        "FLOE_CLIENT_ID": catalog_server.admin_client_id,
        "FLOE_CLIENT_SECRET": catalog_server.admin_client_secret,
        "FLOE_HOME": str(tmp_path / "home"),
    }
    result = CliRunner().invoke(main, ["keys", "pipeline", cluster, "--purpose", "ingest"], env=env)
    assert result.exit_code == 0, result.output
    path = tmp_path / "home" / "keys" / f"pipeline-ingest-{cluster}.json"
    data = json.loads(path.read_text())
    assert data["client_secret"] not in result.output  # printed: the file, never the secret
    assert str(path) in result.output
    assert cli_credentials(path) == (data["client_id"], data["client_secret"])
    unknown = CliRunner().invoke(main, ["keys", "pipeline", "no_such_cluster"], env=env)
    assert unknown.exit_code == 1, unknown.output
    assert "Traceback" not in unknown.output
    assert "no_such_cluster" in unknown.output
    # A bad key file is one clear error that shows nothing of the file.
    broken = tmp_path / "broken.json"
    broken.write_text('{"client_secret": "do-not-print"}')
    with pytest.raises(click.ClickException, match="client_id and client_secret") as refused:
        cli_credentials(broken)
    assert "do-not-print" not in str(refused.value)
