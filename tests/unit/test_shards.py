"""`runtime.shards` (and maintenance's use of it): which instance of `floe ingest --shard i/n` /
`floe maintain --shard i/n` handles a table. The hash must never change between releases (a running
deployment's instances would swap tables on an upgrade), so a few shards are pinned here."""

from __future__ import annotations

import click
import pytest

from floe.cli.services import parse_shard, parse_shard_option
from maintenance.shards import maintenance_shard_key
from runtime.shards import owner_of, shard_of


def test_shards_are_stable_across_processes_and_releases() -> None:
    # Computed once (SHA-256 of the name, first 8 bytes big-endian, modulo n); fixed from now on.
    assert [shard_of(f"orders.t{i}", 4) for i in range(8)] == [3, 2, 0, 0, 3, 1, 1, 3]
    assert shard_of("anything", 1) == 0


def test_every_table_is_in_exactly_one_shard() -> None:
    names = [f"ns.table{i}" for i in range(200)]
    for count in (2, 3, 7):
        shards = [shard_of(name, count) for name in names]
        assert all(0 <= s < count for s in shards)
        assert set(shards) == set(range(count))  # 200 names reach every shard


def test_a_dead_letter_table_goes_with_its_table() -> None:
    for i in range(50):
        name = f"topic_{i}"
        ingested = shard_of(f"cluster.{name}", 5)
        # What both `floe maintain --shard i/n` and `--shard auto` divide by.
        assert shard_of(maintenance_shard_key(("cluster",), f"{name}_dlq"), 5) == ingested
        assert shard_of(maintenance_shard_key(("cluster",), name), 5) == ingested


@pytest.mark.parametrize("value", ["2/2", "-1/2", "1", "a/b", "0/0", ""])
def test_a_bad_shard_is_refused_naming_the_option(value: str) -> None:
    with pytest.raises(click.BadParameter) as refused:
        parse_shard(value)
    assert "i/n" in str(refused.value.message)
    assert refused.value.param_hint == "--shard"


def test_a_good_shard() -> None:
    assert parse_shard("1/3") == (1, 3)
    assert parse_shard_option("1/3") == (1, 3)
    assert parse_shard_option("auto") is None  # leases in floe (`runtime.leases`)
    with pytest.raises(click.BadParameter):
        parse_shard_option("Auto")


# -- `floe ingest --shard auto`: rendezvous over the live instances ---------------------------------


def test_an_owner_is_one_of_the_members_and_the_same_everywhere() -> None:
    members = ["host-a-1-aa", "host-b-2-bb", "host-c-3-cc"]
    assert owner_of("orders.t0", []) is None
    assert owner_of("orders.t0", ["only"]) == "only"
    for i in range(100):
        name = f"orders.t{i}"
        owner = owner_of(name, members)
        assert owner in members
        # Order does not matter: every instance gets the same answer from the same list.
        assert owner_of(name, reversed(members)) == owner == owner_of(name, sorted(members))


def test_tables_spread_over_the_members_and_only_a_leavers_move() -> None:
    names = [f"cluster.topic_{i}" for i in range(2_000)]
    members = [f"m{i}" for i in range(4)]
    before = {name: owner_of(name, members) for name in names}
    counts = [list(before.values()).count(m) for m in members]
    assert min(counts) > 0.8 * len(names) / len(members), counts
    # m2 is killed: its tables go to the others, evenly; nobody else's table moves.
    after = {name: owner_of(name, [m for m in members if m != "m2"]) for name in names}
    moved = [name for name in names if before[name] != after[name]]
    assert sorted(moved) == sorted(name for name in names if before[name] == "m2")
    taken = [after[name] for name in moved]
    assert all(taken.count(m) > 0.25 * len(moved) for m in ("m0", "m1", "m3"))
    # A new instance joins: it takes about a fifth, only from the others.
    joined = {name: owner_of(name, [*members, "m4"]) for name in names}
    changed = [name for name in names if joined[name] != before[name]]
    assert all(joined[name] == "m4" for name in changed)
    assert 0.15 * len(names) < len(changed) < 0.25 * len(names)
