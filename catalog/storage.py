"""Object storage for metadata files: local paths and S3 (AWS or any S3-compatible endpoint).

Every path is confined: a `Storage` refuses to touch anything outside its `root` (the warehouse, or
the caller's cluster folder in it), whatever the caller computed. Calls are blocking (pyiceberg's
pyarrow FileIO) with network timeouts on S3; the service runs them through `StorageRunner`, a bounded
pool that one tenant cannot exhaust, with an overall deadline per call.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

import anyio
import anyio.to_thread
from pyarrow.fs import FileSelector, FileType
from pyiceberg.io import FileIO, load_file_io
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.manifest import ManifestFile
from pyiceberg.table.metadata import TableMetadata

from catalog.cell_text import cell_text
from catalog.errors import BadRequest, CatalogError, Forbidden, ServiceUnavailable
from catalog.locations import is_within, normalize_location, path_of
from catalog.metadata_files import MetadataFileTooLarge, decode_metadata_file
from catalog.s3_files import IO_IMPL as S3_IO_IMPL
from catalog.urls import strip_userinfo

log = logging.getLogger(__name__)
T = TypeVar("T")

# Network timeouts of every S3 call (seconds), unless the warehouse's settings say otherwise.
S3_CONNECT_TIMEOUT_SECONDS = "10"
S3_REQUEST_TIMEOUT_SECONDS = "30"

# Warehouse settings that engines may see (endpoint, region, addressing); secrets are kept server-side.
CLIENT_VISIBLE_PROPERTIES = ("s3.endpoint", "s3.region", "client.region", "s3.path-style-access")
# The S3 endpoint engines are told, where they reach the storage at another address than the catalog
# does (`s3.endpoint`, the catalog's own): MinIO is `minio:9000` inside a compose network but
# `localhost:9000` on the host. A floe setting, not a FileIO property (pyiceberg ignores it).
CLIENT_ENDPOINT_PROPERTY = "s3.client-endpoint"
# The request header with which an engine on the catalog's own network (compose's ingest and maintain)
# asks for the catalog's endpoint instead of the client endpoint.
STORAGE_ENDPOINT_HEADER = "X-Floe-Storage-Endpoint"
StorageEndpoint = Literal["client", "internal"]
STORAGE_ENDPOINTS: tuple[StorageEndpoint, ...] = ("client", "internal")
# Metadata files written on the event loop rather than in a worker thread, when on a local disk and
# together at most this large (a page-cache write of this size takes tens of microseconds).
INLINE_WRITE_MAX_BYTES = 64 * 1024


class MetadataFileError(BadRequest):
    """A file to register could not be read as metadata; says nothing of what the file holds, or of
    whether it exists (a missing file and a directory answer alike)."""


def _create_local_file(path: Path, content: bytes) -> None:
    """Create `path` (and its folders) with `content`; `FileExistsError` when it exists. An exclusive
    create: pyiceberg's local `create(overwrite=False)` checks, then opens (a race, and a third of a
    small metadata file's write in its file-info and stream calls)."""
    try:
        stream = path.open("xb")
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        stream = path.open("xb")
    with stream:
        stream.write(content)


@functools.lru_cache(maxsize=64)
def _file_io(location: str, properties: tuple[tuple[str, str], ...]) -> FileIO:
    """The FileIO of a warehouse's settings, made once: making one per call cost a new file system
    each time (a new S3 client on S3), ~40 us on a local disk, a third of a metadata file's write. On an
    object store, the FileIO that writes a file with one PUT, unless the warehouse names its own."""
    settings = dict(properties)
    if not normalize_location(location).startswith("file:///"):
        settings.setdefault("py-io-impl", S3_IO_IMPL)
    return load_file_io(settings, location)


