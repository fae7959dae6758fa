"""Storage locations: one canonical form, and confinement of every path to a tenant's folder.

A location that a client sends (a table's `location`, `write.metadata.path`, a manifest list, a
metadata file to register) is turned into one canonical text before anything is decided about it:
scheme aliases folded (`s3a://`, `s3n://` → `s3://`; `/p`, `file:/p`, `file://localhost/p` →
`file:///p`), duplicate slashes and `.` removed, `..` resolved (never above the root). What engines
would read in different ways is refused outright rather than guessed at: relative paths, percent-escapes
(Java's Hadoop paths decode them, pyiceberg's FileIO does not), backslashes, control characters, query
strings, and every scheme floe cannot store to (a `gs://` register used to hold a worker for minutes).

A canonical location is inside a folder when it is the folder or starts with the folder and `/`, so
`…/clustera` never contains `…/clusterab`. Every location floe writes, reads, deletes or vends
credentials for goes through `confine` against the caller's root (`tenant_root`): a cluster key's is its
cluster's folder in the warehouse, a global administrator's is the whole warehouse.

Pure functions, no I/O.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import uuid
from collections.abc import Iterator, Mapping, Sequence
from operator import attrgetter
from typing import TypeVar

from pyiceberg.table.metadata import TableMetadata
from pyiceberg.view.metadata import ViewMetadata

from catalog.errors import BadRequest, CatalogError, Forbidden

M = TypeVar("M", TableMetadata, ViewMetadata)

# Schemes floe's storage layer reads and writes; aliases are folded into the first form.
SCHEME_ALIASES = {"s3a": "s3", "s3n": "s3"}
SUPPORTED_SCHEMES = frozenset({"s3", "file"})
MAX_LOCATION_LENGTH = 2048

# Table properties that move where engines (and floe, for metadata) write a table's files.
PATH_PROPERTIES = (
    "write.metadata.path",
    "write.data.path",
    "write.folder-storage.path",
    "write.object-storage.path",
)

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):(.*)$", re.DOTALL)
# S3 and S3-compatible bucket names (lenient on case and `_` for older buckets; never `@` or `:`).
_BUCKET = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-]{0,254}$")
_UNSAFE_SEGMENT_CHARS = re.compile(r"[^A-Za-z0-9_.\-]")
_MAX_SEGMENT = 100


# Checked for every location of every commit: one regex search, not a Python loop per character.
_CONTROL_CHARACTER = re.compile("[\x00-\x1f\x7f]")


def normalize_location(location: object, what: str = "location") -> str:
    """The canonical form of a storage location, or `BadRequest` saying what is wrong with it."""
    if not isinstance(location, str) or not location.strip():
        raise BadRequest(f"Invalid {what}: expected a non-empty storage location")
    if len(location) > MAX_LOCATION_LENGTH:
        raise BadRequest(f"Invalid {what}: longer than {MAX_LOCATION_LENGTH} characters")
    if _CONTROL_CHARACTER.search(location):
        raise BadRequest(f"Invalid {what}: control characters are not allowed in a location")
    if "\\" in location:
        raise BadRequest(f"Invalid {what}: backslashes are not allowed in a location")
    if "%" in location:
        raise BadRequest(
            f"Invalid {what}: percent-escapes are not allowed in a location (engines decode them differently)"
        )
    if "?" in location or "#" in location:
        raise BadRequest(f"Invalid {what}: a location has no query or fragment")
    match = _SCHEME.match(location)
    if match is None:
        if not location.startswith("/"):
            raise BadRequest(f"Invalid {what}: {location!r} is a relative path; use an absolute location")
        scheme, authority, path = "file", "", location
    else:
        raw_scheme = match.group(1).lower()
        scheme = SCHEME_ALIASES.get(raw_scheme, raw_scheme)
        if scheme not in SUPPORTED_SCHEMES:
            raise BadRequest(
                f"Invalid {what}: unsupported storage scheme {raw_scheme!r} "
                "(floe stores tables on s3://, s3a:// or local file paths)"
            )
        rest = match.group(2)
        if rest.startswith("//"):
            authority, slash, tail = rest[2:].partition("/")
            path = slash + tail
        else:
            authority, path = "", rest
    if scheme == "file":
        if authority not in ("", "localhost"):
            raise BadRequest(f"Invalid {what}: a file location names no host")
        if not path.startswith("/"):
            raise BadRequest(f"Invalid {what}: {location!r} is a relative path; use an absolute location")
    elif not _BUCKET.fullmatch(authority):
        raise BadRequest(f"Invalid {what}: {location!r} does not name a bucket (s3://bucket/path)")
    segments: list[str] = []
    for segment in path.split("/"):
        if segment in ("", "."):
            continue
        if segment == "..":
            if not segments:
                raise BadRequest(f"Invalid {what}: {location!r} climbs above its root")
            segments.pop()
            continue
        segments.append(segment)
    if scheme == "file":
        return "file:///" + "/".join(segments)
    return f"s3://{authority}" + "".join("/" + s for s in segments)


def is_within(location: str, root: str) -> bool:
    """Whether canonical `location` is canonical `root` or below it."""
    root = root.rstrip("/")
    if root in ("file://", "s3:"):  # a whole file system (never a tenant's root, but well defined)
        return location.startswith(root)
    return location == root or location.startswith(root + "/")


def path_of(location: str) -> str:
    """Canonical `location` without its scheme (`/tmp/t`, `bucket/t`): the part every spelling of it
    (`file:/tmp/t`, `s3a://bucket/t`) contains."""
    return location.split("://", 1)[1] if location.startswith("s3://") else location[len("file://") :]


def confine(location: object, root: str, what: str = "location") -> str:
    """`location` in canonical form, or `Forbidden` when it lies outside canonical `root`."""
    canonical = normalize_location(location, what)
    if not is_within(canonical, root):
        raise Forbidden(f"Invalid {what}: {canonical} is outside {root}, the folder this key may use")
    return canonical


def stored_form(location: str, canonical: str) -> str:
    """What floe keeps for a location it has confined: the client's own spelling when it names the
    canonical location with plain segments (`file:/p`, `s3a://b/p` — engines such as Java's compare the
    location they sent with the one they get back), else the canonical form. Every check and every
    file access normalizes again, so the spelling never decides anything."""
    text = location.rstrip("/")
    match = _SCHEME.match(text)
    rest = match.group(2) if match is not None else text
    if rest.startswith("//"):
        rest = "/" + rest[2:].partition("/")[2]
    segments = rest.split("/")[1:]
    if rest.startswith("/") and all(segment not in ("", ".", "..") for segment in segments):
        return text
    return canonical


def confine_stored(location: str, root: str, what: str = "location") -> str:
    """`confine`, answering the form floe stores (`stored_form`)."""
    return stored_form(location, confine(location, root, what))


def path_segment(name: str) -> str:
    """A storage-safe folder name for a namespace level or table name.

    A name that is already safe (letters, digits, `_`, `.`, `-`, at most 100 characters, as cluster
    names are) is its own folder; any other gets a hash of the exact name appended, so two names that
    clean up alike (`a b`, `a_b`) never share a folder — a cluster's folder is its confinement root."""
    cleaned = _UNSAFE_SEGMENT_CHARS.sub("_", name).strip(".")
    if cleaned == name and cleaned and len(cleaned) <= _MAX_SEGMENT:
        return cleaned
    digest = hashlib.sha256(name.encode()).hexdigest()[:10]
    return f"{(cleaned or '_')[: _MAX_SEGMENT - 11]}-{digest}"


