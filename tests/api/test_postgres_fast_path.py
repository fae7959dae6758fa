"""The store's PostgreSQL fast path (`catalog/store/postgres_fast_path.py`) on a real PostgreSQL, in the
quick tier: the SQLite-based API tests never reach it, and it runs loadTable, listTables, a commit's
pointer swap and the audit log's COPY appends in production.

One PostgreSQL for the session (the `postgres` fixture, a few seconds to start) and one in-process
catalog on a database of its own for the module. What runs on the fast path is observed by wrapping
`SingleStatementRunner`'s three entry points (the wrappers call through: the database does the work).
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import pytest
from litestar.testing import TestClient

from catalog.api.app import create_app
from catalog.settings import Settings
from catalog.store.postgres_fast_path import SingleStatementRunner
from catalog.store.records import PendingCommit
from catalog.store.security import AuditEntry
from catalog.store.sql import SqlCatalogStore
from devtools.postgres import LocalPostgres

PREFIX = "/v1/default"
SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "fields": [{"id": 1, "name": "id", "type": "long", "required": False}],
}
SECRET = "a-secret-of-enough-length"


@dataclass
class FastPath:
    """The module's catalog on PostgreSQL, and the statements its fast path ran (kind, SQL's first word)."""

    pg: LocalPostgres
    database: str
    url: str
    client: TestClient[Any]
    ran: list[tuple[str, str]]

    def query(self, sql: str, *args: Any) -> list[Any]:
        async def run() -> list[Any]:
            connection = await asyncpg.connect(self.url.replace("postgresql+asyncpg://", "postgresql://"))
            try:
                return list(await connection.fetch(sql, *args))
            finally:
                await connection.close()

        return asyncio.run(run())

    def ran_during(self, action: Any) -> tuple[Any, list[tuple[str, str]]]:
        start = len(self.ran)
        result = action()
        return result, self.ran[start:]


def _first_word(statement: Any) -> str:
    return str(statement).lstrip().split(None, 1)[0].upper()


@pytest.fixture(scope="module")
def fast_path(postgres: LocalPostgres, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FastPath]:
    ran: list[tuple[str, str]] = []
    originals = {name: getattr(SingleStatementRunner, name) for name in ("fetch", "execute", "copy_rows")}

    async def fetch(self: SingleStatementRunner, statement: Any, params: dict[str, Any]) -> Any:
        ran.append(("fetch", _first_word(statement)))
        return await originals["fetch"](self, statement, params)

    async def execute(self: SingleStatementRunner, statement: Any, params: dict[str, Any]) -> Any:
        ran.append(("execute", _first_word(statement)))
        return await originals["execute"](self, statement, params)

    async def copy_rows(self: SingleStatementRunner, table: Any, rows: Any) -> None:
        ran.append(("copy", table.name))
        await originals["copy_rows"](self, table, rows)

    patch = pytest.MonkeyPatch()
    for name, wrapper in (("fetch", fetch), ("execute", execute), ("copy_rows", copy_rows)):
        patch.setattr(SingleStatementRunner, name, wrapper)
    database = f"floe_{uuid.uuid4().hex[:8]}"
    url = postgres.create_database(database)
    settings = Settings.from_env(
        {
            "FLOE_HOME": str(tmp_path_factory.mktemp("fast-path")),
            "FLOE_DATABASE_URL": url,
            "FLOE_ADMIN_CLIENT_ID": "admin",
            "FLOE_ADMIN_CLIENT_SECRET": SECRET,
        }
    )
    try:
        with TestClient(create_app(settings), timeout=60) as client:
            form = {"grant_type": "client_credentials", "client_id": "admin", "client_secret": SECRET}
            token = client.post("/v1/oauth/tokens", data=form).json()["access_token"]
            client.headers["Authorization"] = f"Bearer {token}"
            client.post(f"{PREFIX}/namespaces", json={"namespace": ["fast"]}).raise_for_status()
            client.post(
                f"{PREFIX}/namespaces/fast/tables", json={"name": "t", "schema": SCHEMA}
            ).raise_for_status()
            yield FastPath(postgres, database, url, client, ran)
    finally:
        patch.undo()


TABLE = f"{PREFIX}/namespaces/fast/tables/t"


def _set_property(fast_path: FastPath, key: str, value: str, request_id: str | None = None) -> Any:
    body = {"requirements": [], "updates": [{"action": "set-properties", "updates": {key: value}}]}
    headers = {"x-request-id": request_id} if request_id else {}
    return fast_path.client.post(TABLE, json=body, headers=headers)


def test_load_table_and_list_tables_read_on_the_fast_path(fast_path: FastPath) -> None:
    response, ran = fast_path.ran_during(lambda: fast_path.client.get(TABLE))
    assert response.status_code == 200, response.text
    assert response.json()["metadata"]["schemas"][0]["fields"][0]["name"] == "id"
    assert ran
    assert all(call == ("fetch", "SELECT") for call in ran)
    # Answered from the load cache: still one version check on the database, on the fast path.
    response, ran = fast_path.ran_during(lambda: fast_path.client.get(TABLE))
    assert response.status_code == 200
    assert ran == [("fetch", "SELECT")]
    response, ran = fast_path.ran_during(lambda: fast_path.client.get(f"{PREFIX}/namespaces/fast/tables"))
    assert response.json()["identifiers"] == [{"namespace": ["fast"], "name": "t"}]
    assert ran
    assert all(call == ("fetch", "SELECT") for call in ran)


def test_a_commit_swaps_its_pointer_and_audit_entry_in_one_fast_path_statement(fast_path: FastPath) -> None:
    request_id = uuid.uuid4().hex
    response, ran = fast_path.ran_during(lambda: _set_property(fast_path, "swapped", "yes", request_id))
    assert response.status_code == 200, response.text
    # The swap and its audit entry: one data-modifying statement (not re-run on a lost connection).
    assert ("fetch", "WITH") in ran
    location = response.json()["metadata-location"]
    (row,) = fast_path.query(
        "SELECT t.metadata_location FROM tabulars t JOIN namespaces n ON n.id = t.namespace_id "
        "WHERE n.key = 'fast' AND t.name = 't'"
    )
    assert row[0] == location
    audit = fast_path.query(
        "SELECT action, outcome, status_code FROM audit_log WHERE request_id = $1", request_id
    )
    assert [tuple(r) for r in audit] == [("updateTable", "ok", 200)]
    assert fast_path.client.get(TABLE).json()["metadata"]["properties"]["swapped"] == "yes"


def _store(fast_path: FastPath) -> SqlCatalogStore:
    return SqlCatalogStore(fast_path.url, statement_timeout=10, connect_timeout=10)


def test_audit_entries_append_in_one_copy(fast_path: FastPath) -> None:
    subject = f"copy-{uuid.uuid4().hex[:8]}"
    entries = [
        AuditEntry(
            subject=subject, cluster=None, action="probe", target=f"n={n}", outcome="ok", status_code=200
        )
        for n in range(50)
    ]

    async def run() -> None:
        store = _store(fast_path)
        try:
            await store.add_audit_entries(entries)
        finally:
            await store.close()

    _, ran = fast_path.ran_during(lambda: asyncio.run(run()))
    assert ran == [("copy", "audit_log")]
    rows = fast_path.query("SELECT target FROM audit_log WHERE subject = $1 ORDER BY id", subject)
    assert [r[0] for r in rows] == [f"n={n}" for n in range(50)]


async def _wait_until_noticed(store: SqlCatalogStore) -> None:
    """Until asyncpg has seen the server close every idle connection of the fast path."""
    runner = store._single_statements
    assert runner is not None
    deadline = time.monotonic() + 60
    while not all(connection.is_closed() for connection in runner._idle):
        assert time.monotonic() < deadline, "asyncpg never noticed the terminated backends"
        await asyncio.sleep(0.05)


def test_a_one_table_swap_is_a_compare_and_swap_that_survives_terminated_backends(
    fast_path: FastPath,
) -> None:
    """A swap without records (no request to audit) is one autocommit UPDATE: it lands on the version it
    read and not on a stale one; after `pg_terminate_backend` of the pooled connections, reads and the
    swap run on new connections."""
    fast_path.client.post(
        f"{PREFIX}/namespaces/fast/tables", json={"name": "cas", "schema": SCHEMA}
    ).raise_for_status()

    async def run() -> list[Any]:
        store = _store(fast_path)
        try:
            warehouse = await store.get_warehouse("default")
            assert warehouse is not None
            record = await store.get_tabular(warehouse.id, "fast", "cas")
            assert record is not None
            moved = f"{record.metadata_location}.moved"
            swap = PendingCommit(record.id, record.version, moved, record.metadata_json)
            outcomes: list[Any] = [await store.swap([swap]), await store.swap([swap])]  # the second is stale
            assert fast_path.pg.terminate_backends(fast_path.database) > 0
            await _wait_until_noticed(store)
            outcomes.append(await store.get_tabular_location(warehouse.id, "fast", "cas"))
            current = await store.get_tabular(warehouse.id, "fast", "cas")
            assert current is not None
            again = PendingCommit(current.id, current.version, moved + ".again", current.metadata_json)
            outcomes.append(await store.swap([again]))
            return outcomes
        finally:
            await store.close()

    outcomes, ran = fast_path.ran_during(lambda: asyncio.run(run()))
    assert outcomes[:2] == [True, False]
    assert outcomes[2][0] == "table"
    assert outcomes[2][1].endswith(".moved")
    assert outcomes[3] is True
    assert ran.count(("execute", "UPDATE")) == 3
    (row,) = fast_path.query("SELECT metadata_location FROM tabulars WHERE name = 'cas'")
    assert row[0].endswith(".moved.again")


def test_a_swap_cut_mid_statement_answers_commit_state_unknown_and_leaves_nothing(
    fast_path: FastPath,
) -> None:
    """The backend running a commit's swap (and its audit entry) is terminated mid-statement (a trigger
    holds the UPDATE): 500 CommitStateUnknownException, neither the pointer nor the audit entry landed,
    and the same commit succeeds when the client retries it."""
    pg, database = fast_path.pg, fast_path.database
    before = fast_path.client.get(TABLE).json()["metadata-location"]
    pg.psql(
        "CREATE FUNCTION hold_swap() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN PERFORM pg_sleep(60); RETURN NEW; END $$; "
        "CREATE TRIGGER hold_swap BEFORE UPDATE ON tabulars FOR EACH ROW EXECUTE FUNCTION hold_swap()",
        database,
    )
    request_id = uuid.uuid4().hex
    answer: list[Any] = []
    committing = threading.Thread(
        target=lambda: answer.append(_set_property(fast_path, "cut", "1", request_id))
    )
    try:
        committing.start()
        deadline = time.monotonic() + 60
        while not pg.terminate_backends(database, running="UPDATE tabulars"):
            assert time.monotonic() < deadline, "the commit's swap never started"
            time.sleep(0.05)
        committing.join(60)
    finally:
        pg.psql("DROP TRIGGER hold_swap ON tabulars; DROP FUNCTION hold_swap()", database)
    (response,) = answer
    assert response.status_code == 500, response.text
    assert response.json()["error"]["type"] == "CommitStateUnknownException"
    loaded = fast_path.client.get(TABLE).json()
    assert loaded["metadata-location"] == before
    assert "cut" not in loaded["metadata"]["properties"]
    landed = fast_path.query(
        "SELECT count(*) FROM audit_log WHERE request_id = $1 AND outcome = 'ok'", request_id
    )
    assert landed[0][0] == 0
    retried = _set_property(fast_path, "cut", "1")
    assert retried.status_code == 200, retried.text
    assert fast_path.client.get(TABLE).json()["metadata"]["properties"]["cut"] == "1"