@dataclass(frozen=True, slots=True)
class Storage:
    """File access for one warehouse, confined to `root` (canonical; the warehouse when empty)."""

    location: str
    properties: Mapping[str, str] = field(default_factory=dict)
    root: str = ""

    def _io(self) -> FileIO:
        props = dict(self.properties)
        # pyiceberg's name for path-style addressing is the inverse of the Java client's.
        if props.get("s3.path-style-access", "").lower() == "true":
            props.setdefault("s3.force-virtual-addressing", "false")
        props.setdefault("s3.connect-timeout", S3_CONNECT_TIMEOUT_SECONDS)
        props.setdefault("s3.request-timeout", S3_REQUEST_TIMEOUT_SECONDS)
        return _file_io(self.location, tuple(sorted(props.items())))

    def _root(self) -> str:
        return self.root or normalize_location(self.location, "warehouse location")

    def confined(self, location: str) -> str:
        """`location` in canonical form; `Forbidden` outside this storage's root (a second line of
        defence: the service confines every location before it gets here)."""
        canonical = normalize_location(location)
        if not is_within(canonical, self._root()):
            raise Forbidden(f"Location {canonical} is outside {self._root()}")
        return canonical

    @property
    def is_local(self) -> bool:
        """Whether this storage is a local file system (every location it touches is under its root)."""
        return self._root().startswith("file:///")

    def write(self, location: str, content: bytes) -> None:
        """Write a new file. A local one is created exclusively (`FileExistsError`); on an object store
        the name's UUID is what makes it new (every metadata file's name has one): checking first cost two
        requests (a HEAD, and the LIST pyarrow adds on a miss) besides the write, and is a race anyway."""
        canonical = self.confined(location)
        if canonical.startswith("file:///"):
            _create_local_file(Path(path_of(canonical)), content)
            return
        with self._io().new_output(canonical).create(overwrite=True) as out:
            out.write(content)

    def write_many(self, files: Iterable[tuple[str, bytes]]) -> None:
        """Write new files (location, content), one after the other: a transaction's metadata files in
        one storage call rather than a worker-thread hand-off each."""
        for location, content in files:
            self.write(location, content)

    def prepare_table_location(self, location: str) -> None:
        """Create a local table's `metadata/` directory before its first commit: DuckDB writes the
        manifests of a create-and-insert transaction (CTAS) there first, and does not create it."""
        canonical = self.confined(location)
        if canonical.startswith("file:///"):
            Path(path_of(canonical), "metadata").mkdir(parents=True, exist_ok=True)

    def read(self, location: str) -> bytes:
        with self._io().new_input(self.confined(location)).open() as stream:
            return stream.read()

    def read_metadata_file(self, location: str, max_bytes: int) -> bytes:
        """A metadata file's JSON (inflated when its name says gzip), at most `max_bytes` read and at most
        `max_bytes` inflated; every failure is one `MetadataFileError`."""
        canonical = self.confined(location)
        too_large = f"Cannot register {canonical}: larger than {max_bytes} bytes"
        try:
            source = self._io().new_input(canonical)
            if len(source) > max_bytes:
                raise MetadataFileError(too_large)
            with source.open() as stream:
                raw = stream.read(max_bytes)
            return decode_metadata_file(canonical, raw, max_bytes)
        except MetadataFileTooLarge:
            raise MetadataFileError(too_large) from None
        except MetadataFileError:
            raise
        except Exception as exc:
            log.info("register: cannot read %s: %s", canonical, type(exc).__name__)
            raise MetadataFileError(f"Cannot register {canonical}: not a readable metadata file") from None

    def exists(self, location: str) -> bool:
        return self._io().new_input(self.confined(location)).exists()

    def delete(self, location: str) -> None:
        try:
            self._io().delete(self.confined(location))
        except (FileNotFoundError, OSError) as exc:
            log.info("delete of %s failed: %s", location, exc)

    def delete_many(self, locations: Iterable[str]) -> int:
        """Delete files (those outside the root are skipped); returns how many were deleted."""
        io = self._io()
        root = self._root()
        targets: set[str] = set()
        for location in locations:
            try:
                canonical = normalize_location(location)
            except BadRequest:
                log.warning("not deleting %r: not a valid location", location)
                continue
            if is_within(canonical, root):
                targets.add(canonical)
            else:
                log.warning("not deleting %s: outside %s", canonical, root)

        def remove(path: str) -> bool:
            try:
                io.delete(path)
                return True
            except (FileNotFoundError, OSError):
                return False

        if self.is_local or len(targets) < 2:  # an unlink is microseconds: eight threads cost more
            return sum(map(remove, targets))
        with ThreadPoolExecutor(max_workers=8) as pool:
            return sum(pool.map(remove, targets))

    def purge_table(
        self, metadata: TableMetadata, metadata_location: str | None, owned: Iterable[str]
    ) -> int:
        """Delete the files a table owns: data and delete files, manifests, manifest lists, statistics
        and metadata files, but only those under one of the `owned` folders (canonical: the table's
        location and its data/metadata paths, each inside its cluster's folder). Files outside them
        are neither read nor deleted, whatever the metadata says; a file that cannot be read is
        logged and skipped. Returns how many files were deleted."""
        io = self._io()
        folders = [f for f in owned if is_within(f, self._root())]
        if not folders:
            log.warning(
                "purge of %s deletes nothing: its location is outside %s", metadata.location, self._root()
            )
            return 0

        def owned_file(path: str | None) -> str | None:
            if not path:
                return None
            try:
                canonical = normalize_location(path)
            except BadRequest:
                return None
            return canonical if any(is_within(canonical, f) for f in folders) else None

        files: set[str] = set()
        manifests: dict[str, ManifestFile] = {}
        for snapshot in metadata.snapshots:
            manifest_list = owned_file(snapshot.manifest_list)
            if manifest_list is None:
                continue
            files.add(manifest_list)
            try:
                for manifest in snapshot.manifests(io):
                    manifests[manifest.manifest_path] = manifest
            except Exception as exc:
                log.warning("purge: cannot read manifest list %s: %s", manifest_list, type(exc).__name__)
        for path, manifest in manifests.items():
            manifest_path = owned_file(path)
            if manifest_path is None:
                continue
            files.add(manifest_path)
            try:
                for entry in manifest.fetch_manifest_entry(io, discard_deleted=False):
                    data_file = owned_file(entry.data_file.file_path)
                    if data_file is not None:
                        files.add(data_file)
            except Exception as exc:
                log.warning("purge: cannot read manifest %s: %s", manifest_path, type(exc).__name__)
        candidates = [s.statistics_path for s in metadata.statistics]
        candidates += [s.statistics_path for s in metadata.partition_statistics]
        candidates += [entry.metadata_file for entry in metadata.metadata_log]
        candidates.append(metadata_location or "")
        files.update(f for f in map(owned_file, candidates) if f is not None)
        return self.delete_many(files)

    def purge_folder(self, location: str) -> int:
        """Delete every file in the folder `location` (canonical, inside this storage's root), as
        storage lists them, and on local disks the folders left empty. Returns how many files were
        deleted."""
        folder = self.confined(location)
        io = self._io()
        if not isinstance(io, PyArrowFileIO):
            log.warning("purge of %s lists no folder: FileIO %s cannot list", folder, type(io).__name__)
            return 0
        scheme, netloc, path = io.parse_location(folder, io.properties)
        fs = io.fs_by_scheme(scheme, netloc)
        listed = fs.get_file_info(FileSelector(path, recursive=True, allow_not_found=True))
        prefix = "file://" if scheme == "file" else f"{scheme}://"
        files = [prefix + info.path for info in listed if info.type == FileType.File]
        deleted = self.delete_many(files)
        if scheme == "file":
            # Deepest first; a folder something new appeared in since the listing stays.
            folders = sorted((info.path for info in listed if info.type == FileType.Directory), reverse=True)
            for directory in [*folders, path]:
                with contextlib.suppress(OSError):
                    Path(directory).rmdir()
        return deleted