def namespace_root(warehouse_location: str, top_level: str) -> str:
    """The folder of a top-level namespace (a cluster's namespace) in its warehouse."""
    return f"{normalize_location(warehouse_location, 'warehouse location')}/{path_segment(top_level)}"


def tenant_root(warehouse_location: str, cluster: str | None) -> str:
    """Where a caller may place files: its cluster's folder, or the whole warehouse for a global
    administrator (`cluster` None)."""
    if cluster is None:
        return normalize_location(warehouse_location, "warehouse location")
    return namespace_root(warehouse_location, cluster)


# The namespace property engines read as the folder of the namespace's tables (Hive's convention).
NAMESPACE_LOCATION = "location"
# Hex digits of the id that ends a default table location (`<name>-<id>`).
_DEFAULT_SUFFIX_LENGTH = 12


def namespace_location(warehouse_location: str, levels: Sequence[str], properties: Mapping[str, str]) -> str:
    """Where a namespace's tables go by default: its `location` property when one was set (confined
    when it was), else its folder in the warehouse, `<warehouse>/<ns>/<…>`."""
    explicit = properties.get(NAMESPACE_LOCATION)
    if explicit:
        return explicit.rstrip("/")
    folders = "/".join(path_segment(level) for level in levels)
    return f"{normalize_location(warehouse_location, 'warehouse location')}/{folders}"


