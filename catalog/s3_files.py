"""pyiceberg's pyarrow FileIO, its S3 files each written with one request: the catalog's metadata files and
ingestion's data files, manifests and lists.

pyiceberg 0.12 builds pyarrow's `S3FileSystem` without `allow_delayed_open`, so every file it writes is
a multipart upload: a request to start it, one for the part, one to complete it, three round trips
where one `PutObject` does. With the option, pyarrow opens the upload only once a part is full and
sends a small file (all of ingestion's manifests and lists, and a quiet table's Parquet files) whole
at close. The catch pyarrow names (a missing bucket is reported at close, not at open) does not
matter here: nothing is read back before a file is closed and committed.

`DelayedOpenFileIO` is `PyArrowFileIO` whose S3 filesystem, built by pyiceberg from the table's and
catalog's properties as usual, is made again with the option set, from the constructor arguments its
pickling support (`__reduce__`) gives. It is the `py-io-impl` of the shared consumer's catalogs, and
the catalog's own FileIO for an S3 warehouse (catalog/storage.py). It lives in the catalog because both
sides use it and the catalog imports nothing of theirs.
pyiceberg and pyarrow are pinned in pyproject.toml; tests/unit/test_pyiceberg_s3.py fails on an upgrade
that stops calling `_initialize_s3_fs` or changes what `__reduce__` gives.
"""

from __future__ import annotations

from typing import Any

from pyarrow.fs import FileSystem, S3FileSystem
from pyiceberg.io.pyarrow import PyArrowFileIO

IO_IMPL = "catalog.s3_files.DelayedOpenFileIO"


def with_delayed_open(filesystem: S3FileSystem) -> S3FileSystem:
    """`filesystem` made again with `allow_delayed_open`: a small file is one `PutObject`."""
    _, (arguments,) = filesystem.__reduce__()
    options: dict[str, Any] = dict(arguments)
    options["allow_delayed_open"] = True
    return S3FileSystem(**options)


class DelayedOpenFileIO(PyArrowFileIO):
    """`PyArrowFileIO` whose S3 files are written with one request each (see the module doc)."""

    def _initialize_s3_fs(self, netloc: str | None) -> FileSystem:
        filesystem = super()._initialize_s3_fs(netloc)
        return with_delayed_open(filesystem) if isinstance(filesystem, S3FileSystem) else filesystem
