"""`floe serve` on a PostgreSQL that fails (issue 30, items 3, 4, 5 and 9): shut down, frozen (SIGSTOP),
restarted, its connections terminated, a commit's pointer swap cut mid-statement.

The promises: while the database cannot answer, every route (the hot routes included) answers the spec's
503 `ServiceUnavailableException` JSON with `Retry-After` and a request id, within the statement and
connect timeouts; once it is back, the next requests succeed (dead pooled connections are replaced, none
fails a request); a commit whose swap died mid-statement answers `CommitStateUnknownException`.

The tests use a PostgreSQL of their own: freezing or restarting the session's would disturb other tests.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Integer, bindparam, select

from benchmarks.catalog.database_faults import (
    CLIENTS,
    LIST,
    LOAD,
    NAMESPACE,
    SCHEMA,
    probe_rounds,
    set_probe_property,
)
from catalog.store.sql import SqlCatalogStore
from devtools.catalog_server import CatalogProcess
from devtools.postgres import LocalPostgres

STATEMENT_TIMEOUT = 3.0
CONNECT_TIMEOUT = 2.0
# The most a request may take while the database does not answer: a connect and two statements (the
# key's read, the route's), with slack for a loaded machine. Without the timeouts: as long as the fault.
BOUND = CONNECT_TIMEOUT + 2 * STATEMENT_TIMEOUT + 6
# POSTs are audited before they are answered, and the audit log's write is tried up to three times.
AUDITED_BOUND = 4 * BOUND


@dataclass
class FaultyCatalog:
    pg: LocalPostgres
    database: str
    server: CatalogProcess
    client: httpx.Client


@pytest.fixture(scope="module")
def pg() -> Iterator[LocalPostgres]:
    with LocalPostgres() as server:
        yield server


@pytest.fixture(scope="module")
def catalog(pg: LocalPostgres, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultyCatalog]:
    database = f"floe_{uuid.uuid4().hex[:8]}"
    env = {
        "FLOE_DATABASE_STATEMENT_TIMEOUT_SECONDS": str(STATEMENT_TIMEOUT),
        "FLOE_DATABASE_CONNECT_TIMEOUT_SECONDS": str(CONNECT_TIMEOUT),
    }
    home = Path(tmp_path_factory.mktemp("floe-faults"))
    server = CatalogProcess(pg.create_database(database), home=home, env=env)
    with server, httpx.Client(base_url=server.url, timeout=120) as client:
        client.headers["Authorization"] = f"Bearer {server.token()}"
        client.post("/v1/default/namespaces", json={"namespace": ["faults"]}).raise_for_status()
        client.post(f"{NAMESPACE}/tables", json={"name": "t", "schema": SCHEMA}).raise_for_status()
        yield FaultyCatalog(pg, database, server, client)


def _warm(client: httpx.Client) -> None:
    """Fill both connection pools (each concurrent request holds a connection of its own)."""
    assert probe_rounds(client, 4 * CLIENTS) == []


def _assert_unavailable(response: httpx.Response, elapsed: float, bound: float = BOUND) -> None:
    assert response.status_code == 503, response.text
    assert response.headers["content-type"] == "application/json"
    assert response.json()["error"]["type"] == "ServiceUnavailableException"
    assert int(response.headers["retry-after"]) > 0
    assert response.headers["x-request-id"]
    assert elapsed < bound


def _timed(request: Callable[[], httpx.Response]) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    response = request()
    return response, time.monotonic() - started


def _while_down(catalog: FaultyCatalog) -> dict[str, tuple[httpx.Response, float]]:
    """The hot routes, a Litestar route, a token request (of a key no cache holds) and a commit, all at
    once."""
    client = catalog.client
    token_form = {"grant_type": "client_credentials", "client_id": "nobody", "client_secret": "x" * 20}
    requests: dict[str, Callable[[], httpx.Response]] = {
        "loadTable": lambda: client.get(LOAD),
        "listTables": lambda: client.get(LIST),
        "listViews": lambda: client.get("/v1/default/namespaces/faults/views"),
        "loadNamespace": lambda: client.get(NAMESPACE),
        "token": lambda: httpx.post(f"{catalog.server.url}/v1/oauth/tokens", data=token_form, timeout=120),
        "commit": lambda: set_probe_property(client, "down"),
    }
    with ThreadPoolExecutor(len(requests)) as pool:
        futures = {name: pool.submit(_timed, request) for name, request in requests.items()}
        return {name: future.result() for name, future in futures.items()}


def _assert_all_unavailable(answers: dict[str, tuple[httpx.Response, float]]) -> None:
    commit, commit_elapsed = answers.pop("commit")
    token, token_elapsed = answers.pop("token")
    for response, elapsed in answers.values():
        _assert_unavailable(response, elapsed)
    _assert_unavailable(token, token_elapsed, AUDITED_BOUND)
    # A commit either never reached the database (503) or cannot know whether its swap landed.
    assert commit_elapsed < AUDITED_BOUND
    expected = {503: "ServiceUnavailableException", 500: "CommitStateUnknownException"}
    assert expected.get(commit.status_code) == commit.json()["error"]["type"], commit.text


def test_frozen_database_answers_503_with_retry_after_within_the_timeouts(catalog: FaultyCatalog) -> None:
    _warm(catalog.client)
    catalog.pg.pause()
    try:
        answers = _while_down(catalog)
    finally:
        catalog.pg.resume()
    _assert_all_unavailable(answers)
    assert probe_rounds(catalog.client, 2 * CLIENTS) == []


def test_shut_down_database_answers_503_on_every_route(catalog: FaultyCatalog) -> None:
    _warm(catalog.client)
    catalog.pg.shut_down()
    try:
        answers = _while_down(catalog)
    finally:
        catalog.pg.start_again()
    _assert_all_unavailable(answers)
    assert probe_rounds(catalog.client, 2 * CLIENTS) == []


def test_a_restart_fails_no_request(catalog: FaultyCatalog) -> None:
    for _ in range(3):
        _warm(catalog.client)
        catalog.pg.restart()
        assert probe_rounds(catalog.client, 4 * CLIENTS) == []


def test_terminated_connections_fail_no_request(catalog: FaultyCatalog) -> None:
    for _ in range(5):
        _warm(catalog.client)
        assert catalog.pg.terminate_backends(catalog.database) > 0
        assert probe_rounds(catalog.client, 4 * CLIENTS) == []


def test_a_swap_cut_mid_statement_answers_commit_state_unknown(catalog: FaultyCatalog) -> None:
    """The backend running the commit's pointer swap is terminated while the UPDATE runs (a trigger holds
    it there): the client must be told the outcome is unknown, not that the commit failed."""
    pg, database = catalog.pg, catalog.database
    pg.psql(
        "CREATE FUNCTION hold_swap() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN PERFORM pg_sleep(60); RETURN NEW; END $$; "
        "CREATE TRIGGER hold_swap BEFORE UPDATE ON tabulars FOR EACH ROW EXECUTE FUNCTION hold_swap()",
        database,
    )
    answer: list[httpx.Response] = []
    committing = threading.Thread(target=lambda: answer.append(set_probe_property(catalog.client, "cut")))
    try:
        committing.start()
        deadline = time.monotonic() + 30
        while not pg.terminate_backends(database, running="UPDATE tabulars"):
            assert time.monotonic() < deadline, "the commit's swap never started"
        committing.join(60)
    finally:
        pg.psql("DROP TRIGGER hold_swap ON tabulars; DROP FUNCTION hold_swap()", database)
    (response,) = answer
    assert response.status_code == 500, response.text
    assert response.json()["error"]["type"] == "CommitStateUnknownException"
    assert response.headers["x-request-id"]
    # Nothing of it landed (the backend died before committing), and the catalog carries on.
    assert catalog.client.get(LOAD).json()["metadata"]["properties"].get("probe") != "cut"
    assert probe_rounds(catalog.client, CLIENTS) == []


# The plain asyncpg connections of the hot path, driven directly (the store of the module's database).

_ONE_ROW = select(bindparam("p_value", type_=Integer).label("value"))


def _store(catalog: FaultyCatalog) -> SqlCatalogStore:
    url = catalog.pg.database_url(catalog.database)
    return SqlCatalogStore(url, statement_timeout=STATEMENT_TIMEOUT, connect_timeout=CONNECT_TIMEOUT)


def test_a_read_whose_pooled_connection_the_server_closed_runs_again(catalog: FaultyCatalog) -> None:
    """The backend is terminated while the event loop is blocked, so the pooled connection still looks
    open when the next read takes it: the read runs again on a new connection instead of failing."""

    async def run() -> list[Any]:
        store = _store(catalog)
        try:
            assert [tuple(r) for r in await store._fetch(_ONE_ROW, {"p_value": 1})] == [(1,)]
            catalog.pg.terminate_backends(catalog.database)  # blocking: asyncpg sees nothing of it yet
            return [tuple(r) for r in await store._fetch(_ONE_ROW, {"p_value": 2})]
        finally:
            await store.close()

    for _ in range(3):
        assert asyncio.run(run()) == [(2,)]


def test_a_statement_on_a_frozen_database_times_out(catalog: FaultyCatalog) -> None:
    async def run() -> float:
        store = _store(catalog)
        try:
            await store._fetch(_ONE_ROW, {"p_value": 1})  # a pooled connection, open before the freeze
            catalog.pg.pause()
            started = time.monotonic()
            with pytest.raises(TimeoutError):
                await store._fetch(_ONE_ROW, {"p_value": 2})
            return time.monotonic() - started
        finally:
            catalog.pg.resume()
            await store.close()

    assert STATEMENT_TIMEOUT <= asyncio.run(run()) < BOUND
