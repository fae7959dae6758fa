"""The loadTable response cache: an entry serves only the metadata version and warehouse settings it
was rendered for, never holds a caller's vended credentials, and stays within its byte budget."""

from __future__ import annotations

from catalog.service.load_cache import LoadCache
from catalog.service.table_model import LoadedTable
from catalog.storage import StorageCredential

KEY = ("warehouse", "ns", "t", "all", "client")
SETTINGS = {"s3.endpoint": "http://127.0.0.1:9000"}


def loaded(location: str, size: int = 10) -> LoadedTable:
    return LoadedTable(location, '{"x":"' + "y" * size + '"}', {}, f'"{location}"')


def test_an_entry_serves_its_own_version_and_settings_only() -> None:
    cache = LoadCache()
    cache.put(KEY, loaded("v1"), SETTINGS)
    hit = cache.get(KEY, "v1", SETTINGS)
    assert hit is not None
    assert hit.to_json() == loaded("v1").to_json()
    assert cache.get(KEY, "v1", {**SETTINGS, "s3.endpoint": "http://elsewhere"}) is None
    assert not cache.has(KEY)  # a stale entry is dropped
    cache.put(KEY, loaded("v1"), SETTINGS)
    assert cache.get(KEY, "v2", SETTINGS) is None
    assert cache.get(("warehouse", "ns", "t", "refs", "client"), "v1", SETTINGS) is None
    assert cache.get(("warehouse", "ns", "t", "all", "internal"), "v1", SETTINGS) is None


def test_vended_credentials_are_never_cached() -> None:
    cache = LoadCache()
    secret = StorageCredential("s3://bucket/t", {"s3.secret-access-key": "secret"})
    cache.put(KEY, loaded("v1").with_credentials(secret), SETTINGS)
    assert not cache.has(KEY)
    cache.put(KEY, loaded("v1"), SETTINGS)
    hit = cache.get(KEY, "v1", SETTINGS)
    assert hit is not None
    # Credentials added to a cached response make a new one; the cached bytes stay without them.
    assert b"secret" in hit.with_credentials(secret).to_json()
    again = cache.get(KEY, "v1", SETTINGS)
    assert again is not None
    assert b"secret" not in again.to_json()


def test_least_recently_used_entries_go_first() -> None:
    size = len(loaded("v", 1000).to_json())
    cache = LoadCache(max_bytes=size * 2)
    for name in ("a", "b"):
        cache.put(("w", "ns", name, "all", "client"), loaded("v", 1000), SETTINGS)
    assert cache.get(("w", "ns", "a", "all", "client"), "v", SETTINGS) is not None  # `b` is now the oldest
    cache.put(("w", "ns", "c", "all", "client"), loaded("v", 1000), SETTINGS)
    assert len(cache) == 2
    assert cache.has(("w", "ns", "a", "all", "client"))
    assert cache.has(("w", "ns", "c", "all", "client"))
    assert not cache.has(("w", "ns", "b", "all", "client"))
