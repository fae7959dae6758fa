"""A table's metadata files as bytes (pure): named and encoded by its `write.metadata.compression-codec`,
decoded by name, within a bound.

Iceberg's two codecs are `none` (`<version>-<uuid>.metadata.json`) and `gzip`
(`<version>-<uuid>.gz.metadata.json`); readers (the Java client, pyiceberg, DuckDB) tell them apart by
the name, and older writers' `.metadata.json.gz` is read as gzip too. gzip trades CPU for bytes: a
100-snapshot document went from 77.5 to 11.3 KiB, at 0.62 instead of 0.19 ms of CPU to write in a local
folder (`benchmarks/many_tables/metadata_codec.py`). That helps where every commit's PUT and every
reader's GET cross a slow or billed link, so it stays a table's choice, as in Iceberg.
"""

from __future__ import annotations

import gzip
import re
import zlib
from collections.abc import Mapping, Sequence
from typing import Protocol

from catalog.errors import BadRequest

METADATA_CODEC = "write.metadata.compression-codec"
DELETE_AFTER_COMMIT = "write.metadata.delete-after-commit.enabled"
PLAIN_SUFFIX = ".metadata.json"
GZIP_SUFFIX = ".gz.metadata.json"
_LEGACY_GZIP_SUFFIX = ".metadata.json.gz"
_SUFFIXES = {"none": PLAIN_SUFFIX, "gzip": GZIP_SUFFIX}
# zlib's fastest level: a metadata file is written at every commit, and the document (JSON with UUIDs
# and ids) compresses nearly as well at level 1 as at 6 in a third of the time.
GZIP_LEVEL = 1
_GZIP_ONLY = 16 + zlib.MAX_WBITS  # a gzip header and trailer, not a bare zlib stream
_NUMBERED_FILE = re.compile(r"^(\d+)-[0-9a-fA-F-]+(?:\.gz\.metadata\.json|\.metadata\.json(?:\.gz)?)$")


class _LogEntry(Protocol):
    @property
    def metadata_file(self) -> str: ...


class _Metadata(Protocol):
    """What of a table's metadata model (pyiceberg's) the deletion rule reads."""

    @property
    def location(self) -> str: ...
    @property
    def properties(self) -> Mapping[str, str]: ...
    @property
    def metadata_log(self) -> Sequence[_LogEntry]: ...


class MetadataFileTooLarge(ValueError):
    """A compressed metadata file that inflates past the bound."""


def metadata_file_suffix(properties: Mapping[str, str]) -> str:
    """The name ending of a table's next metadata file; `BadRequest` for a codec Iceberg does not know."""
    value = properties.get(METADATA_CODEC, "none")
    suffix = _SUFFIXES.get(value.strip().lower())
    if suffix is None:
        shown = value if len(value) <= 32 else value[:32] + "…"
        raise BadRequest(f"Invalid table property {METADATA_CODEC}: {shown!r} (gzip or none)")
    return suffix


def check_metadata_codec(properties: Mapping[str, str]) -> None:
    """`BadRequest` when `properties` name a metadata codec Iceberg does not know."""
    if METADATA_CODEC in properties:
        metadata_file_suffix(properties)


def metadata_folder(location: str, properties: Mapping[str, str]) -> str:
    """Where a table's or view's metadata files go: `write.metadata.path`, else `<location>/metadata`
    (without a trailing slash)."""
    return (properties.get("write.metadata.path") or f"{location.rstrip('/')}/metadata").rstrip("/")


def numbered_metadata_file_version(location: str) -> int | None:
    """The version of a metadata file named as Iceberg's writers (and floe) name them,
    `<version>-<uuid>` and any codec's ending; None for any other file (maintenance deletes by this)."""
    match = _NUMBERED_FILE.match(location.rsplit("/", 1)[-1])
    return int(match.group(1)) if match else None


def is_gzip_metadata(location: str) -> bool:
    return location.endswith(GZIP_SUFFIX) or location.endswith(_LEGACY_GZIP_SUFFIX)


def encode_metadata_file(location: str, metadata_json: str) -> bytes:
    """The bytes of the metadata file at `location` (its name says whether they are gzip)."""
    data = metadata_json.encode()
    return gzip.compress(data, compresslevel=GZIP_LEVEL, mtime=0) if is_gzip_metadata(location) else data


def decode_metadata_file(location: str, raw: bytes, max_bytes: int) -> bytes:
    """The JSON of the metadata file `raw` read from `location`, inflated when its name says gzip: at
    most `max_bytes` of it (`MetadataFileTooLarge` past that, before inflating any further; `zlib.error`
    when it is not gzip)."""
    if not is_gzip_metadata(location):
        return raw
    inflater = zlib.decompressobj(_GZIP_ONLY)
    data = inflater.decompress(raw, max_bytes + 1)
    if len(data) > max_bytes:
        raise MetadataFileTooLarge(location)
    if not inflater.eof:
        raise zlib.error("truncated gzip stream")
    return data


def obsolete_metadata_files(base: _Metadata, new: _Metadata) -> tuple[str, ...]:
    """The metadata files a commit from `base` to `new` drops from the table's log, to delete once it
    lands when `new` sets `write.metadata.delete-after-commit.enabled` (as Iceberg's Java commit does:
    the log keeps `write.metadata.previous-versions-max` files). Only files named as a writer names
    them and in the table's own metadata folder: a registered table's log may name another's files."""
    if new.properties.get(DELETE_AFTER_COMMIT, "false").strip().lower() != "true":
        return ()
    kept = {entry.metadata_file for entry in new.metadata_log}
    folder = metadata_folder(new.location, new.properties)
    return tuple(
        path
        for entry in base.metadata_log
        if (path := entry.metadata_file) not in kept
        and path.rsplit("/", 1)[0] == folder
        and numbered_metadata_file_version(path) is not None
    )
