"""A namespace's listing version counts exactly the changes to its list of tables and views (create,
register, drop, rename in and out, multi-table creates), and listing pages render as the spec's
`ListTablesResponse` exactly as Litestar encodes it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import msgspec

from catalog.api.schemas import ListTablesResponse, TableIdentifier
from catalog.identifiers import Namespace
from catalog.migrations import upgrade_database
from catalog.service.listing_cache import Listing, ListingCache
from catalog.store import PendingCommit, create_store


def test_listing_version_counts_changes_to_the_names(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'catalog.db'}"
    upgrade_database(url)

    async def run() -> None:
        store = create_store(url)
        try:
            warehouse = await store.upsert_warehouse("lake", (tmp_path / "lake").as_uri(), {})
            a = await store.create_namespace(warehouse.id, "a", {})
            b = await store.create_namespace(warehouse.id, "b", {})

            async def versions() -> tuple[int, int]:
                found_a = await store.get_listing_version(warehouse.id, "a")
                found_b = await store.get_listing_version(warehouse.id, "b")
                assert found_a is not None
                assert found_b is not None
                assert (found_a[0], found_b[0]) == (a.id, b.id)
                return found_a[1], found_b[1]

            assert await versions() == (0, 0)
            assert await store.get_listing_version(warehouse.id, "missing") is None

            def create(namespace_id: str, name: str) -> PendingCommit:
                return PendingCommit(None, 0, f"file:///{name}.json", "{}", namespace_id, name, "table")

            assert await store.swap([create(a.id, "t")])
            assert await versions() == (1, 0)
            # One transaction creating in both namespaces (a multi-table transaction) counts in both.
            assert await store.swap([create(b.id, "x"), create(a.id, "u"), create(a.id, "v")])
            assert await versions() == (2, 1)

            # A commit to an existing table changes no listing.
            record = await store.get_tabular(warehouse.id, "a", "t")
            assert record is not None
            assert await store.swap([PendingCommit(record.id, record.version, "file:///t2.json", "{}")])
            assert await versions() == (2, 1)

            # A lost race changes nothing either.
            assert not await store.swap([PendingCommit(record.id, record.version, "file:///t3.json", "{}")])
            assert await versions() == (2, 1)

            await store.rename_tabular(record.id, a.id, "t_renamed", "table")
            assert await versions() == (3, 1)
            await store.rename_tabular(record.id, b.id, "t_moved", "table")
            assert await versions() == (4, 2)
            assert await store.list_tabulars(b.id, "table", None, None) == (["t_moved", "x"], None)

            assert await store.drop_tabular(record.id) is not None
            assert await versions() == (4, 3)
            assert await store.drop_tabular(record.id) is None  # already gone: nothing changed
            assert await versions() == (4, 3)
        finally:
            await store.close()

    asyncio.run(run())


def test_listing_renders_as_litestar_encodes_the_response_model() -> None:
    namespace = Namespace.of(["db", 'quo"te', "ünï"])
    for names, token in ((["a", 'b"\\', "日本", "\x01"], "dG9rZW4="), ([], None), (["only"], None)):
        rendered = Listing.render(namespace, names, token)
        model = ListTablesResponse(
            identifiers=[TableIdentifier(list(namespace.levels), name) for name in names],
            next_page_token=token,
        )
        assert rendered.body == msgspec.json.encode(model)
        assert rendered.names == names
        assert msgspec.json.decode(rendered.body)["next-page-token"] == token


def test_listing_cache_serves_only_the_version_it_was_listed_at() -> None:
    cache = ListingCache(max_bytes=1000)
    page = Listing.render(Namespace.of(["db"]), ["a", "b"], None)
    key = ("w", "db", "table", "", 0)
    cache.put(key, "ns-1", 3, page)
    assert cache.get(key, "ns-1", 3) is page
    assert cache.get(key, "ns-1", 4) is None  # changed since: dropped
    assert cache.get(key, "ns-1", 3) is None
    cache.put(key, "ns-1", 0, page)
    assert cache.get(key, "ns-2", 0) is None  # the namespace was dropped and created again
    # Bounded: the least recently used pages go first.
    for i in range(100):
        cache.put(("w", "db", "table", str(i), 0), "ns-1", 0, page)
    assert len(cache) * len(page.body) <= 1000
    assert cache.get(("w", "db", "table", "99", 0), "ns-1", 0) is page
