"""Requests of `floe serve` through PostgreSQL faults, counted (issue 30, items 3, 4, 5 and 9).

Run from a checkout: `python -m benchmarks.catalog.database_faults [--label after]`; the server is the
`catalog` package of the current directory (run it from a `git archive` of an older commit, with this file
and devtools/postgres.py copied in, to count the same for that commit). On a PostgreSQL of its own, one
`floe serve` process (FLOE_AUTH=none, statement timeout 3 s, connect timeout 2 s where supported):

- restarts: `rounds` times, fill the pools (8 concurrent clients), restart PostgreSQL (fast shutdown),
  then probe (loadTable, listTables, loadNamespace, a commit) from 8 clients; failed probes counted,
- terminations: the same with `pg_terminate_backend` of floe's connections instead of a restart,
- swaps cut mid-statement: a trigger holds the commit's UPDATE, its backend is terminated; the error
  types answered counted (`CommitStateUnknownException` is the one that tells the truth),
- frozen (SIGSTOP): loadTable, listTables and loadNamespace while PostgreSQL is stopped; status, content
  type and time to answer (the client gives up after 20 s).

Results: benchmarks/results/catalog-database-faults-<label>.json (and a line per scenario on stdout).
"""

from __future__ import annotations

import argparse
import json
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from devtools.catalog_server import CatalogProcess
from devtools.postgres import LocalPostgres

RESULTS = Path(__file__).resolve().parents[1] / "results"
CLIENTS = 8
LOAD = "/v1/default/namespaces/faults/tables/t"
LIST = "/v1/default/namespaces/faults/tables"
NAMESPACE = "/v1/default/namespaces/faults"
SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "fields": [{"id": 1, "name": "a", "type": "long", "required": False}],
}


def set_probe_property(client: httpx.Client, value: str) -> httpx.Response:
    """A commit that always applies (no requirements): a property set to `value`."""
    update = {"action": "set-properties", "updates": {"probe": value}}
    return client.post(LOAD, json={"requirements": [], "updates": [update]})


def probe_once(client: httpx.Client, n: int) -> list[str]:
    """One of each request; a line per failed one."""
    failed = []
    requests: tuple[tuple[str, Callable[[], httpx.Response]], ...] = (
        ("loadTable", lambda: client.get(LOAD)),
        ("listTables", lambda: client.get(LIST)),
        ("loadNamespace", lambda: client.get(NAMESPACE)),
        ("commit", lambda: set_probe_property(client, f"{n}-{uuid.uuid4().hex[:6]}")),
    )
    for name, request in requests:
        try:
            response = request()
        except httpx.HTTPError as exc:
            failed.append(f"{name}: {type(exc).__name__}")
            continue
        if response.status_code != 200:
            failed.append(f"{name}: {response.status_code} {response.text[:120]}")
    return failed


def probe_rounds(client: httpx.Client, count: int) -> list[str]:
    """`count` probes from `CLIENTS` threads at once (so that many pooled connections are used)."""
    with ThreadPoolExecutor(CLIENTS) as pool:
        return [f for failed in pool.map(lambda n: probe_once(client, n), range(count)) for f in failed]


def _after_faults(client: httpx.Client, rounds: int, fault: Any) -> dict[str, Any]:
    probes = failures = 0
    examples: list[str] = []
    for _ in range(rounds):
        probe_rounds(client, 2 * CLIENTS)  # fill the pools
        fault()
        failed = probe_rounds(client, 4 * CLIENTS)
        probes += 4 * CLIENTS * 4
        failures += len(failed)
        examples += failed[:2]
    return {"requests": probes, "failed": failures, "examples": examples[:6]}


def _commit_into(client: httpx.Client, value: str, answer: list[httpx.Response]) -> None:
    answer.append(set_probe_property(client, value))


def _cut_swaps(pg: LocalPostgres, database: str, client: httpx.Client, count: int) -> dict[str, Any]:
    pg.psql(
        "CREATE FUNCTION hold_swap() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN PERFORM pg_sleep(60); RETURN NEW; END $$; "
        "CREATE TRIGGER hold_swap BEFORE UPDATE ON tabulars FOR EACH ROW EXECUTE FUNCTION hold_swap()",
        database,
    )
    answers: Counter[str] = Counter()
    try:
        for n in range(count):
            answer: list[httpx.Response] = []
            committing = threading.Thread(target=_commit_into, args=(client, f"cut-{n}", answer))
            committing.start()
            deadline = time.monotonic() + 30
            while (
                not pg.terminate_backends(database, running="UPDATE tabulars") and time.monotonic() < deadline
            ):
                time.sleep(0.05)
            committing.join(120)
            response = answer[0]
            try:
                kind = response.json()["error"]["type"]
            except ValueError:
                kind = response.headers.get("content-type", "?")
            answers[f"{response.status_code} {kind}"] += 1
    finally:
        pg.psql("DROP TRIGGER hold_swap ON tabulars; DROP FUNCTION hold_swap()", database)
    return {"commits": count, "answers": dict(answers)}


def _frozen(pg: LocalPostgres, client: httpx.Client) -> dict[str, Any]:
    probe_rounds(client, 2 * CLIENTS)
    pg.pause()
    results: dict[str, Any] = {}
    try:
        for name, path in (("loadTable", LOAD), ("listTables", LIST), ("loadNamespace", NAMESPACE)):
            started = time.monotonic()
            try:
                response = client.get(path, timeout=20)
                outcome = {
                    "status": response.status_code,
                    "content_type": response.headers.get("content-type"),
                    "retry_after": response.headers.get("retry-after"),
                    "request_id": bool(response.headers.get("x-request-id")),
                }
            except httpx.HTTPError as exc:
                outcome = {"status": type(exc).__name__}
            outcome["seconds"] = round(time.monotonic() - started, 2)
            results[name] = outcome
    finally:
        pg.resume()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--label", default="after")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cuts", type=int, default=10)
    args = parser.parse_args()
    env = {
        "FLOE_AUTH": "none",
        "FLOE_DATABASE_STATEMENT_TIMEOUT_SECONDS": "3",
        "FLOE_DATABASE_CONNECT_TIMEOUT_SECONDS": "2",
    }
    with LocalPostgres() as pg:
        database = f"floe_{uuid.uuid4().hex[:8]}"
        server = CatalogProcess(pg.create_database(database), env=env)
        server.start(timeout=600)  # migrations first: slow on a loaded machine
        try:
            with httpx.Client(base_url=server.url, timeout=120) as client:
                client.post("/v1/default/namespaces", json={"namespace": ["faults"]}).raise_for_status()
                client.post(f"{NAMESPACE}/tables", json={"name": "t", "schema": SCHEMA}).raise_for_status()
                results = {
                    "label": args.label,
                    "restarts": _after_faults(client, args.rounds, pg.restart),
                    "terminations": _after_faults(
                        client, args.rounds, lambda: pg.terminate_backends(database)
                    ),
                    "swaps_cut_mid_statement": _cut_swaps(pg, database, client, args.cuts),
                    "frozen": _frozen(pg, client),
                }
        finally:
            server.stop()
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"catalog-database-faults-{args.label}.json").write_text(json.dumps(results, indent=2) + "\n")
    for name, value in results.items():
        print(name, json.dumps(value))


if __name__ == "__main__":
    main()
