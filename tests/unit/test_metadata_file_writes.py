"""How a commit's metadata files are written (`StorageRunner.write_many`): never over an existing file;
small ones on a local disk right on the event loop (a worker thread's hand-off cost several times the
write), larger ones and object storage in a worker thread; a failure either way is a 503 without paths."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import ClassVar

import pytest

from catalog.errors import ServiceUnavailable
from catalog.storage import INLINE_WRITE_MAX_BYTES, Storage, StorageRunner


class RecordingStorage(Storage):
    """A local storage that notes the thread each `write_many` ran in."""

    threads: ClassVar[list[int]] = []  # reset by the test

    def write_many(self, files: Iterable[tuple[str, bytes]]) -> None:
        RecordingStorage.threads.append(threading.get_ident())
        super().write_many(files)


def write(storage: Storage, files: list[tuple[str, bytes]]) -> int:
    """Write through a runner; the event loop's thread id."""

    async def run() -> int:
        await StorageRunner(2, 2, 30.0).write_many("tenant", storage, files)
        return threading.get_ident()

    return asyncio.run(run())


def test_small_local_files_are_written_on_the_loop_and_large_ones_in_a_thread(tmp_path: Path) -> None:
    RecordingStorage.threads = []
    storage = RecordingStorage(tmp_path.as_uri(), {}, tmp_path.as_uri())
    small = [(f"{tmp_path.as_uri()}/metadata/{n}.metadata.json", b"{}" * 100) for n in range(3)]
    loop_thread = write(storage, small)
    large = [(f"{tmp_path.as_uri()}/metadata/large.metadata.json", b"x" * (INLINE_WRITE_MAX_BYTES + 1))]
    other_loop = write(storage, large)
    assert RecordingStorage.threads[0] == loop_thread
    assert RecordingStorage.threads[1] != other_loop
    written = sorted(p.name for p in (tmp_path / "metadata").iterdir())
    assert written == ["0.metadata.json", "1.metadata.json", "2.metadata.json", "large.metadata.json"]
    assert (tmp_path / "metadata" / "0.metadata.json").read_bytes() == b"{}" * 100


@pytest.mark.parametrize("size", [10, INLINE_WRITE_MAX_BYTES + 1])
def test_an_existing_file_is_never_overwritten_and_the_error_names_no_path(tmp_path: Path, size: int) -> None:
    storage = Storage(tmp_path.as_uri(), {}, tmp_path.as_uri())
    taken = tmp_path / "secret-folder" / "v1.metadata.json"
    taken.parent.mkdir()
    taken.write_bytes(b"first")
    with pytest.raises(ServiceUnavailable) as caught:
        write(storage, [(taken.as_uri(), b"x" * size)])
    assert caught.value.message == "Storage request failed: FileExistsError"
    assert "secret-folder" not in str(caught.value)
    assert taken.read_bytes() == b"first"


def test_a_location_outside_the_storage_root_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    root = tmp_path / "cluster"
    storage = Storage(tmp_path.as_uri(), {}, root.as_uri())
    outside = tmp_path / "other" / "v1.metadata.json"
    with pytest.raises(Exception, match="outside"):
        write(storage, [(outside.as_uri(), b"{}")])
    assert not outside.exists()
