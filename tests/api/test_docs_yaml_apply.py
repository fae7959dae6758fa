"""Every complete floe.yaml example of README and the documentation site (docs/) is applied to a real
catalog as written (issue 33: "each floe.yaml example is applied by a test"): `floe apply`'s path through
the management API, the tables created. Only the clusters are renamed, so each example has its own. The S3
warehouse example names a bucket the test cannot reach: it is applied as a dry run (validated and planned
against the catalog, nothing stored). tests/unit/test_readme_yaml.py validates every block, partial ones
included."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
import yaml

from catalog.pipelines import table_name_for_topic
from tests.unit.test_readme_yaml import yaml_documents

PIPELINE = "/management/v1/pipeline"


def complete_examples() -> list[tuple[str, str]]:
    return [
        (where, body)
        for where, body in yaml_documents()
        if body.startswith("source_clusters:") and "\ntables:" in body
    ]


def with_own_clusters(data: dict[str, Any]) -> dict[str, Any]:
    renames = {c["name"]: f"{c['name']}_{uuid.uuid4().hex[:8]}" for c in data["source_clusters"]}
    for cluster in data["source_clusters"]:
        cluster["name"] = renames[cluster["name"]]
    for table in data["tables"]:
        table["source_cluster_name"] = renames[table["source_cluster_name"]]
    return data


def test_there_are_complete_examples() -> None:
    assert len(complete_examples()) >= 10


@pytest.mark.parametrize("body", [pytest.param(body, id=where) for where, body in complete_examples()])
def test_example_applies(http: httpx.Client, body: str) -> None:
    config = with_own_clusters(yaml.safe_load(body))
    in_s3 = str(config.get("destination_bucket_url", "")).startswith("s3://")
    response = http.put(PIPELINE, json={"config": config, "dry_run": in_s3})
    assert response.status_code == 200, response.text
    answer = response.json()
    planned = {(entry["namespace"], entry["table"]): entry["action"] for entry in answer["plan"]}
    for table in config["tables"]:
        name = table_name_for_topic(table["source_topic"])
        assert planned.get((table["source_cluster_name"], name)) == "create", (name, answer["plan"])
    assert answer["dry_run"] is in_s3
