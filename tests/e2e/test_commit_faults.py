"""Faults between a commit and its answer, on PostgreSQL with real `floe serve` processes.

- kill -9 right after a commit's transaction committed, before its answer (`FLOE_TEST_FAULT=
  crash-after-commit`, catalog/faults.py): the retry with the same `Idempotency-Key` on another server
  gets 200 with the commit's answer, and the change is applied once; a commit with a requirement (as
  Java, Spark, Trino and pyiceberg send) is answered 200, not 409 for a commit that landed.
- terminated backends (`pg_terminate_backend` of floe's connections, over and over) and a failing
  audit insert: a mutation is answered 2xx only with its audit entry stored, and a change never exists
  without its entry (they commit in one transaction, `catalog.store.audit_context`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
import time
import uuid
from collections.abc import Generator, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import asyncpg  # type: ignore[import-untyped]
import httpx
import pytest

from catalog.faults import CRASH_AFTER_COMMIT, FAULT_ENV
from devtools.catalog_server import CatalogProcess
from devtools.postgres import LocalPostgres
from tests.api.test_rest_api import PREFIX, SCHEMA, set_prop, snapshot_update

TRIALS = 6
AUDIT_TRIALS = 300
# Starting a server takes seconds, minutes on a machine this busy: no test here is about its speed.
START_TIMEOUT = 300


@contextmanager
def serving(process: CatalogProcess) -> Iterator[CatalogProcess]:
    process.start(timeout=START_TIMEOUT)
    try:
        yield process
    finally:
        process.stop()


def dsn(database_url: str) -> str:
    return database_url.replace("postgresql+asyncpg://", "postgresql://", 1)


def query(database_url: str, sql: str, *args: Any) -> list[Any]:
    async def run() -> list[Any]:
        connection = await asyncpg.connect(dsn(database_url))
        try:
            return list(await connection.fetch(sql, *args))
        finally:
            await connection.close()

    return asyncio.run(run())


@pytest.fixture(scope="module")
def database(postgres: LocalPostgres) -> str:
    """The module's database: each test works in a namespace and table of its own."""
    return postgres.create_database(f"floe_{uuid.uuid4().hex[:8]}")


@pytest.fixture(scope="module")
def server(database: str) -> Iterator[CatalogProcess]:
    with serving(CatalogProcess(database)) as running:
        yield running


def doomed_servers(server: CatalogProcess, count: int) -> Generator[CatalogProcess, None, None]:
    """`count` servers of `server`'s database that die right after committing, one at a time; the next
    one starts while the current one's trial runs (a start is seconds of CPU, a trial a few requests)."""
    env = admin_env(server, **{FAULT_ENV: CRASH_AFTER_COMMIT})

    def start() -> CatalogProcess:
        return CatalogProcess(server.database_url, home=server.home, env=env).start(timeout=START_TIMEOUT)

    with ThreadPoolExecutor(1) as starter:
        upcoming: Future[CatalogProcess] | None = starter.submit(start)
        try:
            for remaining in range(count - 1, -1, -1):
                assert upcoming is not None
                current = upcoming.result()
                upcoming = starter.submit(start) if remaining else None
                try:
                    yield current
                finally:
                    current.stop()
        finally:
            if upcoming is not None:
                with contextlib.suppress(Exception):
                    upcoming.result().stop()


def admin_env(server: CatalogProcess, **extra: str) -> dict[str, str]:
    return {
        "FLOE_ADMIN_CLIENT_ID": server.admin_client_id,
        "FLOE_ADMIN_CLIENT_SECRET": server.admin_client_secret,
        **extra,
    }


def client(server: CatalogProcess) -> httpx.Client:
    return httpx.Client(
        base_url=server.url, timeout=60, headers={"Authorization": f"Bearer {server.token()}"}
    )


def new_table(http: httpx.Client) -> tuple[str, str]:
    """A new namespace and table in it; returns the table's URL and location."""
    namespace = f"ns_{uuid.uuid4().hex[:8]}"
    assert http.post(f"{PREFIX}/namespaces", json={"namespace": [namespace]}).status_code == 200
    url = f"{PREFIX}/namespaces/{namespace}/tables"
    created = http.post(url, json={"name": "t", "schema": SCHEMA})
    assert created.status_code == 200, created.text
    return f"{url}/t", created.json()["metadata"]["location"]