def default_table_location(namespace_folder: str, name: str) -> str:
    """`<namespace location>/<name>-<id>`: the id keeps a re-created table's files apart."""
    return f"{namespace_folder}/{path_segment(name)}-{uuid.uuid4().hex[:_DEFAULT_SUFFIX_LENGTH]}"


def is_default_table_location(namespace_folder: str, name: str, location: str) -> bool:
    """Whether `location` has the shape `default_table_location` gives `name` (a client that staged a
    create sends back the location floe assigned it)."""
    default = default_table_location(namespace_folder, name)
    shape = re.escape(default[:-_DEFAULT_SUFFIX_LENGTH]) + f"[0-9a-f]{{{_DEFAULT_SUFFIX_LENGTH}}}"
    try:
        return re.fullmatch(shape, normalize_location(location)) is not None
    except CatalogError:
        return False


def path_properties(properties: Mapping[str, str]) -> Iterator[tuple[str, str]]:
    """The (property, value) pairs of `properties` that place a table's or view's files."""
    for name in PATH_PROPERTIES:
        value = properties.get(name)
        if value:
            yield name, value


def confine_properties(properties: Mapping[str, str], root: str) -> dict[str, str]:
    """`properties` with every path property in canonical form, each checked against `root`."""
    confined = dict(properties)
    for name, value in path_properties(properties):
        confined[name] = confine_stored(value, root, name)
    return confined


def confine_metadata(metadata: M, root: str) -> M:
    """A table's or view's metadata with its location and path properties in canonical form, each
    inside `root` (`Forbidden` otherwise)."""
    location = confine_stored(metadata.location, root, "location")
    properties = confine_properties(metadata.properties, root)
    if location == metadata.location and properties == metadata.properties:
        return metadata
    return metadata.model_copy(update={"location": location, "properties": properties})


def confine_table_location(
    location: str, root: str, namespace_folder: str | None = None, what: str = "location"
) -> str:
    """`confine_stored` for a table's own location, which must lie strictly below `root` (and below
    `namespace_folder`, its namespace's folder, when that is given and inside `root`): a table at the
    cluster's (or warehouse's, or namespace's) folder itself would own every other table's files there,
    and the storage credentials vended for it would reach them."""
    stored = confine_stored(location, root, what)
    canonical = normalize_location(stored, what)
    folders = {normalize_location(root, "root")}
    if namespace_folder:
        # A namespace location stored before floe checked them: no folder to guard.
        with contextlib.suppress(BadRequest):
            folders.add(normalize_location(namespace_folder, "namespace location"))
    if canonical in folders:
        raise BadRequest(
            f"Invalid {what}: {canonical} is a cluster or namespace folder; a table's location must be a "
            "folder of its own below it"
        )
    return stored


def confine_table_metadata(metadata: TableMetadata, base: TableMetadata | None, root: str) -> TableMetadata:
    """`confine_metadata`, and every file a commit adds to the metadata (manifest lists of new
    snapshots, statistics files) inside `root` too: floe reads and deletes them on purge, and hands
    them to every reader of the table."""
    # A commit adds a snapshot or two to a table that lists a hundred: the sets are built in C.
    by_id = attrgetter("snapshot_id")
    known_snapshots = set(map(by_id, base.snapshots)) if base is not None else set()
    added = set(map(by_id, metadata.snapshots)) - known_snapshots
    for snapshot in reversed(metadata.snapshots):  # the added ones are the last, usually
        if not added:
            break
        if snapshot.snapshot_id in added:
            added.discard(snapshot.snapshot_id)
            if snapshot.manifest_list:
                confine(snapshot.manifest_list, root, "manifest list")
    known_files: set[str] = set()
    if base is not None:
        known_files = {s.statistics_path for s in [*base.statistics, *base.partition_statistics]}
    for statistics in [*metadata.statistics, *metadata.partition_statistics]:
        if statistics.statistics_path not in known_files:
            confine(statistics.statistics_path, root, "statistics file")
    if base is None or metadata.location != base.location:
        confine_table_location(metadata.location, root)
    return confine_metadata(metadata, root)


__all__ = [
    "PATH_PROPERTIES",
    "confine",
    "confine_metadata",
    "confine_properties",
    "confine_stored",
    "confine_table_location",
    "confine_table_metadata",
    "is_within",
    "namespace_root",
    "normalize_location",
    "path_of",
    "path_properties",
    "path_segment",
    "stored_form",
    "tenant_root",
]
