"""Orphan files without Spark (`maintenance.orphans`): spellings of one location, Iceberg's hidden-path
rule, the age horizon and confinement to the table's location, and a local listing and delete.

The whole action on a real table (pyiceberg, the in-process catalog; and on S3 through moto) is in
tests/api/test_maintenance.py and tests/api/test_storage_endpoint.py; inside a full pass with Spark in
tests/e2e/test_maintenance.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pyiceberg.io.pyarrow import PyArrowFileIO

from maintenance.orphans import (
    ListedFile,
    delete_files,
    file_key,
    is_hidden,
    list_files,
    orphan_candidates,
    orphans,
)

HORIZON = 1_000_000


@pytest.mark.parametrize(
    ("spellings", "key"),
    [
        (["/wh/t/a.parquet", "file:/wh/t/a.parquet", "file:///wh/t/a.parquet", "file://localhost/wh/t/a.parquet",
          "file:/wh//t/a.parquet"], "/wh/t/a.parquet"),
        (["s3://b/wh/t/a.parquet", "s3a://b/wh/t/a.parquet", "S3N://b/wh//t/a.parquet"], "s3://b/wh/t/a.parquet"),
    ],
)  # fmt: skip
def test_spellings_of_one_location_have_one_key(spellings: list[str], key: str) -> None:
    assert {file_key(s) for s in spellings} == {key}


def test_other_buckets_and_hosts_stay_apart() -> None:
    assert file_key("s3://a/wh/x") != file_key("s3://b/wh/x")
    assert file_key("file://host/wh/x") != file_key("/wh/x")
    # Percent-escapes are file names here (Iceberg writes partition folders with them), never decoded.
    assert file_key("/wh/t/data/c=a%20b/x.parquet") == "/wh/t/data/c=a%20b/x.parquet"


def test_hidden_paths_follow_icebergs_rule() -> None:
    assert is_hidden("data/.x.parquet.crc", ())
    assert is_hidden("data/_SUCCESS", ())
    assert is_hidden(".hidden/x.parquet", ())
    assert is_hidden("_temporary/0/x.parquet", ())
    assert not is_hidden("data/day=2024-03-01/x.parquet", ())
    # A partition field starting with `_` names folders that are not hidden; files still are.
    assert not is_hidden("data/_kafka_day=2024-03-01/x.parquet", ("_kafka_day",))
    assert is_hidden("data/_kafka_day=2024-03-01/x.parquet", ("other",))
    assert is_hidden("data/_kafka_day=1/_x.parquet", ("_kafka_day",))
    assert is_hidden("data/_kafka_dayx/x.parquet", ("_kafka_day",))


def test_candidates_are_old_visible_files_under_the_location() -> None:
    listed = [
        ListedFile("file:///wh/t/data/old.parquet", HORIZON - 1),
        ListedFile("file:///wh/t/data/young.parquet", HORIZON),  # a commit in flight
        ListedFile("file:///wh/t/data/.old.parquet.crc", 0),
        ListedFile("file:///wh/t2/data/neighbour.parquet", 0),  # `t2` is not below `t`
        ListedFile("file:///wh/other.parquet", 0),
    ]
    found = orphan_candidates(listed, "file:/wh/t", HORIZON, ())
    assert [f.location for f in found] == ["file:///wh/t/data/old.parquet"]


def test_referenced_files_are_never_orphans_whatever_their_spelling() -> None:
    candidates = [ListedFile("file:///wh/t/data/a.parquet", 0), ListedFile("file:///wh/t/data/b.parquet", 0)]
    referenced = {file_key("file:/wh/t/data/a.parquet")}
    assert [f.location for f in orphans(candidates, referenced)] == ["file:///wh/t/data/b.parquet"]
    s3 = [ListedFile("s3://b/wh/t/data/a.parquet", 0)]
    assert orphans(s3, {file_key("s3a://b/wh/t/data/a.parquet")}) == []


def test_a_local_folder_is_listed_and_files_deleted_with_their_checksums(tmp_path: Path) -> None:
    table = tmp_path / "t"
    (table / "data" / "day=1").mkdir(parents=True)
    data = table / "data" / "day=1" / "x.parquet"
    data.write_bytes(b"x")
    checksum = table / "data" / "day=1" / ".x.parquet.crc"
    checksum.write_bytes(b"c")
    os.utime(data, ns=(5_000_000_000, 5_000_000_000))
    listed = {f.location: f.modified_ms for f in list_files(PyArrowFileIO(), f"file:{table}")}
    assert listed[f"file://{data}"] == 5_000
    assert f"file://{checksum}" in listed
    assert list_files(PyArrowFileIO(), f"file:{tmp_path / 'missing'}") == []

    assert delete_files(PyArrowFileIO(), [f"file:{data}", f"file://{table}/gone.parquet"]) == 2
    assert not data.exists()
    assert not checksum.exists()