def commit_body(trial: int, metadata: dict[str, Any], *, with_requirement: bool) -> dict[str, Any]:
    """A set-properties commit, or an append guarded by `assert-ref-snapshot-id` (what engines send):
    once it landed, its requirement no longer holds."""
    if not with_requirement:
        return {"requirements": [], "updates": [set_prop(f"trial-{trial}", "applied")]}
    current = metadata.get("current-snapshot-id")
    current = None if current in (None, -1) else current
    snapshot_id = 1000 + trial
    sequence = int(metadata.get("last-sequence-number", 0)) + 1
    return {
        "requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": current}],
        "updates": [
            snapshot_update(snapshot_id, sequence, current, location=metadata["location"]),
            {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": snapshot_id},
        ],
    }


def crash_then_retry(
    server: CatalogProcess, http: httpx.Client, table: str, trials: int, *, with_requirement: bool
) -> dict[str, int]:
    """Each trial: a commit with a key to a server that dies right after committing, then the retry
    with the key on `server`. Counts the outcomes."""
    counts = {"ok": 0, "duplicated": 0, "lost": 0, "conflict_409": 0, "other": 0}
    # Closed on the way out, failed or not: no server is left running.
    with contextlib.closing(doomed_servers(server, trials)) as doomed_ones:
        for trial, doomed in enumerate(doomed_ones):
            before = http.get(table).json()["metadata"]
            key = {"Idempotency-Key": str(uuid.uuid4())}
            body = commit_body(trial, before, with_requirement=with_requirement)
            headers = {"Authorization": f"Bearer {doomed.token()}", **key}
            with pytest.raises(httpx.TransportError):  # the process died before answering
                httpx.post(f"{doomed.url}{table}", json=body, headers=headers, timeout=60)
            assert doomed.process is not None
            assert doomed.process.wait(timeout=30) == -9
            retry = http.post(table, json=body, headers=key)
            after = http.get(table).json()
            versions = len(after["metadata"]["metadata-log"]) - len(before["metadata-log"])
            if retry.status_code == 409:
                counts["conflict_409"] += 1
            elif retry.status_code != 200:
                counts["other"] += 1
            if versions > 1:
                counts["duplicated"] += 1
            elif versions == 0:
                counts["lost"] += 1
            elif retry.status_code == 200:
                answered = retry.json()
                assert answered["metadata-location"] == after["metadata-location"]
                assert answered["metadata"] == after["metadata"]
                again = http.post(table, json=body, headers=key)
                assert (again.status_code, again.content) == (200, retry.content)
                counts["ok"] += 1
    return counts


@pytest.mark.parametrize("with_requirement", [False, True], ids=["set-properties", "append-with-requirement"])
def test_retry_after_kill_9_between_commit_and_answer(server: CatalogProcess, with_requirement: bool) -> None:
    with client(server) as http:
        table, _ = new_table(http)
        counts = crash_then_retry(server, http, table, TRIALS, with_requirement=with_requirement)
    print(f"crash after commit, {TRIALS} trials: {counts}")
    assert counts == {"ok": TRIALS, "duplicated": 0, "lost": 0, "conflict_409": 0, "other": 0}