@dataclass(frozen=True, slots=True)
class TableSample:
    """A table's live data files (sizes) and its newest rows, read from its current snapshot.

    `rows` is None when no rows were read: the table has delete files (rows read without applying them
    could be deleted ones) or no snapshot. `skipped` counts manifests and data files outside the table's
    folder, which are neither read nor counted."""

    file_sizes: list[int]
    delete_files: int
    rows: list[dict[str, Any]] | None
    columns: list[str]
    skipped: int = 0


def _cell(value: Any, max_chars: int) -> str:
    return cell_text(value, max_chars)


def sample_table(
    storage: Storage,
    metadata: TableMetadata,
    owned: str,
    limit: int,
    max_cell_chars: int = 300,
    offset: int = 0,
    newest_first: bool = False,
) -> TableSample:
    """The current snapshot's data file sizes and up to `limit` of its newest rows (newest data files
    first) after the first `offset` of them (a file wholly before it is not read), reading only
    manifests and files inside canonical `owned` (the table's cluster folder). `newest_first` also
    reverses each file's rows (appended in arrival order), reading a file up to the rows shown."""
    from pyiceberg.expressions import AlwaysTrue
    from pyiceberg.io.pyarrow import ArrowScan
    from pyiceberg.manifest import DataFileContent
    from pyiceberg.table import FileScanTask

    snapshot = metadata.current_snapshot()
    if snapshot is None:
        return TableSample([], 0, None, [])
    io = storage._io()

    def inside(path: str | None) -> bool:
        if not path:
            return False
        try:
            return is_within(normalize_location(path), owned)
        except BadRequest:
            return False

    if not inside(snapshot.manifest_list):
        return TableSample([], 0, None, [], skipped=1)
    sizes: list[int] = []
    data_files: list[tuple[int, Any]] = []
    delete_files = skipped = 0
    for manifest in snapshot.manifests(io):
        if not inside(manifest.manifest_path):
            skipped += 1
            continue
        for entry in manifest.fetch_manifest_entry(io, discard_deleted=True):
            data_file = entry.data_file
            if data_file.content != DataFileContent.DATA:
                delete_files += 1
            elif not inside(data_file.file_path):
                skipped += 1
            else:
                sizes.append(data_file.file_size_in_bytes)
                data_files.append((entry.sequence_number or 0, data_file))
    schema = metadata.schema()
    columns = [f.name for f in schema.fields]
    if delete_files or limit <= 0:
        return TableSample(sizes, delete_files, None, columns, skipped)
    data_files.sort(key=lambda item: item[0], reverse=True)
    rows: list[dict[str, Any]] = []
    skip = max(0, offset)
    for _, data_file in data_files:
        if len(rows) >= limit:
            break
        if skip >= data_file.record_count:
            skip -= data_file.record_count
            continue
        take = limit - len(rows)
        if newest_first:  # rows [n - skip - take, n - skip) of the file, last first
            end = data_file.record_count - skip
            scan = ArrowScan(metadata, io, schema, AlwaysTrue(), True, end)
            table = scan.to_table([FileScanTask(data_file)])
            start = max(0, min(end, table.num_rows) - take)
            read = list(reversed(table.slice(start, min(end, table.num_rows) - start).to_pylist()))
        else:
            scan = ArrowScan(metadata, io, schema, AlwaysTrue(), True, skip + take)
            read = scan.to_table([FileScanTask(data_file)]).slice(skip, take).to_pylist()
        rows.extend({name: _cell(row.get(name), max_cell_chars) for name in columns} for row in read)
        skip = 0
    return TableSample(sizes, delete_files, rows, columns, skipped)


