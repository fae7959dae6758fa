"""Every mutation's audit entry commits in the change's own transaction (`catalog.store.audit_context`),
on both backends: each mutation has exactly one entry, and when the entry cannot be inserted (a trigger
on `audit_log` raising) the mutation is refused with a 5xx and nothing of it is applied. Terminated
PostgreSQL backends are in tests/e2e/test_commit_faults.py.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import sqlalchemy as sa

from tests.api.test_commit_records import entries_of
from tests.api.test_idempotency import run_sql
from tests.api.test_maintenance import pass_body
from tests.api.test_pipeline_apply import BASE_FIELDS, PIPELINE, one_table
from tests.api.test_rest_api import PREFIX, SCHEMA, create_table, ns_path, rename, table_path, view_body
from tests.unit.test_maintenance import PASSES

MANAGEMENT = "/management/v1"


def mutations(namespace: str, cluster: str) -> dict[str, tuple[str, str, dict[str, Any] | None]]:
    """(method, path, body) of each kind of mutation, on `namespace` (holding table `t`)."""
    return {
        "createNamespace": ("POST", f"{PREFIX}/namespaces", {"namespace": [namespace, "child"]}),
        "updateProperties": (
            "POST",
            f"{PREFIX}/namespaces/{namespace}/properties",
            {"updates": {"audited": "yes"}, "removals": []},
        ),
        "createTable": ("POST", f"{PREFIX}/namespaces/{namespace}/tables", {"name": "t2", "schema": SCHEMA}),
        "createView": ("POST", f"{PREFIX}/namespaces/{namespace}/views", view_body("v", (namespace,))),
        "renameTable": ("POST", f"{PREFIX}/tables/rename", None),
        "dropTable": ("DELETE", table_path([namespace], "t"), None),
        "createKey": ("POST", f"{MANAGEMENT}/keys", {"cluster": cluster, "role": "reader"}),
    }


def send(http: httpx.Client, namespace: str, kind: str, cluster: str) -> httpx.Response:
    method, path, body = mutations(namespace, cluster)[kind]
    if kind == "renameTable":
        return rename(http, "tables", ([namespace], "t"), ([namespace], "renamed"))
    return http.request(method, path, json=body) if body is not None else http.request(method, path)


def entries(database_url: str, response: httpx.Response) -> list[tuple[str, int]]:
    """(outcome, status) of the audit entries of the request `response` answers."""
    return [
        (outcome, status) for _, outcome, status in entries_of(database_url, response.headers["x-request-id"])
    ]


def new_cluster(http: httpx.Client, database_url: str) -> str:
    name = f"kafka_{uuid.uuid4().hex[:8]}"
    created = http.post(f"{MANAGEMENT}/clusters", json={"name": name})
    assert created.status_code < 300, created.text
    assert entries(database_url, created) == [("ok", created.status_code)]
    return name


def test_each_mutation_has_exactly_one_audit_entry(
    http: httpx.Client, namespace: str, database_url: str
) -> None:
    cluster = new_cluster(http, database_url)
    for kind in mutations(namespace, cluster):
        if kind in ("renameTable", "dropTable"):
            create_table(http, [namespace], "t")
        response = send(http, namespace, kind, cluster)
        assert response.status_code < 300, (kind, response.text)
        assert entries(database_url, response) == [("ok", response.status_code)], kind
    dropped = http.delete(f"{PREFIX}/namespaces/{ns_path(namespace, 'child')}")
    assert dropped.status_code == 204, dropped.text
    assert entries(database_url, dropped) == [("ok", 204)]


def test_refusals_still_get_their_entry(http: httpx.Client, namespace: str, database_url: str) -> None:
    """No change happened: the middleware records the refusal after the answer, once."""
    refused = http.post(f"{PREFIX}/namespaces", json={"namespace": [namespace]})
    assert refused.status_code == 409, refused.text
    assert entries(database_url, refused) == [("failed", 409)]
    missing = http.delete(f"{PREFIX}/namespaces/{ns_path(namespace, 'absent')}")
    assert missing.status_code == 404, missing.text
    assert entries(database_url, missing) == [("failed", 404)]


@contextmanager
def audit_inserts_refused(database_url: str) -> Iterator[None]:
    """A trigger that makes every insert into `audit_log` fail, while the block runs."""
    if database_url.startswith("sqlite"):
        create = [
            "CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_log "
            "BEGIN SELECT RAISE(ABORT, 'audit log unavailable'); END"
        ]
        drop = ["DROP TRIGGER refuse_audit"]
    else:
        create = [
            "CREATE OR REPLACE FUNCTION refuse_audit() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'audit log unavailable'; END $$",
            "CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_log "
            "FOR EACH ROW EXECUTE FUNCTION refuse_audit()",
        ]
        drop = ["DROP TRIGGER refuse_audit ON audit_log"]
    for statement in create:
        run_sql(database_url, sa.text(statement))
    try:
        yield
    finally:
        for statement in drop:
            run_sql(database_url, sa.text(statement))


def state(http: httpx.Client, namespace: str) -> dict[str, Any]:
    """What the mutations would change, as the API shows it."""
    tables = http.get(f"{PREFIX}/namespaces/{namespace}/tables").json()["identifiers"]
    views = http.get(f"{PREFIX}/namespaces/{namespace}/views").json()["identifiers"]
    return {
        "namespaces": http.get(f"{PREFIX}/namespaces", params={"parent": namespace}).json()["namespaces"],
        "properties": http.get(f"{PREFIX}/namespaces/{namespace}").json()["properties"],
        "tables": sorted(t["name"] for t in tables),
        "views": sorted(v["name"] for v in views),
        "keys": sorted(k["client_id"] for k in http.get(f"{MANAGEMENT}/keys").json()["keys"]),
        "clusters": sorted(c["name"] for c in http.get(f"{MANAGEMENT}/clusters").json()["clusters"]),
    }


def test_a_mutation_whose_entry_cannot_be_written_is_refused_and_not_applied(
    http: httpx.Client, namespace: str, database_url: str
) -> None:
    cluster = new_cluster(http, database_url)
    create_table(http, [namespace], "t")
    before = state(http, namespace)
    answers = {}
    with audit_inserts_refused(database_url):
        for kind in mutations(namespace, cluster):
            answers[kind] = send(http, namespace, kind, cluster)
        cluster_answer = http.post(f"{MANAGEMENT}/clusters", json={"name": f"kafka_{uuid.uuid4().hex[:8]}"})
        answers["createCluster"] = cluster_answer
    for kind, response in answers.items():
        assert response.status_code >= 500, (kind, response.text)
        assert "error" in response.json(), (kind, response.text)
    assert state(http, namespace) == before
    # None of them has an entry: their change and its entry rolled back together.
    assert {kind: entries(database_url, r) for kind, r in answers.items()} == {kind: [] for kind in answers}
    # Once the audit log takes inserts again, the mutation lands, with its entry.
    landed = send(http, namespace, "updateProperties", cluster)
    assert landed.status_code == 200, landed.text
    assert entries(database_url, landed) == [("ok", 200)]


def test_a_drop_whose_entry_cannot_be_written_keeps_the_namespace(
    http: httpx.Client, namespace: str, database_url: str
) -> None:
    created = http.post(f"{PREFIX}/namespaces", json={"namespace": [namespace, "empty"]})
    assert created.status_code == 200, created.text
    with audit_inserts_refused(database_url):
        dropped = http.delete(f"{PREFIX}/namespaces/{ns_path(namespace, 'empty')}")
    assert dropped.status_code == 503, dropped.text
    assert dropped.json()["error"]["type"] == "ServiceUnavailableException"
    assert http.get(f"{PREFIX}/namespaces/{ns_path(namespace, 'empty')}").status_code == 200


def test_a_request_of_several_changes_has_one_entry(
    http: httpx.Client, namespace: str, database_url: str
) -> None:
    """A pipeline apply creates its cluster, commits its tables, stores its revision (three write
    transactions): one entry, with the first; a maintenance pass record is one change, one entry."""
    applied = http.put(PIPELINE, json={"config": one_table(copy.deepcopy(BASE_FIELDS))})
    assert applied.status_code == 200, applied.text
    assert entries(database_url, applied) == [("ok", 200)]
    recorded = http.post(PASSES, json=pass_body([namespace], "t1"))
    assert recorded.status_code == 201, recorded.text
    assert entries(database_url, recorded) == [("ok", 201)]
    with audit_inserts_refused(database_url):
        refused = http.post(PASSES, json=pass_body([namespace], "t2"))
    assert refused.status_code == 503, refused.text
    listed = http.get(PASSES, params={"namespace": namespace}).json()["passes"]
    assert [p["table"] for p in listed] == ["t1"]


def test_a_transaction_entry_names_its_tables(http: httpx.Client, namespace: str, database_url: str) -> None:
    """commitTransaction's tables are in its body, not its path: its audit entry names them (the shared
    consumer of `floe ingest` commits many tables per request)."""
    for name in ("a", "b"):
        create_table(http, [namespace], name)
    changes = [
        {
            "identifier": {"namespace": [namespace], "name": name},
            "requirements": [],
            "updates": [{"action": "set-properties", "updates": {"audited": name}}],
        }
        for name in ("a", "b")
    ]
    committed = http.post(f"{PREFIX}/transactions/commit", json={"table-changes": changes})
    assert committed.status_code == 204, committed.text
    from catalog.store.schema import audit_log

    rows = run_sql(
        database_url,
        sa.select(audit_log.c.target).where(audit_log.c.request_id == committed.headers["x-request-id"]),
    )
    targets = [row[0] for row in rows]
    assert targets == [f"prefix=default tables={namespace}.a,{namespace}.b"]
