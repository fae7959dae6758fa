"""Leases of `--shard auto` instances (`/management/v1/leases/{group}/{member}`), on both backends:
renewal answers the group's live members, a lease runs out on the catalog's clock, a clean end drops it
at once, one key never sees another's groups, readers may not hold leases, and bad names, lifetimes and
counts are 4xx with the spec's error JSON."""

from __future__ import annotations

import time
import uuid

import httpx
import sqlalchemy as sa

from catalog.store.schema import instance_leases
from devtools.catalog_server import CatalogProcess
from tests.api.test_idempotency import run_sql


def _path(group: str, member: str) -> str:
    return f"/management/v1/leases/{group}/{member}"


def _members(response: httpx.Response) -> list[str]:
    assert response.status_code == 200, response.text
    return [m["member"] for m in response.json()["members"]]


def _key_client(catalog_server: CatalogProcess, http: httpx.Client, cluster: str, role: str) -> httpx.Client:
    key = http.post("/management/v1/keys", json={"cluster": cluster, "role": role}).json()
    token = catalog_server.token(key["client_id"], key["client_secret"])
    return httpx.Client(base_url=catalog_server.url, headers={"Authorization": f"Bearer {token}"})


def test_members_renew_expire_and_leave(http: httpx.Client) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    assert _members(http.put(_path(group, "b"), json={"ttl-seconds": 30})) == ["b"]
    answer = http.put(_path(group, "a"), json={"ttl-seconds": 2})
    assert _members(answer) == ["a", "b"]
    body = answer.json()
    a = body["members"][0]
    assert a["expires-at-ms"] - body["now-ms"] == 2000
    assert a["joined-at-ms"] == body["now-ms"]
    # Renewing keeps the join time and moves the expiry.
    time.sleep(0.05)
    again = http.put(_path(group, "a"), json={"ttl-seconds": 2}).json()
    assert again["members"][0]["joined-at-ms"] == a["joined-at-ms"]
    assert again["members"][0]["expires-at-ms"] > a["expires-at-ms"]
    # "a" stops renewing: gone once its lease runs out.
    time.sleep(2.2)
    assert _members(http.put(_path(group, "b"), json={})) == ["b"]
    # A clean end drops a lease at once; ending one that is not there is not an error.
    assert http.delete(_path(group, "b")).status_code == 204
    assert http.delete(_path(group, "b")).status_code == 204
    assert _members(http.put(_path(group, "c"), json={})) == ["c"]


def test_a_keys_groups_are_its_own_and_readers_hold_none(
    catalog_server: CatalogProcess, http: httpx.Client
) -> None:
    cluster = f"m_{uuid.uuid4().hex[:8]}"
    assert http.post("/management/v1/clusters", json={"name": cluster}).status_code == 201
    group = "shared-name"
    assert "admin-instance" in _members(http.put(_path(group, "admin-instance"), json={}))
    with (
        _key_client(catalog_server, http, cluster, "writer") as writer,
        _key_client(catalog_server, http, cluster, "writer") as other_writer,
        _key_client(catalog_server, http, cluster, "reader") as reader,
    ):
        assert _members(writer.put(_path(group, "w1"), json={})) == ["w1"]
        # Another key's group of the same name is another group: it cannot see or end w1.
        assert _members(other_writer.put(_path(group, "w2"), json={})) == ["w2"]
        assert other_writer.delete(_path(group, "w1")).status_code == 204
        assert _members(writer.put(_path(group, "w1"), json={})) == ["w1"]
        refused = reader.put(_path(group, "r1"), json={})
        assert refused.status_code == 403, refused.text
        assert refused.json()["error"]["code"] == 403
        assert reader.delete(_path(group, "w1")).status_code == 403
        # Refused before its body is read: a reader's malformed body is a 403 too, not a 400.
        malformed = reader.put(
            _path(group, "r1"), content=b"{not json", headers={"Content-Type": "application/json"}
        )
        assert malformed.status_code == 403, malformed.text
    assert _members(http.put(_path(group, "admin-instance"), json={})) == ["admin-instance"]
    http.delete(_path(group, "admin-instance"))


def test_bad_names_lifetimes_and_bodies_are_client_errors(http: httpx.Client) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    for bad_group, bad_member in (("-x", "m"), ("g", "a b"), ("g" * 129, "m"), ("g", "%2e%2e")):
        answer = http.put(_path(bad_group, bad_member), json={})
        assert answer.status_code in (400, 404), answer.text
        assert answer.json()["error"]["code"] == answer.status_code
    for ttl in (0, 1.5, 301, -5):
        answer = http.put(_path(group, "m"), json={"ttl-seconds": ttl})
        assert answer.status_code == 400, answer.text
        assert "ttl-seconds" in answer.json()["error"]["message"]
    for body in ({"ttl-seconds": "soon"}, [1], "x"):
        answer = http.put(_path(group, "m"), json=body)
        assert answer.status_code == 400, answer.text
    assert http.delete(_path(group, "a b")).status_code == 400


