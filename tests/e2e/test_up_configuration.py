"""`floe up`'s configuration rule against a real catalog server (issue 12, item 2).

The pipeline applied in the catalog is the source of truth: floe.yaml is applied on a fresh catalog or when
the file changed since floe up last applied it, and a restart never undoes a newer `floe apply`. A dry run
compares with the applied revision."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from catalog.client import FloeClient
from catalog.pipelines.config import read_yaml
from devtools.catalog_server import CatalogProcess
from floe.cli.up import AppliedRecord, example_config, settle_configuration

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CatalogProcess]:
    """A catalog of its own: the test counts pipeline revisions from the first."""
    with CatalogProcess(home=tmp_path_factory.mktemp("up-config")) as process:
        yield process


def _settle(client: FloeClient, home: Path, text: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    raw = read_yaml(text)[0]
    pipeline = settle_configuration(client, home, home / "floe.yaml", text, raw)
    return pipeline.revision, capsys.readouterr().err


def test_restarts_keep_the_applied_configuration(
    server: CatalogProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = example_config(9092)
    # The example is complete: its cluster is declared, so floe apply accepts the file as it is.
    assert read_yaml(text)[0]["source_clusters"][0]["name"] == "local"
    with FloeClient(server.url, server.admin_client_id, server.admin_client_secret) as client:
        first, said = _settle(client, tmp_path, text, capsys)
        assert "applied as revision" in said
        assert AppliedRecord.read(tmp_path) is not None
        (cluster,) = client.clusters()
        assert (cluster.name, cluster.properties["floe.bootstrap.servers"]) == ("local", "127.0.0.1:9092")

        again, said = _settle(client, tmp_path, text, capsys)
        assert again == first
        assert "unchanged since floe up applied it" in said

        added: dict[str, Any] = read_yaml(text)[0]
        clicks = copy.deepcopy(added["tables"][0])
        clicks["source_topic"] = "clicks"
        added["tables"].append(clicks)
        newer = client.apply_pipeline(added).revision
        assert newer == first + 1
        kept, said = _settle(client, tmp_path, text, capsys)
        assert kept == newer, "a restart undid floe apply"

        # Without clicks, applying add.yaml again resumes its ingestion: the dry run says so.
        edited = text.replace("type: double, optional: true", "type: double, optional: true, doc: euros")
        changed, said = _settle(client, tmp_path, edited, capsys)
        assert changed == newer + 1
        assert f"changed since floe up last applied it: applied as revision {changed}" in said
        assert f"replaces revision {newer}" in said
        dry = client.apply_pipeline(added, dry_run=True)
        assert {(e.table, e.action) for e in dry.plan} >= {("clicks", "resumed"), ("clicks_dlq", "resumed")}

        # A home whose floe up never applied anything leaves the catalog's configuration alone.
        other = tmp_path / "other"
        other.mkdir()
        untouched, said = _settle(client, other, text, capsys)
        assert untouched == changed
        assert "was not applied" in said
