"""`floe maintain` through the catalog's API: floe.yaml maintenance policies refused by apply, and pass
records (both backends, the session server). The planner and policies are in tests/unit, one real pass
with Spark in tests/e2e.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import TYPE_CHECKING, Any

import httpx

from catalog.pipelines import load_yaml
from devtools.catalog_server import CatalogProcess

if TYPE_CHECKING:
    pass

from tests.unit.test_maintenance import PASSES, PIPELINE_YAML


def test_bad_maintenance_policy_is_refused_by_apply(http: httpx.Client) -> None:
    config = load_yaml(PIPELINE_YAML.format(cluster=f"c_{uuid.uuid4().hex[:8]}")).to_json()
    config["tables"][0]["maintenance"]["min_snapshots_to_keep"] = 0
    response = http.put("/management/v1/pipeline", json={"config": config})
    assert response.status_code == 400, response.text
    errors = {e["path"]: e["message"] for e in response.json()["error"]["errors"]}
    assert set(errors) == {"tables[0].maintenance.min_snapshots_to_keep"}
    assert "must be between 1 and" in errors["tables[0].maintenance.min_snapshots_to_keep"]


# -- pass records (both backends, the session server) -----------------------------------------------


def pass_body(namespace: list[str], table: str, **changes: Any) -> dict[str, Any]:
    stats = {"data_files": 3, "data_bytes": 300, "delete_files": 0, "delete_bytes": 0, "manifests": 3}
    body = {
        "warehouse": "default",
        "namespace": namespace,
        "table": table,
        "started_at": dt.datetime.now(dt.UTC).isoformat(),
        "duration_seconds": 2.5,
        "actions": [
            {
                "name": "rewrite_data_files",
                "duration_seconds": 2.0,
                "result": {"rewritten_data_files_count": 3},
            },
            {"name": "expire_snapshots", "duration_seconds": 0.5, "error": "boom"},
        ],
        "before": {**stats, "snapshots": 5},
        "after": {**stats, "data_files": 1, "snapshots": 2},
        "error": None,
    }
    return {**body, **changes}


def test_pass_records_through_the_management_api(catalog_server: CatalogProcess, http: httpx.Client) -> None:
    namespace = f"ns_{uuid.uuid4().hex[:8]}"
    recorded = http.post(PASSES, json=pass_body([namespace], "t1"))
    assert recorded.status_code == 201, recorded.text
    record = recorded.json()
    assert record["recorded_by"] == catalog_server.admin_client_id
    assert record["actions"][1] == {"name": "expire_snapshots", "duration_seconds": 0.5, "error": "boom"}
    assert http.post(PASSES, json=pass_body([namespace], "t2", error="table gone")).status_code == 201
    assert http.post(PASSES, json=pass_body([namespace, "deep"], "t1")).status_code == 201

    listed = http.get(PASSES, params={"namespace": namespace}).json()["passes"]
    assert [(p["table"], p["error"]) for p in listed] == [("t2", "table gone"), ("t1", None)]
    assert listed[1]["before"]["snapshots"] == 5
    assert listed[1]["after"]["data_files"] == 1
    only = http.get(PASSES, params={"namespace": namespace, "table": "t1", "limit": 1}).json()["passes"]
    assert [p["id"] for p in only] == [record["id"]]
    deep = http.get(PASSES, params={"namespace": f"{namespace}\x1fdeep"}).json()["passes"]
    assert [p["namespace"] for p in deep] == [[namespace, "deep"]]

    for body, status in (
        (pass_body([], "t"), 400),
        (pass_body([namespace], ""), 400),
        (pass_body([namespace], "t", duration_seconds=-1), 400),
        (pass_body([namespace], "t", warehouse="nowhere"), 404),
    ):
        response = http.post(PASSES, json=body)
        assert response.status_code == status, response.text
    assert http.get(PASSES, params={"limit": 0}).status_code == 400


def test_cluster_keys_record_and_read_their_own_passes(
    catalog_server: CatalogProcess, http: httpx.Client
) -> None:
    cluster = f"k_{uuid.uuid4().hex[:8]}"
    assert http.post("/management/v1/clusters", json={"name": cluster}).status_code == 201
    other = f"ns_{uuid.uuid4().hex[:8]}"
    assert http.post(PASSES, json=pass_body([other], "t")).status_code == 201

    def client(role: str) -> httpx.Client:
        key = http.post("/management/v1/keys", json={"cluster": cluster, "role": role}).json()
        token = catalog_server.token(key["client_id"], key["client_secret"])
        return httpx.Client(base_url=catalog_server.url, headers={"Authorization": f"Bearer {token}"})

    with client("writer") as writer, client("reader") as reader:
        assert writer.post(PASSES, json=pass_body([cluster], "t")).status_code == 201
        assert writer.post(PASSES, json=pass_body([cluster, "sub"], "t")).status_code == 201
        # Outside its cluster a key learns nothing: the namespace "does not exist".
        assert writer.post(PASSES, json=pass_body([other], "t")).status_code == 404
        assert reader.post(PASSES, json=pass_body([cluster], "t")).status_code == 403
        seen = reader.get(PASSES).json()["passes"]
        assert {tuple(p["namespace"]) for p in seen} == {(cluster,), (cluster, "sub")}
        assert reader.get(PASSES, params={"namespace": other}).status_code == 404
