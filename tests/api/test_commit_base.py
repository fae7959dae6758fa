"""A commit builds on the table as the database has it, whoever committed last.

A commit reads its tables' rows without their metadata JSON when it holds the current metadata's
parsed model (`TableCommits._read_tables`), and reads the JSON when it does not: here two catalog
servers on one database take turns, so each one's cached models are one commit behind, for a lone
table (the prepared single-row read) and for transactions of several tables (the batched read).

A lone table's commit does not even read the row when its server's last commit left it
(`TableHeads`): the swap (by the row's id and version) proves it current, and a stale one is read
again. Here the other server moves the table between them: a commit, a rename, a drop.
"""

from __future__ import annotations

import httpx
import pyarrow as pa
from prometheus_client import REGISTRY
from pyiceberg.types import LongType

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


def _guesses(result: str) -> float:
    return REGISTRY.get_sample_value("floe_commit_head_guesses_total", {"result": result}) or 0.0


def _commit(
    via: httpx.Client, table: str, *changes: dict[str, object], **requirement: object
) -> httpx.Response:
    requirements = [requirement] if requirement else []
    return via.post(
        f"{PREFIX}/namespaces/ns/tables/{table}",
        json={"requirements": requirements, "updates": list(changes)},
    )


def _set_if_last_field_id(via: httpx.Client, key: str, field_id: int) -> httpx.Response:
    """Set property `key` of table t, requiring its last assigned column id to be `field_id`."""
    requirement = {"type": "assert-last-assigned-field-id", "last-assigned-field-id": field_id}
    return _commit(via, "t", _set(key, "1"), **requirement)


def test_a_remembered_row_is_judged_only_once_read_when_another_server_moved_the_table(
    two_servers: tuple[CatalogProcess, CatalogProcess],
) -> None:
    one, two = two_servers
    one.catalog().create_namespace("ns")
    one.catalog().create_table("ns.t", schema=pa.schema([("id", pa.int64())]))
    with httpx.Client(base_url=one.url, headers=bearer(one.token())) as via_one:
        assert _commit(via_one, "t", _set("a", "1")).status_code == 200  # read: this server's first
        current = _guesses("current")
        assert _commit(via_one, "t", _set("b", "1")).status_code == 200
        assert _guesses("current") == current + 1, "prepared on the row the last commit left"
        # Server two adds a column: server one's remembered row is stale (last column id 1, not 2).
        with two.catalog().load_table("ns.t").update_schema() as update:
            update.add_column("x", LongType())
        stale = _guesses("stale")
        moved = _set_if_last_field_id(via_one, "c", 2)
        # The requirement failed on the stale row; the fresh read is what decided.
        assert moved.status_code == 200, moved.text
        assert _guesses("stale") == stale + 1
        metadata = moved.json()["metadata"]
        assert {"a", "b", "c"} <= set(metadata["properties"])
        assert [f["name"] for f in metadata["schemas"][-1]["fields"]] == ["id", "x"]
        behind = _set_if_last_field_id(via_one, "d", 1)
        assert behind.status_code == 409, behind.text
        assert behind.json()["error"]["type"] == "CommitFailedException"


def test_a_table_renamed_or_dropped_through_another_server_is_not_committed_to_by_its_old_name(
    two_servers: tuple[CatalogProcess, CatalogProcess],
) -> None:
    one, two = two_servers
    one.catalog().create_namespace("ns")
    for name in ("t", "u"):
        one.catalog().create_table(f"ns.{name}", schema=pa.schema([("id", pa.int64())]))
    with httpx.Client(base_url=one.url, headers=bearer(one.token())) as via_one:
        for name in ("t", "u"):
            for step in range(2):  # the second is prepared on the remembered row
                assert _commit(via_one, name, _set(f"s{step}", "1")).status_code == 200
        two.catalog().rename_table("ns.t", "ns.renamed")
        two.catalog().drop_table("ns.u")
        for name in ("t", "u"):
            gone = _commit(via_one, name, _set("late", "1"))
            assert gone.status_code == 404, gone.text
            assert gone.json()["error"]["type"] == "NoSuchTableException"
        renamed = _commit(via_one, "renamed", _set("after", "1"))
        assert renamed.status_code == 200, renamed.text
        assert {"s0", "s1", "after"} <= set(renamed.json()["metadata"]["properties"])
        assert "late" not in renamed.json()["metadata"]["properties"]
