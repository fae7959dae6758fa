"""The audit log as people read it (issue 33 item 6): strictly newest first (by time, ties by id, across
pages), `GET /management/v1/audit` with the console's filters (key, action, target, outcome, cluster,
time range) and a filter hiding floe's own pipeline keys' traffic, `floe audit` with the same options,
and createKey / createCluster entries naming what they made."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import httpx
import pytest
import sqlalchemy as sa

from catalog.service.audit import OUTCOMES
from catalog.store.audit_listing import PIPELINE_KEY_PREFIXES
from catalog.store.schema import audit_log
from devtools.catalog_server import CatalogProcess
from floe.cli.clusters import AUDIT_OUTCOMES
from floe.cli.pipeline_keys import PURPOSES, key_name
from tests.api.test_cli import floe
from tests.api.test_console import Browser, Key
from tests.api.test_idempotency import run_sql

AUDIT = "/management/v1/audit"


@pytest.fixture
def cluster(http: httpx.Client) -> str:
    name = f"aud_{uuid.uuid4().hex[:8]}"
    assert http.post("/management/v1/clusters", json={"name": name}).status_code == 201
    return name


def new_key(http: httpx.Client, cluster: str | None, role: str, description: str = "") -> Key:
    response = http.post(
        "/management/v1/keys", json={"cluster": cluster, "role": role, "description": description}
    )
    assert response.status_code == 201, response.text
    return Key(response.json()["client_id"], response.json()["client_secret"])


def listed(http: httpx.Client, **params: str) -> list[dict[str, object]]:
    response = http.get(AUDIT, params={"limit": 1000, **params})
    assert response.status_code == 200, response.text
    entries: list[dict[str, object]] = response.json()["entries"]
    return entries


def test_create_key_and_create_cluster_entries_name_what_they_made(http: httpx.Client, cluster: str) -> None:
    key = new_key(http, cluster, "reader")
    (entry,) = listed(http, action="createKey", target=f"client_id={key.client_id}")
    assert entry["target"] == f"client_id={key.client_id} cluster={cluster} role=reader"
    (made,) = listed(http, action="createCluster", target=f"cluster={cluster} ")
    assert made["target"] == f"cluster={cluster} warehouse=default"


def test_newest_first_by_time_with_ties_by_id_across_pages(http: httpx.Client, database_url: str) -> None:
    """Entries inserted out of time order (a summary of repeated token requests carries its first
    request's time and is written when its window ends) are listed by time; equal times by id."""
    subject = f"sorter_{uuid.uuid4().hex[:8]}"
    base = datetime(2026, 3, 1, 6, 52, 45, tzinfo=UTC)
    # Insert order (ids ascending): +6 s, 0 s, +6 s, +3 s, 0 s.
    offsets = [6, 0, 6, 3, 0]
    for n, seconds in enumerate(offsets):
        run_sql(
            database_url,
            sa.insert(audit_log).values(
                at=base + timedelta(seconds=seconds),
                subject=subject,
                action="getToken",
                target=f"n={n}",
                outcome="ok",
                status_code=200,
            ),
        )
    entries = listed(http, subject=subject)
    assert [e["target"] for e in entries] == ["n=2", "n=0", "n=3", "n=4", "n=1"]
    ats = [datetime.fromisoformat(str(e["at"])) for e in entries]
    assert ats == sorted(ats, reverse=True)
    # Two a page, `before` the last entry's id: the same order, nothing repeated or skipped.
    paged: list[object] = []
    before = None
    while True:
        params: dict[str, str | int] = {
            "subject": subject,
            "limit": 2,
            **({"before": before} if before else {}),
        }
        body = http.get(AUDIT, params=params).json()
        paged += [e["target"] for e in body["entries"]]
        before = body.get("next_before")
        if before is None:
            break
    assert paged == ["n=2", "n=0", "n=3", "n=4", "n=1"]


def test_the_management_api_filters_as_the_console_does(
    catalog_server: CatalogProcess, http: httpx.Client, cluster: str
) -> None:
    reader = new_key(http, cluster, "reader")
    catalog_server.token(reader.client_id, reader.secret)
    bad = httpx.post(
        f"{catalog_server.url}/v1/oauth/tokens",
        data={"grant_type": "client_credentials", "client_id": reader.client_id, "client_secret": "wrong"},
        timeout=30,
    )
    assert bad.status_code == 401
    mine = listed(http, subject=reader.client_id)
    assert {(e["action"], e["outcome"]) for e in mine} == {("getToken", "ok"), ("getToken", "denied")}
    assert [e["outcome"] for e in listed(http, subject=reader.client_id, outcome="denied")] == ["denied"]
    assert listed(http, subject=reader.client_id, action="createKey") == []
    # A cluster's entries: its keys' requests (a token request is made before its key is known).
    admin = new_key(http, cluster, "admin")
    as_admin = {"Authorization": f"Bearer {catalog_server.token(admin.client_id, admin.secret)}"}
    made = http.post("/management/v1/keys", json={"cluster": cluster, "role": "reader"}, headers=as_admin)
    assert made.status_code == 201, made.text
    by_cluster = listed(http, cluster=cluster)
    assert [(e["subject"], e["action"]) for e in by_cluster] == [(admin.client_id, "createKey")]
    assert listed(http, subject=reader.client_id, since="2999-01-01T00:00") == []
    assert len(listed(http, subject=reader.client_id, until="2999-01-01T00:00+02:00")) == 2
    assert len(listed(http, target=f"client_id={reader.client_id}")) == 1  # its createKey entry
    for params, message in (
        ({"outcome": "maybe"}, "Invalid outcome 'maybe'"),
        ({"since": "yesterday"}, "Invalid since"),
        ({"until": "9999-12-31T23:00-05:00"}, "Invalid until"),
    ):
        refused = http.get(AUDIT, params=params)
        assert refused.status_code == 400, refused.text
        assert message in refused.json()["error"]["message"]


@pytest.fixture
def pipeline_traffic(catalog_server: CatalogProcess, http: httpx.Client, cluster: str) -> dict[str, Key]:
    """A cluster's two pipeline keys (named as floe up names them), a person's writer key, and a reader
    key merely named like a pipeline key; each asked for a token."""
    keys = {purpose: new_key(http, cluster, "writer", key_name(purpose, cluster)) for purpose in PURPOSES}
    keys["person"] = new_key(http, cluster, "writer", "alice's notebook")
    keys["lookalike"] = new_key(http, cluster, "reader", key_name("ingest", cluster))
    keys["cluster_admin"] = new_key(http, cluster, "admin")
    tokens = {name: catalog_server.token(key.client_id, key.secret) for name, key in keys.items()}
    made = http.post(  # the cluster's one entry with a cluster: its admin's
        "/management/v1/keys",
        json={"cluster": cluster, "role": "reader"},
        headers={"Authorization": f"Bearer {tokens['cluster_admin']}"},
    )
    assert made.status_code == 201, made.text
    return keys


def test_hide_pipeline_leaves_out_floes_own_keys(
    http: httpx.Client, cluster: str, pipeline_traffic: dict[str, Key]
) -> None:
    subjects = {key.client_id: name for name, key in pipeline_traffic.items()}
    every = {subjects.get(str(e["subject"])) for e in listed(http, action="getToken")}
    assert {"ingest", "maintain", "person", "lookalike", "cluster_admin"} <= every
    shown = {subjects.get(str(e["subject"])) for e in listed(http, action="getToken", hide_pipeline="true")}
    shown.discard(None)
    assert shown == {"person", "lookalike", "cluster_admin"}  # a reader is no pipeline key, whatever its name


def test_the_console_hides_pipeline_traffic_and_filters_by_cluster(
    catalog_server: CatalogProcess, cluster: str, pipeline_traffic: dict[str, Key]
) -> None:
    browser = Browser(catalog_server.url)
    try:
        assert (
            browser.sign_in(
                Key(catalog_server.admin_client_id, catalog_server.admin_client_secret)
            ).status_code
            == 303
        )
        every = browser.page("/console/audit", action="getToken")
        hidden = browser.page("/console/audit", action="getToken", hide_pipeline="on")
        # A cluster's entries alone: the keys created in it (token requests have no cluster yet).
        in_cluster = browser.page("/console/audit", cluster=cluster)
        assert pipeline_traffic["cluster_admin"].client_id in in_cluster
        assert "createKey" in in_cluster
        assert "getToken" not in in_cluster
        for name, key in pipeline_traffic.items():
            assert key.client_id in every
            assert (key.client_id in hidden) == (name not in PURPOSES), name
        form = browser.get("/console/audit", hide_pipeline="on").text
        assert 'name="hide_pipeline" type="checkbox" checked' in form
        assert 'name="cluster"' in form
    finally:
        browser.close()


def test_floe_audit_takes_the_consoles_filters(
    catalog_server: CatalogProcess, cluster: str, pipeline_traffic: dict[str, Key]
) -> None:
    env = {
        "FLOE_URL": catalog_server.url,
        "FLOE_CLIENT_ID": catalog_server.admin_client_id,
        "FLOE_CLIENT_SECRET": catalog_server.admin_client_secret,
    }
    base = ["audit", "--action", "getToken", "--outcome", "ok", "-o", "json"]
    base += ["--since", "2000-01-01T00:00", "--until", "2999-01-01T00:00", "--limit", "100"]
    every = floe(*base, env=env)
    assert every.exit_code == 0, every.output
    hidden = floe(*base, "--hide-pipeline", env=env)
    assert hidden.exit_code == 0, hidden.output
    person = pipeline_traffic["person"].client_id
    one = floe(*base, "--actor", person, "--target", "", env=env)
    assert one.exit_code == 0, one.output

    mine = {k.client_id for k in pipeline_traffic.values()}

    def subjects(output: str) -> set[str]:
        return {e["subject"] for e in json.loads(output)["entries"]} & mine

    assert subjects(every.stdout) == mine
    in_cluster = floe("audit", "--cluster", cluster, "-o", "json", env=env)
    entries = json.loads(in_cluster.stdout)["entries"]
    assert [(e["subject"], e["action"]) for e in entries] == [
        (pipeline_traffic["cluster_admin"].client_id, "createKey")
    ]
    assert subjects(hidden.stdout) == {k.client_id for n, k in pipeline_traffic.items() if n not in PURPOSES}
    assert subjects(one.stdout) == {person}
    refused = floe("audit", "--outcome", "maybe", env=env)
    assert refused.exit_code == 2
    assert "maybe" in refused.output
    bad_time = floe("audit", "--since", "yesterday", env=env)
    assert bad_time.exit_code == 1
    assert "Invalid since" in bad_time.stderr


def test_names_agree_with_floes_pipeline_keys_and_outcomes() -> None:
    assert tuple(key_name(p, "c")[: -len("c")] for p in PURPOSES) == PIPELINE_KEY_PREFIXES
    assert AUDIT_OUTCOMES == OUTCOMES
