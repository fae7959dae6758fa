"""A failed storage call answers without the server's paths (issue 29 item 11): pyarrow's and the OS's
error texts name the file, so the answer carries the error's type only and the log keeps the details."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pyarrow.fs as pafs
import pytest

from catalog.errors import ServiceUnavailable
from catalog.storage import StorageRunner


def test_a_missing_file_is_reported_without_its_path(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    missing = f"{tmp_path}/secret-folder/data.parquet"

    def read() -> None:
        pafs.LocalFileSystem().open_input_file(missing)

    runner = StorageRunner(total=2, per_tenant=1, timeout_seconds=30)
    with (
        caplog.at_level(logging.WARNING, logger="catalog.storage"),
        pytest.raises(ServiceUnavailable) as caught,
    ):
        asyncio.run(runner.run("tenant", read))
    assert caught.value.message == "Storage request failed: FileNotFoundError"
    assert "secret-folder" not in str(caught.value)
    assert "secret-folder" in caplog.text  # the operator still sees which file
