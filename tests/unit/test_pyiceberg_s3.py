"""The pyiceberg and pyarrow internals catalog/s3_files.py relies on: fails on an upgrade that stops
calling `_initialize_s3_fs` or changes what an `S3FileSystem`'s `__reduce__` gives, before any ingestion
writes to S3 with three requests a file again. (The requests themselves, one `PUT` a file, are counted
against moto's S3 server by tests/e2e/test_shared_ingest_s3.py.)"""

from __future__ import annotations

from pathlib import Path

from pyarrow.fs import LocalFileSystem, S3FileSystem
from pyiceberg.io import load_file_io
from pyiceberg.io.pyarrow import PyArrowFileIO

from catalog.s3_files import IO_IMPL, DelayedOpenFileIO, with_delayed_open

S3 = {
    "s3.endpoint": "http://127.0.0.1:9",
    "s3.access-key-id": "key-id",
    "s3.secret-access-key": "not-a-secret",
    "s3.region": "eu-west-1",
    "s3.path-style-access": "true",
}


def _options(filesystem: S3FileSystem) -> dict[str, object]:
    _, (arguments,) = filesystem.__reduce__()
    return dict(arguments)


def test_py_io_impl_loads_it_and_its_s3_filesystem_opens_late_with_pyicebergs_settings() -> None:
    io = load_file_io({"py-io-impl": IO_IMPL, **S3})
    assert isinstance(io, DelayedOpenFileIO)
    ours = io.fs_by_scheme("s3", "bucket")
    theirs = PyArrowFileIO(S3).fs_by_scheme("s3", "bucket")
    assert isinstance(ours, S3FileSystem)
    assert isinstance(theirs, S3FileSystem)
    assert _options(ours) == _options(theirs) | {"allow_delayed_open": True}
    assert _options(ours)["endpoint_override"] == "http://127.0.0.1:9"
    assert _options(ours)["access_key"] == "key-id"


def test_with_delayed_open_keeps_every_other_option() -> None:
    given = S3FileSystem(
        access_key="a",
        secret_key="b",
        region="us-east-2",
        endpoint_override="http://127.0.0.1:9",
        request_timeout=7,
        force_virtual_addressing=True,
    )
    assert _options(with_delayed_open(given)) == _options(given) | {"allow_delayed_open": True}


def test_local_files_are_pyicebergs_own(tmp_path: Path) -> None:
    io = DelayedOpenFileIO()
    assert isinstance(io.fs_by_scheme("file", None), LocalFileSystem)
    output = io.new_output(str(tmp_path / "a" / "f.bin"))
    with output.create() as stream:
        stream.write(b"abc")
    assert len(io.new_input(str(tmp_path / "a" / "f.bin"))) == 3


def test_the_default_credential_chain_and_an_assumed_role_stay_as_they_were() -> None:
    for given in (
        S3FileSystem(region="us-east-1"),  # keys from the environment, a profile, or instance metadata
        S3FileSystem(role_arn="arn:aws:iam::123456789012:role/floe", region="us-east-1"),
    ):
        options = _options(with_delayed_open(given))
        assert options == _options(given) | {"allow_delayed_open": True}
        assert options["access_key"] is None
