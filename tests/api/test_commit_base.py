"""A commit builds on the table as the database has it, whoever committed last.

A commit reads its tables' rows without their metadata JSON when it holds the current metadata's
parsed model (`TableCommits._read_tables`), and reads the JSON when it does not: here two catalog
servers on one database take turns, so each one's cached models are one commit behind, for a lone
table (the prepared single-row read) and for transactions of several tables (the batched read).
"""

from __future__ import annotations

import httpx
import pyarrow as pa

from devtools.catalog_server import CatalogProcess
from tests.api.test_load_cache import two_servers
from tests.api.test_security import bearer

__all__ = ["two_servers"]  # the fixture, used below

PREFIX = "/v1/default"


def _set(key: str, value: str) -> dict[str, object]:
    return {"action": "set-properties", "updates": {key: value}}


def _transaction(tables: list[str], key: str, value: str) -> dict[str, object]:
    return {
        "table-changes": [
            {
                "identifier": {"namespace": ["ns"], "name": t},
                "requirements": [],
                "updates": [_set(key, value)],
            }
            for t in tables
        ]
    }


def test_commits_through_two_servers_build_on_each_other(
    two_servers: tuple[CatalogProcess, CatalogProcess],
) -> None:
    one, two = two_servers
    one.catalog().create_namespace("ns")
    tables = ["a", "b", "c"]
    for name in tables:
        one.catalog().create_table(f"ns.{name}", schema=pa.schema([("id", pa.int64())]))
    with (
        httpx.Client(base_url=one.url, headers=bearer(one.token())) as via_one,
        httpx.Client(base_url=two.url, headers=bearer(two.token())) as via_two,
    ):
        for step in range(4):
            via = (via_one, via_two)[step % 2]
            lone = via.post(
                f"{PREFIX}/namespaces/ns/tables/a",
                json={"requirements": [], "updates": [_set(f"lone{step}", "x")]},
            )
            assert lone.status_code == 200, lone.text
            # Every earlier commit's property is there: the base was the current state, not a cached one.
            properties = lone.json()["metadata"]["properties"]
            assert {f"lone{s}" for s in range(step + 1)} | {f"tx{s}" for s in range(step)} <= set(properties)
            committed = via.post(f"{PREFIX}/transactions/commit", json=_transaction(tables, f"tx{step}", "y"))
            assert committed.status_code == 204, committed.text
        # A change without updates is answered with the table as it is (its metadata JSON read whole).
        unchanged = via_one.post(f"{PREFIX}/namespaces/ns/tables/b", json={"requirements": [], "updates": []})
        assert unchanged.status_code == 200, unchanged.text
        assert {f"tx{s}" for s in range(4)} <= set(unchanged.json()["metadata"]["properties"])
        for name in tables:
            loaded = via_two.get(f"{PREFIX}/namespaces/ns/tables/{name}").json()["metadata"]["properties"]
            assert {f"tx{s}" for s in range(4)} <= set(loaded)
        assert {f"lone{s}" for s in range(4)} <= set(
            via_one.get(f"{PREFIX}/namespaces/ns/tables/a").json()["metadata"]["properties"]
        )