class StorageRunner:
    """Runs blocking storage calls in worker threads: at most `total` at once, at most `per_tenant`
    for one tenant (a cluster, or an administrator), each with an overall deadline.

    A tenant's slot is given back only when its thread really ends, so calls that outlived their
    deadline still count against their tenant: a tenant whose storage hangs blocks only itself.
    """

    def __init__(self, total: int, per_tenant: int, timeout_seconds: float) -> None:
        self.total = total
        self.per_tenant = per_tenant
        self.timeout_seconds = timeout_seconds
        self._limiter: anyio.CapacityLimiter | None = None
        self._running: dict[str, int] = {}
        self._waiters: dict[str, deque[asyncio.Future[None]]] = {}

    def _release(self, tenant: str) -> None:
        self._running[tenant] -= 1
        if not self._running[tenant]:
            del self._running[tenant]
        self._wake(tenant)

    def _wake(self, tenant: str) -> None:
        waiters = self._waiters.get(tenant)
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._waiters.pop(tenant, None)

    async def _acquire(self, tenant: str) -> None:
        while self._running.get(tenant, 0) >= self.per_tenant:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.setdefault(tenant, deque()).append(waiter)
            try:
                await waiter
            except BaseException:
                if waiter.done() and not waiter.cancelled():
                    self._wake(tenant)  # woken, then cancelled: pass the free slot on
                raise
        self._running[tenant] = self._running.get(tenant, 0) + 1

    async def run(self, tenant: str, func: Callable[..., T], *args: Any) -> T:
        """`func(*args)` in a worker thread; `ServiceUnavailable` (503) past the deadline."""
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self.total)
        loop = asyncio.get_running_loop()
        # Who gives the tenant's slot back: the thread once it has started `func`, else the caller that
        # gave up waiting for it; decided under a lock, so the slot is given back exactly once and an
        # abandoned call never starts late.
        handover = threading.Lock()
        started = abandoned = False

        def call() -> T | None:
            nonlocal started
            with handover:
                if abandoned:
                    return None
                started = True
            try:
                return func(*args)
            finally:
                # The loop may be gone (shutdown): then nobody is waiting any more.
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(self._release, tenant)

        with _answered_failures(tenant):
            try:
                with anyio.fail_after(self.timeout_seconds):
                    await self._acquire(tenant)
                    try:
                        result = await anyio.to_thread.run_sync(
                            call, limiter=self._limiter, abandon_on_cancel=True
                        )
                    finally:
                        with handover:
                            release_here = not started
                            abandoned = True
                        if release_here:
                            self._release(tenant)
                    return cast(T, result)
            except TimeoutError:
                raise ServiceUnavailable(
                    f"Storage did not answer within {self.timeout_seconds:g} s; try again later"
                ) from None

    async def write_many(self, tenant: str, storage: Storage, files: list[tuple[str, bytes]]) -> None:
        """Write new files (a commit's metadata files). Small ones on a local disk are written right
        here: a worker thread's hand-off cost ~200 us of CPU on this project's 2-core benchmark machine,
        several times the write itself, and a commit makes one. Anything else runs in a worker thread.
        The price: a local disk that hangs stalls the event loop on these writes (a local warehouse's
        tenants all share that disk anyway)."""
        if storage.is_local and sum(len(content) for _, content in files) <= INLINE_WRITE_MAX_BYTES:
            with _answered_failures(tenant):
                storage.write_many(files)
            return
        await self.run(tenant, storage.write_many, files)


