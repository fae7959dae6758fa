"""Orphan files: files under a table's location that no snapshot or metadata file references.

What a table references is read from its own metadata (pyiceberg): the current metadata file and its
log, statistics and partition statistics files, and for every snapshot its manifest list, each manifest
it lists and every file those manifests name (deleted entries included: keeping a file too many is
safe). The files are listed with a plain directory walk when the table is local, and through pyarrow's
file system of the table's own FileIO (its vended credentials) on S3; no Spark job either way.

Safety rules (Iceberg's `remove_orphan_files`'): only files older than a horizon are candidates (a commit
in flight writes younger ones), only under the table's location, never hidden files or folders
(`.`/`_`, such as Hadoop's `.crc` checksums, except partition folders like `_kafka_day=…`), and the
metadata is read after the listing, so a file committed meanwhile is known. Spellings of one location
(`/p`, `file:/p`, `file:///p`; `s3a://`, `s3n://`, `s3://`) compare equal, and so do paths differing only in
duplicate slashes: folding more spellings together only ever keeps more files.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

from pyiceberg.io import FileIO
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.manifest import ManifestFile, read_manifest_list
from pyiceberg.table import Table
from pyiceberg.table.metadata import TableMetadata

# Orphan paths kept in a pass record (the count is always complete).
ORPHAN_SAMPLE = 20
# Manifest lists and manifests are small files: a few read in parallel.
READERS = 4
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):(.*)$", re.DOTALL)
_SCHEME_ALIASES = {"s3a": "s3", "s3n": "s3"}
T = TypeVar("T")
R = TypeVar("R")


class CannotList(Exception):
    """The table's storage cannot be listed by floe itself (neither local nor pyarrow's S3)."""


@dataclass(frozen=True)
class ListedFile:
    location: str
    modified_ms: int


def file_key(location: str) -> str:
    """One text for every spelling of `location`: `file:/p`, `file:///p` and `/p` are `/p`; `s3a://b/k`
    is `s3://b/k`; runs of slashes in the path are one."""
    match = _SCHEME.match(location)
    if match is None:
        return re.sub("/+", "/", location)
    scheme = match.group(1).lower()
    scheme = _SCHEME_ALIASES.get(scheme, scheme)
    rest = match.group(2)
    if scheme == "file":
        if rest.startswith("//"):
            authority, _, path = rest[2:].partition("/")
            rest = "/" + path if authority in ("", "localhost") else rest
        return re.sub("/+", "/", "/" + rest.lstrip("/"))
    authority, _, path = rest.lstrip("/").partition("/")
    return f"{scheme}://{authority}/" + re.sub("/+", "/", path).lstrip("/")


def partition_names(metadata: TableMetadata) -> set[str]:
    """The field names of every partition spec of a table: the folders `is_hidden` must not skip."""
    return {field.name for spec in metadata.partition_specs for field in spec.fields}


def is_hidden(relative: str, partition_names: Iterable[str]) -> bool:
    """Whether a path below the table's location has a hidden part (`.x`, `_x`): Iceberg's own filter,
    under which a folder `_name=value` of a partition field `_name` is not hidden."""
    prefixes = tuple(f"{name}=" for name in partition_names if name.startswith("_"))
    parts = [p for p in relative.split("/") if p]
    for index, part in enumerate(parts):
        if part.startswith("."):
            return True
        if part.startswith("_"):
            is_folder = index < len(parts) - 1
            if not (is_folder and prefixes and part.startswith(prefixes)):
                return True
    return False


def orphan_candidates(
    listed: Iterable[ListedFile], location: str, older_than_ms: int, partition_names: Iterable[str]
) -> list[ListedFile]:
    """The listed files that may be orphans: under `location`, not hidden and older than the horizon."""
    root = file_key(location).rstrip("/") + "/"
    names = tuple(partition_names)
    found = []
    for listed_file in listed:
        key = file_key(listed_file.location)
        if not key.startswith(root) or listed_file.modified_ms >= older_than_ms:
            continue
        if not is_hidden(key[len(root) :], names):
            found.append(listed_file)
    return found


def orphans(candidates: Iterable[ListedFile], referenced: set[str]) -> list[ListedFile]:
    """Candidates no snapshot or metadata file references (`referenced` holds `file_key`s)."""
    return [c for c in candidates if file_key(c.location) not in referenced]


def _parallel(work: Callable[[T], R], items: Sequence[T]) -> list[R]:
    if len(items) <= 1:
        return [work(item) for item in items]
    with ThreadPoolExecutor(max_workers=READERS) as pool:
        return list(pool.map(work, items))


def referenced_files(table: Table, *, live_only: bool = False) -> set[str]:
    """The `file_key` of every file `table`'s metadata references, in every snapshot. A manifest list or
    manifest that cannot be read raises: nothing may be deleted on a partial picture. `live_only`: of
    the content files, only those live in some snapshot (a file a snapshot deleted is listed in its
    manifest as deleted, and read by none of the table's snapshots when its parent is expired)."""
    metadata = table.metadata
    io = table.io
    found: set[str] = set()
    locations = [entry.metadata_file for entry in metadata.metadata_log]
    if table.metadata_location:
        locations.append(table.metadata_location)
    locations += [s.statistics_path for s in metadata.statistics]
    locations += [s.statistics_path for s in metadata.partition_statistics]
    manifest_lists = sorted({s.manifest_list for s in metadata.snapshots if s.manifest_list})
    locations += manifest_lists

    def manifests_of(manifest_list: str) -> list[ManifestFile]:
        return list(read_manifest_list(io.new_input(manifest_list)))

    manifests: dict[str, ManifestFile] = {}
    for listed in _parallel(manifests_of, manifest_lists):
        for manifest in listed:
            manifests.setdefault(manifest.manifest_path, manifest)
    locations += list(manifests)

    def files_of(manifest: ManifestFile) -> list[str]:
        entries = manifest.fetch_manifest_entry(io, discard_deleted=live_only)
        return [e.data_file.file_path for e in entries]

    for paths in _parallel(files_of, list(manifests.values())):
        locations += paths
    found.update(file_key(location) for location in locations)
    return found


def list_files(io: FileIO, location: str) -> list[ListedFile]:
    """Every file below `location` with its modification time: a directory walk for a local table,
    pyarrow's file system of the table's FileIO (its credentials and endpoint) otherwise."""
    key = file_key(location)
    if key.startswith("/"):
        return _walk(key)
    if not isinstance(io, PyArrowFileIO):
        raise CannotList(f"cannot list {location} through {type(io).__name__}")
    from pyarrow.fs import FileSelector, FileType

    scheme, netloc, path = PyArrowFileIO.parse_location(location, io.properties)
    fs = io.fs_by_scheme(scheme, netloc)
    selector = FileSelector(path.rstrip("/"), recursive=True, allow_not_found=True)
    prefix = key.split("://", 1)[0] + "://"
    found = []
    for info in fs.get_file_info(selector):
        if info.type == FileType.File:
            modified = info.mtime_ns // 1_000_000 if info.mtime_ns is not None else 0
            found.append(ListedFile(prefix + info.path, modified))
    return found


def _walk(folder: str) -> list[ListedFile]:
    found = []
    for directory, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(directory, name)
            with contextlib.suppress(FileNotFoundError):  # deleted while listing
                stat = os.lstat(path)
                found.append(ListedFile("file://" + path, stat.st_mtime_ns // 1_000_000))
    return found


def delete_files(io: FileIO, locations: Iterable[str]) -> int:
    """Delete `locations` (local files directly, with their Hadoop `.crc` checksum; others through the
    table's FileIO); files already gone count as deleted."""
    deleted = 0
    for location in locations:
        key = file_key(location)
        if key.startswith("/"):
            folder, name = os.path.split(key)
            with contextlib.suppress(FileNotFoundError):
                os.remove(key)
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(folder, f".{name}.crc"))
        else:
            with contextlib.suppress(FileNotFoundError):
                io.delete(location)
        deleted += 1
    return deleted


__all__ = [
    "ORPHAN_SAMPLE",
    "CannotList",
    "ListedFile",
    "delete_files",
    "file_key",
    "is_hidden",
    "list_files",
    "orphan_candidates",
    "orphans",
    "partition_names",
    "referenced_files",
]