@pytest.mark.parametrize("dropped_since", [False, True], ids=["table-kept", "table-dropped"])
def test_a_retry_whose_landed_file_was_deleted_since_answers_the_table_as_it_is_now(
    server: CatalogProcess, dropped_since: bool
) -> None:
    """A commit that landed but was never answered (kill -9 between the two) is answered on retry from
    the file it wrote; with delete-after-commit, later commits may have deleted that file. The retry then
    answers the table as it is (the commit landed; what followed builds on it), applying nothing again;
    when the table was dropped since, 404 as a commit to it now would be, and nothing is created."""
    tidy = {"write.metadata.delete-after-commit.enabled": "true", "write.metadata.previous-versions-max": "1"}
    with client(server) as http:
        table, _ = new_table(http)
        set_tidy = {"requirements": [], "updates": [{"action": "set-properties", "updates": tidy}]}
        assert http.post(table, json=set_tidy).status_code == 200
        key = {"Idempotency-Key": str(uuid.uuid4())}
        body = {"requirements": [], "updates": [set_prop("crashed", "landed")]}
        with contextlib.closing(doomed_servers(server, 1)) as doomed_ones:
            for doomed in doomed_ones:
                headers = {"Authorization": f"Bearer {doomed.token()}", **key}
                with pytest.raises(httpx.TransportError):  # the process died before answering
                    httpx.post(f"{doomed.url}{table}", json=body, headers=headers, timeout=60)
                assert doomed.process is not None
                assert doomed.process.wait(timeout=30) == -9
        landed = http.get(table).json()
        assert landed["metadata"]["properties"]["crashed"] == "landed"
        landed_file = Path(urlsplit(landed["metadata-location"]).path)
        for n in range(2):  # the log keeps one file: the second later commit drops the landed one
            later = {"requirements": [], "updates": [set_prop(f"later-{n}", "x")]}
            assert http.post(table, json=later).status_code == 200
        deadline = time.monotonic() + 30
        while landed_file.exists():  # deleted just after the second one answered
            assert time.monotonic() < deadline, "the dropped metadata file was not deleted"
            time.sleep(0.05)
        if dropped_since:
            assert http.delete(table).status_code == 204
            retry = http.post(table, json=body, headers=key)
            assert retry.status_code == 404, retry.text
            assert retry.json()["error"]["type"] == "NoSuchTableException"
            assert http.get(table).status_code == 404
            return
        before_retry = http.get(table).json()
        retry = http.post(table, json=body, headers=key)
        assert retry.status_code == 200, retry.text
        now = http.get(table).json()
        assert now == before_retry  # nothing committed again
        assert retry.json()["metadata-location"] == now["metadata-location"]
        assert retry.json()["metadata"] == now["metadata"]
        assert now["metadata"]["properties"]["later-1"] == "x"


@contextmanager
def terminating_backends(database_url: str, interval: float = 0.05) -> Iterator[list[int]]:
    """`pg_terminate_backend` of every other connection to the database, every `interval` seconds,
    while the block runs; yields the running count of terminated backends."""
    terminated = [0]
    stop = threading.Event()
    database = database_url.rsplit("/", 1)[1]

    async def run() -> None:
        connection = await asyncpg.connect(dsn(database_url))
        try:
            while not stop.is_set():
                rows = await connection.fetch(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = $1 AND pid <> pg_backend_pid()",
                    database,
                )
                terminated[0] += sum(1 for row in rows if row[0])
                await asyncio.sleep(interval)
        finally:
            await connection.close()

    thread = threading.Thread(target=lambda: asyncio.run(run()), daemon=True)
    thread.start()
    try:
        yield terminated
    finally:
        stop.set()
        thread.join(timeout=30)


def mutations(
    http: httpx.Client, table: str, namespace: str, created: dict[str, str]
) -> Iterator[tuple[str, httpx.Response]]:
    """Table commits, namespace property updates, namespace creates and table creates, each with its
    request id; `created` gets each create's request id -> the name it creates."""
    for n in itertools.count():
        request_id = uuid.uuid4().hex
        headers = {"X-Request-Id": request_id}
        body: dict[str, Any]
        try:
            if n % 4 == 0:
                body = {"requirements": [], "updates": [set_prop("n", str(n))]}
                yield request_id, http.post(table, json=body, headers=headers)
            elif n % 4 == 1:
                body = {"updates": {"n": str(n)}, "removals": []}
                yield (
                    request_id,
                    http.post(f"{PREFIX}/namespaces/{namespace}/properties", json=body, headers=headers),
                )
            elif n % 4 == 2:
                created[request_id] = f"{namespace}_{n}"
                body = {"namespace": [f"{namespace}_{n}"]}
                yield request_id, http.post(f"{PREFIX}/namespaces", json=body, headers=headers)
            else:
                created[request_id] = f"t_{n}"
                body = {"name": f"t_{n}", "schema": SCHEMA}
                yield (
                    request_id,
                    http.post(f"{PREFIX}/namespaces/{namespace}/tables", json=body, headers=headers),
                )
        except httpx.TransportError:
            continue


def existing(http: httpx.Client, namespace: str) -> set[str]:
    """The top-level namespaces and the tables of `namespace`."""
    namespaces = http.get(f"{PREFIX}/namespaces", params={"pageSize": 1000})
    tables = http.get(f"{PREFIX}/namespaces/{namespace}/tables", params={"pageSize": 1000})
    assert namespaces.status_code == tables.status_code == 200, (namespaces.text, tables.text)
    assert "next-page-token" not in namespaces.json() or not namespaces.json()["next-page-token"]
    return {level[0] for level in namespaces.json()["namespaces"]} | {
        t["name"] for t in tables.json()["identifiers"]
    }