@contextlib.contextmanager
def _answered_failures(tenant: str) -> Iterator[None]:
    """Storage failures (missing bucket, refused connection, a full disk) as a 503: they are the
    storage's state, not a server fault. Their text names server paths (pyarrow's strerror too):
    logged, not answered."""
    try:
        yield
    except CatalogError:
        raise
    except (OSError, ValueError) as exc:
        log.warning("storage request of %s failed: %s: %s", tenant, type(exc).__name__, exc)
        raise ServiceUnavailable(f"Storage request failed: {type(exc).__name__}") from exc


@dataclass(frozen=True, slots=True)
class StorageCredential:
    """Credentials valid for every object under `prefix` (the spec's `StorageCredential`)."""

    prefix: str
    config: dict[str, str]


def parse_storage_endpoint(header: str | None) -> StorageEndpoint:
    """The endpoint an `X-Floe-Storage-Endpoint` header asks for (`client` when absent); BadRequest
    for any other value."""
    value = (header or "client").strip().lower()
    for choice in STORAGE_ENDPOINTS:
        if value == choice:
            return choice
    raise BadRequest(f"{STORAGE_ENDPOINT_HEADER} must be 'client' or 'internal', not {header!r}")


def endpoint_for(properties: Mapping[str, str], choice: StorageEndpoint = "client") -> str | None:
    """The S3 endpoint an engine is told: the client endpoint when the warehouse has one and the engine
    did not ask for the catalog's own (`internal`), else `s3.endpoint` (None: the provider's default)."""
    if choice == "client" and properties.get(CLIENT_ENDPOINT_PROPERTY):
        return properties[CLIENT_ENDPOINT_PROPERTY]
    return properties.get("s3.endpoint") or None


def client_properties(properties: Mapping[str, str], choice: StorageEndpoint = "client") -> dict[str, str]:
    """The part of a warehouse's storage settings that engines need to reach the storage, with the
    endpoint `choice` names (see `endpoint_for`)."""
    visible = {k: v for k, v in properties.items() if k in CLIENT_VISIBLE_PROPERTIES}
    endpoint = endpoint_for(properties, choice)
    if endpoint:
        # Never a `user:password@` of the endpoint (a warehouse made from an older floe.yaml's bucket URL).
        visible["s3.endpoint"] = strip_userinfo(endpoint)
    if "s3.region" in visible:
        visible.setdefault("client.region", visible["s3.region"])
    return visible
