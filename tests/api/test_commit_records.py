"""A commit's audit entry and `Idempotency-Key` outcome commit in the commit's own transaction
(`catalog.store.commit_records`), on both backends. The kill -9 between the commit and its answer, and
the database faults, are in tests/e2e/test_commit_faults.py; here the row such a crash leaves (`landed`,
its owner gone) is written directly.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime, timedelta

import httpx
import sqlalchemy as sa

from catalog.api.middleware import idempotency_identity
from catalog.store import PendingCommit, create_store
from catalog.store.commit_records import CommitRecords, IdempotencyLanding, RequestTakenOver
from catalog.store.schema import audit_log, idempotency_keys
from catalog.store.security import AuditEntry
from devtools.catalog_server import CatalogProcess
from tests.api.test_idempotency import new_key, run_sql, wait_for
from tests.api.test_rest_api import PREFIX, create_table, load_table, set_prop, snapshot_update, table_path


def entries_of(database_url: str, request_id: str) -> list[tuple[str, str, int]]:
    rows = run_sql(
        database_url,
        sa.select(audit_log.c.action, audit_log.c.outcome, audit_log.c.status_code).where(
            audit_log.c.request_id == request_id
        ),
    )
    return [(row[0], row[1], row[2]) for row in rows]


def test_commit_has_exactly_one_audit_entry(http: httpx.Client, namespace: str, database_url: str) -> None:
    create_table(http, [namespace], "t")
    committed = http.post(
        table_path([namespace], "t"), json={"requirements": [], "updates": [set_prop("a", "1")]}
    )
    assert committed.status_code == 200, committed.text
    assert entries_of(database_url, committed.headers["x-request-id"]) == [("updateTable", "ok", 200)]
    body = {
        "table-changes": [
            {
                "identifier": {"namespace": [namespace], "name": "t"},
                "requirements": [],
                "updates": [set_prop("b", "2")],
            }
        ]
    }
    transaction = http.post(f"{PREFIX}/transactions/commit", json=body)
    assert transaction.status_code == 204, transaction.text
    assert entries_of(database_url, transaction.headers["x-request-id"]) == [("commitTransaction", "ok", 204)]


def test_retry_of_a_landed_commit_gets_its_answer(
    http: httpx.Client, namespace: str, database_url: str, catalog_server: CatalogProcess
) -> None:
    """The row a server killed between the commit and its answer leaves: the retry is answered 200 with
    the commit's answer, byte for byte, and nothing is applied again (its requirement no longer holds)."""
    created = create_table(http, [namespace], "t")
    url = table_path([namespace], "t")
    key = new_key()
    body = {
        "requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": None}],
        "updates": [
            snapshot_update(7, 1, None, location=created["metadata"]["location"]),
            {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": 7},
        ],
    }
    first = http.post(url, json=body, headers=key)
    assert first.status_code == 200, first.text
    stored, _ = idempotency_identity(
        catalog_server.admin_client_id, None, key["Idempotency-Key"], "POST", url.encode()
    )
    # The answer is stored just after it is sent: wait for it, so it does not overwrite the row below.
    state = sa.select(idempotency_keys.c.state).where(idempotency_keys.c.key == stored)
    wait_for(lambda: [row[0] for row in run_sql(database_url, state)] == ["done"])
    # As a crash right after the commit leaves it: landed, the answer not stored, the owner gone.
    reference = json.dumps([first.json()["metadata-location"]])
    run_sql(
        database_url,
        sa.update(idempotency_keys)
        .where(idempotency_keys.c.key == stored)
        .values(
            state="landed",
            response_body=reference,
            status_code=None,
            owner="dead-host:1/0",
            lease_until=datetime.now(UTC) - timedelta(seconds=1),
        ),
    )
    retry = http.post(url, json=body, headers=key)
    assert retry.status_code == 200, retry.text
    assert retry.content == first.content
    loaded = load_table(http, [namespace], "t")
    assert loaded["metadata-location"] == first.json()["metadata-location"]
    assert len(loaded["metadata"]["metadata-log"]) == 1
    again = http.post(url, json=body, headers=key)
    assert (again.status_code, again.content) == (200, first.content)


def test_swap_is_refused_when_a_retry_took_the_key_over(
    http: httpx.Client, namespace: str, database_url: str
) -> None:
    """An owner that lost its key's lease to a retry (it stalled) commits nothing: the retry runs the
    request; with its key still held, the swap, the landed mark and the audit entry land together."""
    create_table(http, [namespace], "t")

    async def attempt(owner: str, request_id: str) -> tuple[bool | None, int]:
        store = create_store(database_url)
        try:
            warehouse = await store.get_warehouse("default")
            assert warehouse is not None
            record = await store.get_tabular(warehouse.id, namespace, "t")
            assert record is not None
            swap = PendingCommit(
                record.id, record.version, f"{record.metadata_location}.next", record.metadata_json
            )
            entry = AuditEntry("someone", None, "updateTable", "t", "ok", 200, request_id)
            records = CommitRecords(entry, IdempotencyLanding(key, owner, '["where"]'))
            try:
                swapped: bool | None = await store.swap([swap], records)
            except RequestTakenOver:
                swapped = None
            after = await store.get_tabular(warehouse.id, namespace, "t")
            assert after is not None
            return swapped, after.version - record.version
        finally:
            await store.close()

    key = uuid.uuid4().hex
    now = datetime.now(UTC)
    pending = {"key": key, "fingerprint": "f", "state": "pending", "owner": "retry", "created_at": now}
    run_sql(database_url, sa.insert(idempotency_keys).values(**pending, lease_until=now + timedelta(5)))
    assert asyncio.run(attempt("stalled", "taken-over")) == (None, 0)
    assert entries_of(database_url, "taken-over") == []
    assert asyncio.run(attempt("retry", "held")) == (True, 1)
    assert entries_of(database_url, "held") == [("updateTable", "ok", 200)]
    [row] = run_sql(database_url, sa.select(idempotency_keys).where(idempotency_keys.c.key == key))
    assert (row.state, row.response_body, row.owner) == ("landed", '["where"]', "retry")