def audited(database_url: str, request_ids: list[str]) -> set[str]:
    rows = query(database_url, "SELECT request_id FROM audit_log WHERE request_id = ANY($1)", request_ids)
    return {row[0] for row in rows}


def test_no_success_without_its_audit_entry_while_backends_are_terminated(
    server: CatalogProcess, database: str
) -> None:
    with client(server) as http:
        table, _ = new_table(http)
        namespace = table.split("/namespaces/", 1)[1].split("/", 1)[0]
        answered: list[tuple[str, httpx.Response]] = []
        created: dict[str, str] = {}
        with terminating_backends(database) as terminated:
            for request_id, response in itertools.islice(
                mutations(http, table, namespace, created), AUDIT_TRIALS
            ):
                answered.append((request_id, response))
        present = existing(http, namespace)
    successes = [request_id for request_id, response in answered if response.status_code < 300]
    refused = [response for _, response in answered if response.status_code >= 500]
    entries = audited(database, [request_id for request_id, _ in answered] + list(created))
    unaudited = set(successes) - entries
    # Creates whose name exists (answered or not): each must have its entry, committed with it.
    applied = {request_id for request_id, name in created.items() if name in present}
    applied_unaudited = applied - entries
    refused_ids = {request_id for request_id, response in answered if response.status_code >= 500}
    refused_applied = applied & refused_ids
    print(
        f"{len(answered)} mutations, {terminated[0]} backends terminated: {len(successes)} succeeded, "
        f"{len(refused)} refused (5xx), {len(unaudited)} succeeded without an audit entry; "
        f"{len(created)} creates, {len(applied)} applied, {len(applied_unaudited)} applied without an entry, "
        f"{len(refused_applied)} refused yet applied (the commit's acknowledgement lost)"
    )
    assert terminated[0] > 0
    assert successes, "no mutation succeeded: nothing was checked"
    assert not unaudited
    assert not applied_unaudited
    for response in refused:
        assert "error" in response.json(), response.text


def test_failing_audit_insert_refuses_the_mutation(server: CatalogProcess, database: str) -> None:
    with client(server) as http:
        table, _ = new_table(http)
        namespace = table.split("/namespaces/", 1)[1].split("/", 1)[0]
        before = http.get(table).json()["metadata-location"]
        query(
            database,
            "CREATE FUNCTION refuse_audit() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'audit log unavailable'; END $$",
        )
        query(
            database,
            "CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_log "
            "FOR EACH ROW EXECUTE FUNCTION refuse_audit()",
        )
        try:
            committed = http.post(table, json={"requirements": [], "updates": [set_prop("x", "1")]})
            properties = http.post(
                f"{PREFIX}/namespaces/{namespace}/properties", json={"updates": {"x": "1"}, "removals": []}
            )
            new_namespace = http.post(f"{PREFIX}/namespaces", json={"namespace": [f"{namespace}_refused"]})
            refused_table = http.post(
                f"{PREFIX}/namespaces/{namespace}/tables", json={"name": "refused", "schema": SCHEMA}
            )
            dropped = http.delete(table)
            for response in (committed, properties, new_namespace, refused_table, dropped):
                assert response.status_code >= 500, response.text
                assert "error" in response.json()
            # Each change and its entry are one transaction: refused, not applied.
            assert http.get(table).json()["metadata-location"] == before
            assert "x" not in http.get(f"{PREFIX}/namespaces/{namespace}").json()["properties"]
            assert http.get(f"{PREFIX}/namespaces/{namespace}_refused").status_code == 404
            assert http.get(f"{PREFIX}/namespaces/{namespace}/tables/refused").status_code == 404
        finally:
            query(database, "DROP TRIGGER refuse_audit ON audit_log")
            query(database, "DROP FUNCTION refuse_audit()")
        landed = http.post(table, json={"requirements": [], "updates": [set_prop("x", "2")]})
        assert landed.status_code == 200, landed.text
        assert audited(database, [landed.headers["x-request-id"]]) == {landed.headers["x-request-id"]}
