"""Manifest entries read once per table pass.

A pass reads the same manifests several times: the table's state, the compaction's plan and commit (and
again when the commit is rebuilt after a race), the expiry's cleanup, the state after. Manifest files
are immutable, so while a pass runs (`scope`) pyiceberg's `ManifestFile.fetch_manifest_entry` answers
from what the pass already read, keyed by the manifest's path and the sequence numbers and snapshot
its entries inherit (a manifest written by a commit reads differently before and after the commit
assigns them). Outside a pass (ingestion threads of `floe up`, say) nothing changes; the cache is
dropped when the last pass ends, and a pass's own manifests (those under the locations it names, `Scope`)
when it ends, so concurrent passes (`floe maintain --parallel`) do not keep every table's entries.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from pyiceberg.io import FileIO
from pyiceberg.manifest import ManifestEntry, ManifestEntryStatus, ManifestFile

_original = ManifestFile.fetch_manifest_entry
_lock = threading.Lock()
_cache: dict[tuple[object, ...], list[ManifestEntry]] | None = None
_scopes = 0


class Scope:
    """One pass's scope: the table locations whose manifests it drops when it ends."""

    def __init__(self) -> None:
        self.locations: set[str] = set()

    def owns(self, location: str) -> None:
        self.locations.add(location.rstrip("/") + "/")


@contextlib.contextmanager
def scope() -> Iterator[Scope]:
    """Manifest entries are read once while this is open (nested and concurrent scopes share one)."""
    global _cache, _scopes
    opened = Scope()
    with _lock:
        if _scopes == 0:
            _cache = {}
        _scopes += 1
    try:
        yield opened
    finally:
        with _lock:
            _scopes -= 1
            if _scopes == 0:
                _cache = None
            elif _cache is not None and opened.locations:
                prefixes = tuple(opened.locations)
                # A copy of the keys: other passes' threads add entries meanwhile.
                for key in [k for k in list(_cache) if str(k[0]).startswith(prefixes)]:
                    _cache.pop(key, None)


def _fetch_manifest_entry(
    self: ManifestFile, io: FileIO, discard_deleted: bool = True
) -> list[ManifestEntry]:
    cache = _cache
    if cache is None:
        return _original(self, io, discard_deleted)
    # Every entry is read once; live ones are filtered from them (as pyiceberg filters).
    key = (self.manifest_path, self.sequence_number, self.min_sequence_number, self.added_snapshot_id)
    entries = cache.get(key)
    if entries is None:
        entries = _original(self, io, False)
        cache[key] = entries
    if discard_deleted:
        return [e for e in entries if e.status != ManifestEntryStatus.DELETED]
    return list(entries)


ManifestFile.fetch_manifest_entry = _fetch_manifest_entry  # type: ignore[method-assign]

__all__ = ["Scope", "scope"]