def test_a_key_holds_a_bounded_number_of_leases(catalog_server: CatalogProcess, http: httpx.Client) -> None:
    """A key cannot fill the catalog with leases: 256 live ones, over all its groups; renewing one it
    holds still works at the limit, and an ended lease frees its place."""
    from catalog.service.leases import MAX_MEMBERS

    cluster = f"q_{uuid.uuid4().hex[:8]}"
    assert http.post("/management/v1/clusters", json={"name": cluster}).status_code == 201
    with _key_client(catalog_server, http, cluster, "writer") as writer:
        for i in range(MAX_MEMBERS):
            answer = writer.put(_path(f"g{i % 4}", f"m{i}"), json={"ttl-seconds": 300})
            assert answer.status_code == 200, answer.text
        refused = writer.put(_path("g0", "one-more"), json={})
        assert refused.status_code == 403, refused.text
        assert refused.json()["error"]["type"] == "QuotaExceededException"
        assert writer.put(_path("g0", "m0"), json={"ttl-seconds": 300}).status_code == 200
        assert writer.delete(_path("g0", "m0")).status_code == 204
        assert writer.put(_path("g0", "one-more"), json={}).status_code == 200


def test_instances_divide_the_tables_and_take_a_killed_ones_over(catalog_server: CatalogProcess) -> None:
    """`runtime.leases` against the catalog: two instances divide the tables between them; one that
    stops renewing (killed) loses its tables to the other once its lease runs out; one that ends its
    lease hands them over at the next renewal; an instance cut off from the catalog for a lifetime
    takes no table."""
    from catalog.client import FloeClient
    from runtime.leases import Lease

    names = [f"cluster.topic_{i}" for i in range(60)]
    group = f"g-{uuid.uuid4().hex[:8]}"
    clients: list[FloeClient] = []

    def lease(member: str, url: str = catalog_server.url) -> Lease:
        client = FloeClient(url, catalog_server.admin_client_id, catalog_server.admin_client_secret)
        clients.append(client)

        def renew(group: str, member: str, ttl: float) -> list[str]:
            return [holder.member for holder in client.renew_lease(group, member, ttl).members]

        return Lease(renew, client.end_lease, group, member, ttl_seconds=2)

    a, b = lease("a"), lease("b")
    try:
        a.start()
        assert list(a.members) == ["a"]
        assert all(a.owns(n) for n in names)
        b.start()
        assert list(b.members) == ["a", "b"]
        time.sleep(1.0)  # a's next renewal (a third of its lifetime) names b
        assert list(a.members) == ["a", "b"]
        mine = {n for n in names if a.owns(n)}
        theirs = {n for n in names if b.owns(n)}
        assert mine
        assert theirs
        assert not mine & theirs
        assert mine | theirs == set(names)
        # b is killed: no more renewals, no goodbye. a takes everything once b's lease ran out.
        b._stop.set()
        assert b._thread is not None
        b._thread.join()
        began = time.monotonic()
        while not all(a.owns(n) for n in names):
            assert time.monotonic() - began < 2 + 1.5, a.members
            time.sleep(0.1)
        assert list(a.members) == ["a"]
        # A new b ends its lease cleanly: a has everything again at its next renewal.
        b = lease("b")
        b.start()
        time.sleep(1.0)
        assert list(a.members) == ["a", "b"]
        b.stop()
        time.sleep(1.0)
        assert list(a.members) == ["a"]
        # a is cut off from the catalog: after a lifetime without an answer it takes nothing.
        cut_off = lease("a", "http://127.0.0.1:9")
        a._renew = cut_off._renew
        time.sleep(2.5)
        assert list(a.members) == []
        assert not any(a.owns(n) for n in names)
    finally:
        for each in (a, b):
            each._stop.set()
        for client in clients:
            client.close()


def test_a_keys_expired_leases_do_not_pile_up(
    catalog_server: CatalogProcess, http: httpx.Client, database_url: str
) -> None:
    """A key that makes a new group at every call leaves no rows behind but its live leases: each
    renewal deletes the key's expired ones, whatever their group."""
    cluster = f"e_{uuid.uuid4().hex[:8]}"
    assert http.post("/management/v1/clusters", json={"name": cluster}).status_code == 201
    with _key_client(catalog_server, http, cluster, "writer") as writer:
        for i in range(5):
            assert writer.put(_path(f"throwaway-{i}", "m"), json={"ttl-seconds": 2}).status_code == 200
        rows = run_sql(database_url, sa.select(instance_leases.c.scope, instance_leases.c.group_name))
        scopes = {scope for scope, group in rows if group == "throwaway-0"}
        assert len(scopes) == 1
        mine = sa.select(instance_leases.c.group_name).where(instance_leases.c.scope.in_(scopes))
        assert sorted(r[0] for r in run_sql(database_url, mine)) == [f"throwaway-{i}" for i in range(5)]
        time.sleep(2.1)
        assert writer.put(_path("kept", "m"), json={"ttl-seconds": 30}).status_code == 200
        assert [r[0] for r in run_sql(database_url, mine)] == ["kept"]
