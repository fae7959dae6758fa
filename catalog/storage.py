"""Object storage for metadata files: local paths and S3 (AWS or any S3-compatible endpoint).

All calls are blocking (pyiceberg's pyarrow FileIO); the service runs them in a worker thread.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlparse

from pyiceberg.io import FileIO, load_file_io
from pyiceberg.manifest import ManifestFile
from pyiceberg.table.metadata import TableMetadata

log = logging.getLogger(__name__)

# Warehouse settings that engines may see (endpoint, region, addressing); secrets are kept server-side.
CLIENT_VISIBLE_PROPERTIES = ("s3.endpoint", "s3.region", "client.region", "s3.path-style-access")


@dataclass(frozen=True, slots=True)
class Storage:
    """File access for one warehouse, configured from its storage properties."""

    location: str
    properties: Mapping[str, str] = field(default_factory=dict)

    def _io(self) -> FileIO:
        props = dict(self.properties)
        # pyiceberg's name for path-style addressing is the inverse of the Java client's.
        if props.get("s3.path-style-access", "").lower() == "true":
            props.setdefault("s3.force-virtual-addressing", "false")
        return load_file_io(props, self.location)

    def write(self, location: str, content: bytes) -> None:
        """Write a new file; metadata files are never overwritten."""
        with self._io().new_output(location).create(overwrite=False) as out:
            out.write(content)

    def prepare_table_location(self, location: str) -> None:
        """Create a local table's `metadata/` directory before its first commit: DuckDB writes the
        manifests of a create-and-insert transaction (CTAS) there first, and does not create it."""
        if location.startswith("file:"):
            Path(unquote(urlparse(location).path), "metadata").mkdir(parents=True, exist_ok=True)
        elif "://" not in location:
            Path(location, "metadata").mkdir(parents=True, exist_ok=True)

    def read(self, location: str) -> bytes:
        with self._io().new_input(location).open() as stream:
            return stream.read()

    def exists(self, location: str) -> bool:
        return self._io().new_input(location).exists()

    def delete(self, location: str) -> None:
        try:
            self._io().delete(location)
        except (FileNotFoundError, OSError) as exc:
            log.info("delete of %s failed: %s", location, exc)

    def delete_many(self, locations: Iterable[str]) -> int:
        io = self._io()
        deleted = 0

        def remove(path: str) -> bool:
            try:
                io.delete(path)
                return True
            except (FileNotFoundError, OSError):
                return False

        with ThreadPoolExecutor(max_workers=8) as pool:
            deleted = sum(pool.map(remove, set(locations)))
        return deleted

    def purge_table(self, metadata: TableMetadata, metadata_location: str | None) -> int:
        """Delete every file a table owns: data and delete files, manifests, manifest lists,
        statistics and all metadata files; returns how many were deleted."""
        io = self._io()
        files: set[str] = set()
        manifests: dict[str, ManifestFile] = {}
        for snapshot in metadata.snapshots:
            if snapshot.manifest_list:
                files.add(snapshot.manifest_list)
                try:
                    for manifest in snapshot.manifests(io):
                        manifests[manifest.manifest_path] = manifest
                except (FileNotFoundError, OSError) as exc:
                    log.warning("cannot read manifest list %s: %s", snapshot.manifest_list, exc)
        for path, manifest in manifests.items():
            files.add(path)
            try:
                for entry in manifest.fetch_manifest_entry(io, discard_deleted=False):
                    files.add(entry.data_file.file_path)
            except (FileNotFoundError, OSError) as exc:
                log.warning("cannot read manifest %s: %s", path, exc)
        files.update(s.statistics_path for s in metadata.statistics)
        files.update(s.statistics_path for s in metadata.partition_statistics)
        files.update(entry.metadata_file for entry in metadata.metadata_log)
        if metadata_location:
            files.add(metadata_location)
        return self.delete_many(files)


@dataclass(frozen=True, slots=True)
class StorageCredential:
    """Credentials valid for every object under `prefix` (the spec's `StorageCredential`)."""

    prefix: str
    config: dict[str, str]


def client_properties(properties: Mapping[str, str]) -> dict[str, str]:
    """The part of a warehouse's storage settings that engines need to reach the storage."""
    visible = {k: v for k, v in properties.items() if k in CLIENT_VISIBLE_PROPERTIES}
    if "s3.region" in visible:
        visible.setdefault("client.region", visible["s3.region"])
    return visible
